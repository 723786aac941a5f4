"""``autoprox evaluate``: the evaluation protocol of a search configuration (outer folds, baselines)."""

from __future__ import annotations

import argparse
import sys
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
    from autoprox.apps.protocols.outer_folds import run_protocol
    from autoprox.apps.protocols.summary import format_protocol
    from autoprox.search.rundir import PROTOCOL

    _check_counts(args)
    if args.few_labels:
        return _few_labels(args)
    _refuse_resume_of_few_labels(args)
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


def _check_counts(args: argparse.Namespace) -> None:
    """Refuse, before anything is read or written, a count that cannot be: ``--repeats`` below 1, ``--bootstrap``
    below 0 (0, no resamples, only where the protocol takes it: not with ``--rank-formulas``, whose intervals
    need resamples)."""
    from autoprox.core.errors import ConfigError

    if args.repeats is not None and args.repeats < 1:
        raise ConfigError(f"--repeats must be at least 1, got {args.repeats}")
    least = 1 if args.rank_formulas else 0
    if args.bootstrap is not None and args.bootstrap < least:
        raise ConfigError(f"--bootstrap must be at least {least} (resamples"
                          + (" of each left-out space's rows" if least else "; 0: no interval") + f"), got {args.bootstrap}")


def _fold_executor(args: argparse.Namespace, executor):
    """Folds go to the cluster only when --scheduler names one; else --fold-workers decides."""
    return executor if getattr(args, "scheduler", None) else None


def _leave_space_out(args: argparse.Namespace) -> int:
    """``evaluate --leave-space-out``: the leave-one-space-out protocol (:mod:`autoprox.apps.protocols.cross_space`),
    or with ``--rank-formulas`` the N-space protocol over proxy tables (:mod:`autoprox.apps.protocols.space`)."""
    if args.rank_formulas:
        from autoprox.cli.tables import run_space_protocol_command

        return run_space_protocol_command(args)
    from autoprox.apps.protocols.cross_space import format_cross_space, run_cross_space
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



#: The options the few-label protocol reads (``evaluate --few-labels``); any other is refused in one line.
FEW_LABELS_OPTIONS = frozenset({"few_labels", "repeats", "bench", "space", "targets", "out", "methods",
                                "protocol_seed", "workers", "resume", "quiet"})


def _refuse_resume_of_few_labels(args: argparse.Namespace) -> None:
    """``evaluate --resume --out DIR`` where DIR holds a few-label protocol: RunDirError giving its options back
    (its k values, draws, methods, seed and tables), which --resume needs, where the protocols' own check could only
    say that DIR has no protocol.json; nothing for any other folder."""
    from autoprox.apps.protocols.few_labels import FEW_LABELS_FILE
    from autoprox.core.atomic import load_json
    from autoprox.search.rundir import PROTOCOL

    folder = Path(args.out) if args.resume and args.out else None
    if folder is None or (folder / PROTOCOL).is_file() or not (folder / FEW_LABELS_FILE).is_file():
        return
    try:
        spec = load_json((folder / FEW_LABELS_FILE).read_text(encoding="utf-8"))["spec"]
        given = [f"--few-labels {','.join(str(k) for k in spec['ks'])}", f"--repeats {spec['repeats']}",
                 f"--methods {','.join(spec['methods'])}", f"--protocol-seed {spec['seed']}"]
        tables = ", ".join(str(t["name"]) for t in spec["tables"])
    except (OSError, ValueError, KeyError, TypeError):
        given, tables = ["--few-labels K,K,..."], "the same"
    raise RunDirError(f"{folder} holds a few-label protocol ({FEW_LABELS_FILE}), which --resume continues with the "
                      f"options that made it: autoprox evaluate {' '.join(given)}, --bench or --space of its tables "
                      f"({tables}), --resume --out {folder}")


def _few_labels_resume(args: argparse.Namespace) -> str:
    """The command that goes on with this few-label protocol: its tables, targets, ks, draws, methods and seed
    (what its record is checked against; the tables are not recorded by path) and ``--resume``."""
    import shlex

    from autoprox.cli.options import benches_given

    parts = ["autoprox", "evaluate", "--few-labels", ",".join(args.few_labels)]
    for kind, value in benches_given(args):
        parts += [f"--{kind}", str(value)]
    for flag, value in (("--targets", args.targets), ("--methods", args.methods)):
        if value:
            parts += [flag, ",".join(value)]
    for flag, value in (("--repeats", args.repeats), ("--protocol-seed", args.protocol_seed)):
        if value is not None:
            parts += [flag, str(value)]
    return shlex.join(parts + ["--resume", "--out", str(args.out)])


def _few_labels(args: argparse.Namespace) -> int:
    """``evaluate --few-labels 20,50,100``: the sample-efficiency protocol over proxy tables
    (:mod:`autoprox.apps.protocols.few_labels`)."""
    from autoprox.apps.protocols.few_labels import FEW_LABELS_FILE, format_few_labels, run_few_labels
    from autoprox.cli.options import benches_given, refuse_unread_options
    from autoprox.core.errors import ConfigError
    from autoprox.data.proxy_tables import load_table_space, read_proxy_table

    refuse_unread_options(args, FEW_LABELS_OPTIONS, "the few-label protocol")
    try:
        ks = [int(k) for k in args.few_labels]
    except ValueError:
        raise ConfigError(f"--few-labels takes whole numbers of labelled rows, e.g. 20,50,100; got "
                          f"{','.join(args.few_labels)}") from None
    if not args.out:
        raise RunDirError("--few-labels needs --out DIR")
    firsts = []  # each table with the target it takes when --targets is not given
    for kind, value in benches_given(args):
        if kind == "space":
            space = load_table_space(value)
            firsts += [(table, targets[0]) for table, targets in zip(space.tables, space.targets)]
        else:
            table = read_proxy_table(value)
            firsts.append((table, table.targets[0]))
    tables = [(table, target) for table, first in firsts  # each target its own entry
              for target in table.check_targets(list(args.targets) if args.targets else [first])]
    if not tables:
        raise ConfigError("--few-labels needs proxy tables: --bench TABLE.csv or --space of a packaged table space")
    record = run_few_labels(tables, ks, args.repeats, args.out, methods=args.methods,
                            seed=args.protocol_seed or 0, workers=args.workers, resume=args.resume,
                            say=lambda line: print(line, file=sys.stderr, flush=True), progress=not args.quiet,
                            resume_command=_few_labels_resume(args))
    print(format_few_labels(record), end="")
    print(f"written to {Path(args.out) / FEW_LABELS_FILE}")
    return 0
