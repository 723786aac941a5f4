"""``autoprox transfer``: search on all targets but one and report the held-out one."""

from __future__ import annotations

import argparse
from pathlib import Path

from autoprox.cli.options import (
    add_search_options,
    check_resume_options,
    executor_from_args,
    search_settings,
)
from autoprox.core.errors import ConfigError, RunDirError
from autoprox.data.benchmark import load_benchmark

#: Options ``transfer --resume`` honours; any other option given must agree with the study's settings.
RESUME_HONOURED = frozenset({"out", "resume", "quiet"})


def add_parser(sub) -> None:
    transfer = sub.add_parser(
        "transfer", help="search on all targets but one and report the held-out one, for each target in turn",
        description="For each target in turn: a whole search on the other targets into OUT/holdout-<target>, then "
                    "the discovered proxy's Kendall on the held-out target (search and test split) beside the "
                    "parameter count and the best coarse descriptor. Takes every option of 'search'.")
    add_search_options(transfer, out_help="study directory (default runs/transfer-<space>-seed<seed>)",
                       resume_help="continue the study in --out where it stopped, with its recorded settings "
                                   "(any option given must agree with them)", command="transfer")


def run(args: argparse.Namespace) -> int:
    from autoprox.apps.protocols.transfer import (
        TRANSFER_FILE,
        format_transfer,
        recorded_study,
        run_transfer,
    )

    if args.resume:
        if not args.out:
            raise RunDirError("--resume needs --out STUDY_DIR")
        if args.iterations is not None:
            raise ConfigError("--iterations cannot change on --resume of a transfer study")
        settings, space = recorded_study(args.out)
        check_resume_options(args, settings, space, args.out, RESUME_HONOURED)
        with executor_from_args(args) as executor:
            study = run_transfer(None, args.out, resume=True, quiet=args.quiet, executor=executor)
        out = Path(args.out)
    else:
        settings = search_settings(args, evaluation="exact")
        out = Path(args.out or f"runs/transfer-{load_benchmark(settings.bench).space}-seed{args.seed}")
        with executor_from_args(args) as executor:
            study = run_transfer(settings, out, quiet=args.quiet, executor=executor)
    print(format_transfer(study, "test"), end="")
    print(f"written to {out / TRANSFER_FILE}")
    return 0 if study.get("finished") else 130
