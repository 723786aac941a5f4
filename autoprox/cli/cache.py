"""``autoprox cache build``: precompute the statistics of a benchmark's architectures."""

from __future__ import annotations

import argparse

from autoprox.cli.options import (
    add_spread_option,
    add_stats_options,
    bench_path,
    executor_from_args,
    plan_from_args,
    str_list,
)
from autoprox.core.errors import CacheError
from autoprox.core.progress import Progress
from autoprox.data.benchmark import BENCH_FILE_NAMES, load_benchmark
from autoprox.data.cache import StatisticsCache, build_cache


def add_parser(sub) -> None:
    cache = sub.add_parser("cache", help="manage the statistics cache")
    cache_sub = cache.add_subparsers(dest="cache_command", required=True)
    build = cache_sub.add_parser("build", help="precompute the statistics of a benchmark's architectures")
    build.add_argument("--bench", help="benchmark file")
    build.add_argument("--space", choices=sorted(BENCH_FILE_NAMES), help="use the space's released file as --bench")
    build.add_argument("--targets", type=str_list, default=(), help="targets (matters with --per-target-stats)")
    add_stats_options(build)
    add_spread_option(build, "also compute the spread statistics' extra entries (S1g..S4g, what searches with "
                             "--spread-terminals read)")


def run(args: argparse.Namespace) -> int:
    from autoprox.core.errors import BenchmarkError
    from autoprox.data.proxy_tables import is_proxy_table
    from autoprox.networks.statistics import resolve_device

    resolve_device(args.device)  # a device this machine lacks is refused before any progress line is drawn
    if args.bench and is_proxy_table(args.bench):
        raise BenchmarkError(f"{args.bench} is a proxy table: it holds its proxies' values and has no networks to "
                             "compute statistics for; rank and score read it as it is")
    bench = load_benchmark(bench_path(args))
    targets = bench.check_targets(list(args.targets) or bench.default_targets())
    plan = plan_from_args(args, targets)
    cache = StatisticsCache(args.cache_dir, args.cache_precision)
    problem = cache.write_problem(bench.space)
    if problem is not None:
        raise CacheError(f"statistics cache {cache.root} cannot be written ({problem.strerror or problem}); "
                         "give --cache-dir a folder you can write")
    with executor_from_args(args) as executor:
        result = build_cache(cache, plan.requests(bench.archs), workers=executor,
                             progress=Progress("statistics", every=15))
    seconds = result["seconds"]
    mean = sum(seconds) / len(seconds) if seconds else 0.0
    replaced = result["replaced"]
    print(f"{result['requests']} entries in {cache.root}: {result['computed']} computed"
          + (f" ({mean:.2f} s each per worker)" if seconds else "")
          + (f", {replaced} of them replacing {'a corrupt entry' if replaced == 1 else 'corrupt entries'}"
             if replaced else "")
          + f", {result['requests'] - result['computed']} already cached")
    return 0
