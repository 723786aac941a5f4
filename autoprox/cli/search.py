"""``autoprox search``: evolve a zero-cost proxy on a benchmark."""

from __future__ import annotations

import argparse
from pathlib import Path

from autoprox.cli.options import (
    add_search_options,
    executor_from_args,
    given_options,
    search_settings,
    table_values,
)
from autoprox.core.errors import RunDirError
from autoprox.core.numbers import format_float
from autoprox.data.benchmark import load_benchmark


def add_parser(sub) -> None:
    search = sub.add_parser("search", help="evolve a zero-cost proxy on a benchmark")
    add_search_options(search)


def run(args: argparse.Namespace) -> int:
    from autoprox.reports.report import CheckpointReports
    from autoprox.search.engine import run_search
    from autoprox.search.resume import resume_search

    reports = CheckpointReports() if args.report else None

    if args.resume:
        if not args.out:
            raise RunDirError("--resume needs --out RUN_DIR")
        with executor_from_args(args) as executor:
            report = resume_search(args.out, table_values(args), given_options(args), executor=executor,
                                   on_checkpoint=reports)
    else:
        settings = search_settings(args)
        spaces = "+".join(load_benchmark(b).space for b in settings.benches)
        out = args.out or f"runs/{spaces}-seed{args.seed}"
        with executor_from_args(args) as executor:
            report = run_search(settings, out, quiet=args.quiet, executor=executor, on_checkpoint=reports)
    _print_best(report)
    if reports is not None:
        _write_report(report["run"], reports)
    return 0 if report.get("finished") else 130


def _print_best(report: dict) -> None:
    from autoprox.reports.show import params_verdict
    from autoprox.search.engine import TEST_DEFERRED
    from autoprox.search.rundir import BEST

    print(f"best proxy: {report['genome']}")
    print(f"{'target':<16}{'search tau':>12}{'test tau':>10}{'params search':>15}{'params test':>13}")
    for target in report["targets"]:
        row = [report["search"], report["test"], report["params"]["search"], report["params"]["test"]]
        cells = [format_float(r.get("targets", {}).get(target, {}).get("kendall")) for r in row]
        print(f"{target:<16}{cells[0]:>12}{cells[1]:>10}{cells[2]:>15}{cells[3]:>13}")
    cells = [format_float(r.get("jcm")) for r in (report["search"], report["test"], report["params"]["search"], report["params"]["test"])]
    print(f"{'JCM':<16}{cells[0]:>12}{cells[1]:>10}{cells[2]:>15}{cells[3]:>13}")
    deferred = report.get("test", {}).get("none")
    if deferred == TEST_DEFERRED:
        print(f"test figures {deferred}")
    print(f"written to {Path(report['run']) / BEST}")
    verdict = params_verdict(report)
    if verdict:  # the last line: how the proxy compares with the parameter count
        print(verdict)


def _write_report(run: str, reports) -> None:
    """The run's report.html at the end of the search; a report that cannot be written is a warning, as the
    search itself is done and kept."""
    import warnings

    from autoprox.core.errors import AutoproxError, one_line
    from autoprox.reports.report import write_report

    try:
        print(f"report written to {write_report(run, memo=reports.memo)}")
    except AutoproxError as exc:
        warnings.warn(f"report.html not written: {one_line(exc)}", stacklevel=2)
