"""``autoprox evaluate``: the evaluation protocol of a search configuration (outer folds, baselines)."""

from __future__ import annotations

import argparse
from pathlib import Path

from autoprox.cli.options import (
    add_command_options,
    add_search_options,
    executor_from_args,
    search_settings,
)
from autoprox.core.errors import RunDirError
from autoprox.data.benchmark import load_benchmark


def add_parser(sub) -> None:
    evaluate = sub.add_parser(
        "evaluate", help="outer K-fold protocol: a search per fold, its proxy and descriptor baselines on the fold",
        description="Cut all the benchmark's architectures into K outer folds (repeated with other shuffles); for each "
                    "fold run a whole search on the other folds into OUT/repeat-R/fold-K and score its proxy on the "
                    "fold, beside the parameter count, the best coarse descriptor and a rank-linear blend of "
                    "descriptors chosen on the same search part. Prints test Kendall mean +- sd over folds and the "
                    "paired differences with 95% intervals; OUT/protocol.json holds everything. Takes every option "
                    "of 'search' (--split-seed and --search-fraction are replaced by the outer folds; --split-seed "
                    "still seeds --cv-folds).",
    )
    add_search_options(evaluate, out_help="protocol directory (default runs/protocol-<space>-seed<seed>)",
                       resume_help="continue the protocol in --out where it stopped (search options may be left out; "
                                   "given ones must match the recorded ones)", command="evaluate")
    add_command_options(evaluate, "evaluate")


def run(args: argparse.Namespace) -> int:
    from autoprox.apps.protocol import run_protocol
    from autoprox.apps.protocol_summary import format_protocol
    from autoprox.search.rundir import PROTOCOL

    if args.rank_formulas and not args.leave_space_out:
        from autoprox.core.errors import ConfigError

        raise ConfigError("--rank-formulas is a way of the leave-one-space-out protocol: add --leave-space-out")
    if args.leave_space_out:
        return _leave_space_out(args)
    options = {"folds": args.folds, "repeats": args.repeats, "protocol_seed": args.protocol_seed,
               "fold_workers": args.fold_workers, "selection": args.selection, "quiet": args.quiet,
               "bags": args.bags, "bag_fraction": args.bag_fraction}
    if args.reuse_searches and not args.resume:
        if not args.out:
            raise RunDirError("--reuse-searches needs --out NEW_PROTOCOL_DIR")
        settings = search_settings(args, evaluation="exact") if (args.space or args.bench) else None
        out = Path(args.out)
        with executor_from_args(args) as executor:
            protocol = run_protocol(settings, out, executor=_fold_executor(args, executor),
                                    reuse_searches=args.reuse_searches, **options)
    elif args.resume:
        if not args.out:
            raise RunDirError("--resume needs --out PROTOCOL_DIR")
        settings = search_settings(args, evaluation="exact") if (args.space or args.bench) else None
        out = Path(args.out)
        with executor_from_args(args) as executor:
            protocol = run_protocol(settings, out, resume=True, executor=_fold_executor(args, executor), **options)
    else:
        settings = search_settings(args, evaluation="exact")
        out = Path(args.out or f"runs/protocol-{load_benchmark(settings.bench).space}-seed{args.seed}")
        with executor_from_args(args) as executor:
            protocol = run_protocol(settings, out, executor=_fold_executor(args, executor), **options)
    print(format_protocol(protocol), end="")
    print(f"written to {out / PROTOCOL}")
    return 0 if protocol.get("finished") else 130


def _fold_executor(args: argparse.Namespace, executor):
    """Folds go to the cluster only when --scheduler names one; else --fold-workers decides."""
    return executor if getattr(args, "scheduler", None) else None


def _leave_space_out(args: argparse.Namespace) -> int:
    """``evaluate --leave-space-out``: the leave-one-space-out protocol (:mod:`autoprox.apps.cross_space`),
    or with ``--rank-formulas`` the N-space protocol over proxy tables (:mod:`autoprox.apps.space_protocol`)."""
    if args.rank_formulas:
        from autoprox.cli.tables import run_space_protocol_command

        return run_space_protocol_command(args)
    from autoprox.apps.cross_space import format_cross_space, run_cross_space
    from autoprox.search.rundir import PROTOCOL
    from autoprox.core.errors import ConfigError

    zoo = None if args.zoo_baselines is None else [z for z in args.zoo_baselines if z != "none"]
    iterations = None
    if args.resume:
        if not args.out:
            raise RunDirError("--resume needs --out PROTOCOL_DIR")
        settings = search_settings(args, evaluation="exact") if (args.space or args.bench) else None
        out = Path(args.out)
        iterations = args.iterations  # a new total for every search
    else:
        settings = search_settings(args, evaluation="exact")
        if not settings.multi_space:
            raise ConfigError("--leave-space-out needs at least two labelled spaces: give --space (or --bench) "
                              "more than once")
        spaces = "+".join(load_benchmark(b).space for b in settings.benches)
        out = Path(args.out or f"runs/leave-space-out-{spaces}-seed{args.seed}")
    protocol = run_cross_space(settings, out, seeds=args.seeds, zoo=zoo, bootstrap=args.bootstrap,
                               resume=args.resume, quiet=args.quiet,
                               search_workers=args.fold_workers, iterations=iterations)
    print(format_cross_space(protocol), end="")
    print(f"written to {out / PROTOCOL}")
    return 0 if protocol.get("finished") else 130

