"""``autoprox search``: evolve a zero-cost proxy on a benchmark."""

from __future__ import annotations

import argparse
import shlex
import warnings
from contextlib import nullcontext
from pathlib import Path

from autoprox.cli.options import (
    add_search_options,
    executor_from_args,
    given_options,
    refuse_unread_options,
    search_settings,
    table_values,
)
from autoprox.core.errors import RunDirError, SchedulerLostError
from autoprox.core.numbers import format_float
from autoprox.data.benchmark import load_benchmark
from autoprox.search.rundir import BEST, CONFIG


def add_parser(sub) -> None:
    from autoprox.search.table_search import TableSearchSettings

    reads = ", ".join(f"--{name}" for name in TABLE_SEARCH_READS)
    search = sub.add_parser(
        "search", help="evolve a zero-cost proxy on a benchmark",
        description="Evolve a zero-cost proxy on ViT-Bench-101 or a benchmark of your own (--space, --bench FILE). "
                    "With --bench TABLE.csv, a proxy table (id, accuracy columns, then proxy columns) whose target "
                    "is labelled on some rows, it fits a weighted formula to the labelled rows instead (the manual's "
                    f"'A proxy from a few labels'), and reads only {reads}: one target (default the table's first "
                    f"accuracy column), --iterations default {TableSearchSettings().iterations}, which --resume "
                    "does not extend.")
    add_search_options(search)


def run(args: argparse.Namespace) -> int:
    from autoprox.reports.html.report import CheckpointReports
    from autoprox.search.engine import finished_search_message, nothing_to_resume, run_search
    from autoprox.search.resume import resume_search

    if _is_table_search(args):
        return _table_search(args)
    reports = CheckpointReports() if args.report else None

    done = None
    if args.resume:
        if not args.out:
            raise RunDirError("--resume needs --out RUN_DIR")
        out = args.out
        done = nothing_to_resume(out, table_values(args)["iterations"] if "iterations" in given_options(args) else None)
    else:
        settings = search_settings(args)
        spaces = "+".join(load_benchmark(b).space for b in settings.benches)
        out = args.out or f"runs/{spaces}-seed{args.seed}"
    try:
        with executor_from_args(args) if done is None else nullcontext() as executor:
            if args.resume:  # a finished run's options are still checked; its line is said here, on stdout
                report = resume_search(out, table_values(args) | ({"quiet": True} if done else {}),
                                       given_options(args), executor=executor, on_checkpoint=reports)
            else:
                report = run_search(settings, out, quiet=args.quiet, executor=executor, on_checkpoint=reports)
    except SchedulerLostError as exc:
        raise exc.with_hint("the run keeps what it computed: continue it with "
                            f"autoprox search --resume --out {shlex.quote(str(out))}") from None
    if done is not None:  # nothing computed, nothing rewritten
        print(finished_search_message(out, done))
        return 0
    _print_best(report)
    if reports is not None:
        _write_report(report["run"], reports)
    return 0 if report.get("finished") else 130


#: The options a table search reads (``search --bench TABLE.csv``); any other is refused in one line.
TABLE_SEARCH_READS = ("bench", "targets", "seed", "iterations", "out", "resume", "quiet")
TABLE_SEARCH_OPTIONS = frozenset(TABLE_SEARCH_READS)


def _is_table_search(args: argparse.Namespace) -> bool:
    """Whether the command searches a proxy table: ``--bench`` names one, or ``--resume`` a table search's run."""
    from autoprox.core.atomic import read_json_file
    from autoprox.data.proxy_tables import is_proxy_table
    from autoprox.search.table_run import is_table_run

    from autoprox.cli.options import benches_given

    given = benches_given(args)
    benches = [(value, is_proxy_table(value)) for kind, value in given if kind == "bench"]  # each file read once
    tables = [value for value, table in benches if table]
    if args.resume and args.out and (Path(args.out) / CONFIG).is_file():
        table_run = is_table_run(read_json_file(Path(args.out) / CONFIG, "a run's config.json", RunDirError))
        others = [value for value, table in benches if not table]
        if table_run and others:
            raise RunDirError(f"{args.out} is a proxy-table search, and {others[0]} is not a proxy table: resume it "
                              f"with its own table (leave --bench out to read the one it recorded)")
        if not table_run and tables:
            raise RunDirError(f"{args.out} is a search of ViT statistics, which a proxy table ({tables[0]}) cannot "
                              f"continue: search the table into a new --out")
        return table_run
    return len(given) == 1 and len(tables) == 1


