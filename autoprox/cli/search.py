"""``autoprox search``: evolve a zero-cost proxy on a benchmark."""

from __future__ import annotations

import argparse
from pathlib import Path

from autoprox.cli.options import (
    add_search_options,
    check_resume_options,
    executor_from_args,
    fmt,
    given_options,
    search_settings,
)
from autoprox.core.errors import RunDirError
from autoprox.data.benchmark import load_benchmark

#: Options ``search --resume`` honours: where the benchmark and the cache are, how many processes compute
#: statistics, the new total of iterations, the output. Every other option given must agree with the run.
RESUME_HONOURED = frozenset({"out", "resume", "quiet", "iterations", "workers", "cache_dir", "bench"})


def add_parser(sub) -> None:
    search = sub.add_parser("search", help="evolve a zero-cost proxy on a benchmark")
    add_search_options(search, out_help="run directory (default runs/<space>-seed<seed>)",
                       resume_help="continue the run in --out where it stopped, with its recorded settings; "
                                   "--iterations (a new total), --workers, --cache-dir and --bench (the same file "
                                   "elsewhere) are honoured, any other option must agree with the run")


def run(args: argparse.Namespace) -> int:
    from autoprox.search.engine import run_search
    from autoprox.search.settings import recorded_settings

    if args.resume:
        if not args.out:
            raise RunDirError("--resume needs --out RUN_DIR")
        settings, space = recorded_settings(args.out)
        check_resume_options(args, settings, space, args.out, RESUME_HONOURED)
        given = given_options(args)
        with executor_from_args(args) as executor:
            report = run_search(None, args.out, resume=True, quiet=args.quiet, extend_iterations=args.iterations,
                                bench=args.bench if "bench" in given else None,
                                workers=args.workers if "workers" in given else None,
                                cache_dir=args.cache_dir if "cache_dir" in given else None, executor=executor)
    else:
        settings = search_settings(args)
        out = args.out or f"runs/{load_benchmark(settings.bench).space}-seed{args.seed}"
        with executor_from_args(args) as executor:
            report = run_search(settings, out, quiet=args.quiet, executor=executor)
    _print_best(report)
    return 0 if report.get("finished") else 130


def _print_best(report: dict) -> None:
    from autoprox.reports.show import params_verdict
    from autoprox.search.engine import TEST_DEFERRED

    print(f"best proxy: {report['genome']}")
    print(f"{'target':<16}{'search tau':>12}{'test tau':>10}{'params search':>15}{'params test':>13}")
    for target in report["targets"]:
        row = [report["search"], report["test"], report["params"]["search"], report["params"]["test"]]
        cells = [fmt(r.get("targets", {}).get(target, {}).get("kendall")) for r in row]
        print(f"{target:<16}{cells[0]:>12}{cells[1]:>10}{cells[2]:>15}{cells[3]:>13}")
    cells = [fmt(r.get("jcm")) for r in (report["search"], report["test"], report["params"]["search"], report["params"]["test"])]
    print(f"{'JCM':<16}{cells[0]:>12}{cells[1]:>10}{cells[2]:>15}{cells[3]:>13}")
    verdict = params_verdict(report)
    if verdict:
        print(verdict)
    deferred = report.get("test", {}).get("none")
    if deferred == TEST_DEFERRED:
        print(f"test figures {deferred}")
    print(f"written to {Path(report['run']) / 'best.json'}")