def _table_search(args: argparse.Namespace) -> int:
    """``search --bench TABLE.csv --targets T --out RUN``: a weighted formula on the table's labelled rows."""
    import sys

    from autoprox.search.table_run import resume_options, run_table_search
    from autoprox.genome.weighted import WeightedFormula
    from autoprox.search.table_search import FEW_LABELS, CapChoice

    refuse_unread_options(args, TABLE_SEARCH_OPTIONS, "a proxy-table search")
    given = given_options(args)
    values = table_values(args)
    if not args.out:  # as the statistics search says it
        raise RunDirError("--resume needs --out RUN_DIR" if args.resume else "a proxy-table search needs --out RUN_DIR")
    targets = values.get("targets") if "targets" in given else None
    # with --resume: the recorded settings, each option given checked against them
    settings, resumed = resume_options(*(getattr(args, name) if name in given else None
                                         for name in ("seed", "iterations")), resume=args.resume)
    finished: list[str] = []  # the line a resume of a finished run says (it reads best.json once)
    report = run_table_search(args.bench, targets, args.out, settings, resume=args.resume, quiet=args.quiet,
                              command=["autoprox", *sys.argv[1:]], given=resumed, say_finished=finished.append)
    if finished:  # nothing computed, nothing rewritten
        print(*finished)
        return 0
    if report.get("finished"):
        bench = (args.bench or _recorded_table(args.out)) if args.resume else args.bench
        search = report["search"]
        shown, left_out = WeightedFormula.from_json(report["formula"]).shortened()
        print(f"best proxy: {shown}" + (f" ({left_out:,} smaller weights left out; the whole formula: autoprox show "
                                        f"{shlex.quote(str(report['run']))})" if left_out else ""))
        print(f"{report['target']}: out-of-bag Kendall {format_float(search['out_of_bag_kendall'])} on "
              f"{search['labelled_rows']} labelled rows ({CapChoice.from_json(report['inner_cv']).describe(figures=False)})")
        if search["labelled_rows"] < FEW_LABELS:
            print(f"with fewer than {FEW_LABELS} labelled rows the out-of-bag Kendall is optimistic"
                  + _out_of_fold(report))
        print(f"written to {Path(report['run']) / BEST}; score every row with: autoprox score --proxy "
              f"{shlex.quote(str(Path(report['run']) / BEST))} --bench {shlex.quote(str(bench))} --out scores.csv")
        return 0
    return 130


def _out_of_fold(report: dict) -> str:
    """The clause naming the inner cross-validation's out-of-fold Kendall of the cap kept, when it ran."""
    cap = str(report["inner_cv"]["cap"])
    kendall = report["inner_cv"]["out_of_fold_kendall"].get(cap)
    if kendall is None:
        return ""
    return f"; the out-of-fold Kendall of the inner cross-validation, {format_float(kendall)}, is the fairer estimate"


def _recorded_table(out: str) -> str:
    """The path of the table a table run was searched on, as its ``config.json`` records it."""
    from autoprox.core.atomic import read_json_file

    return read_json_file(Path(out) / CONFIG, "a run's config.json", RunDirError)["table"]["path"]


def _print_best(report: dict) -> None:
    from autoprox.reports.show import params_verdict, small_test_note
    from autoprox.search.engine import TEST_DEFERRED
    from autoprox.search.rundir import BEST

    print(f"best proxy: {report['genome']}")
    absent = report.get("test", {}).get("none")  # no test part, or its figures deferred to a resume
    columns = [("search tau", report["search"], 12), ("test tau", report["test"], 10),
               ("params search", report["params"]["search"], 15), ("params test", report["params"]["test"], 13)]
    if absent:
        columns = [column for column in columns if "test" not in column[0]]
    print(f"{'target':<16}" + "".join(f"{title:>{width}}" for title, _, width in columns))
    for target in report["targets"]:
        taus = (block.get("targets", {}).get(target, {}).get("kendall") for _, block, _ in columns)
        print(f"{target:<16}" + "".join(f"{format_float(tau):>{width}}" for tau, (_, _, width) in zip(taus, columns)))
    print(f"{'JCM':<16}" + "".join(f"{format_float(block.get('jcm')):>{width}}" for _, block, width in columns))
    if absent == TEST_DEFERRED:
        print(f"test figures {absent}")
    elif absent:
        print(absent)
    print(f"written to {Path(report['run']) / BEST}")
    verdict = params_verdict(report)
    small = small_test_note(report)
    if small:
        warnings.warn(small, stacklevel=2)
    if verdict:  # the last line: how the proxy compares with the parameter count
        print(verdict)


def _write_report(run: str, reports) -> None:
    """The run's report.html at the end of the search; a report that cannot be written is a warning, as the
    search itself is done and kept."""
    from autoprox.core.errors import AutoproxError, one_line
    from autoprox.reports.html.report import write_report

    try:
        print(f"report written to {write_report(run, memo=reports.memo)}")
    except AutoproxError as exc:
        warnings.warn(f"report.html not written: {one_line(exc)}", stacklevel=2)
