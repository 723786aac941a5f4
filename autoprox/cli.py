"""The ``autoprox`` command line: ``search``, ``rank`` and ``cache build``.

User errors (a bad file, an unknown target, a malformed genome) print one line
``autoprox: error: ...`` and exit with status 2; nothing already computed is lost.
``AUTOPROX_DEBUG=1`` shows the full traceback instead.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import warnings
from pathlib import Path
from typing import Sequence

from autoprox.benchmark import BENCH_FILE_NAMES, BenchmarkError, default_bench_path, load_benchmark, split_benchmark
from autoprox.cache import PRECISIONS, StatisticsCache, build_cache
from autoprox.evolution import EvolutionConfig, SearchError
from autoprox.genome import GenomeError
from autoprox.progress import Progress
from autoprox.proxies import ProxyError, resolve_proxy
from autoprox.rundir import RunDirError
from autoprox.spaces import ArchitectureError
from autoprox.statistics import InputSpecError

USER_ERRORS = (
    ArchitectureError, BenchmarkError, GenomeError, InputSpecError, ProxyError, RunDirError, SearchError, ValueError,
    FileNotFoundError, PermissionError, IsADirectoryError,
)


def _int_list(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def _str_list(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _weights(text: str) -> dict[str, float]:
    weights = {}
    for part in _str_list(text):
        name, _, value = part.partition("=")
        try:
            weights[name] = float(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"weights look like c100_kd=1,flower_kd=0.5; got {part!r}") from None
    return weights


def _add_stats_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("statistics")
    group.add_argument("--input", default="gaussian",
                       help="minibatch: gaussian (default), ones, or images:DIR (a folder of real images)")
    group.add_argument("--batch-size", type=int, default=8, help="images per minibatch (default 8)")
    group.add_argument("--stat-seeds", type=_int_list, default=(0,),
                       help="initialisation seeds, comma separated; scores are averaged over them (default 0)")
    group.add_argument("--per-target-stats", action="store_true",
                       help="one statistics set per target, with that dataset's class count (default: one 100-class set)")
    group.add_argument("--cache-dir", default=None, help="statistics cache (default $AUTOPROX_CACHE or ~/.cache/autoprox)")
    group.add_argument("--cache-precision", choices=PRECISIONS, default="float16",
                       help="how statistics are stored (default float16 with a power-of-two scale)")
    group.add_argument("--workers", type=int, default=2, help="parallel processes for statistics (default 2)")


def _bench_path(args: argparse.Namespace) -> str:
    if args.bench:
        return args.bench
    if getattr(args, "space", None):
        return str(default_bench_path(args.space))
    raise BenchmarkError("give --bench FILE (or --space to use the released file for that space)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="autoprox", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    search = sub.add_parser("search", help="evolve a zero-cost proxy on a benchmark",
                            formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    search.add_argument("--space", choices=sorted(BENCH_FILE_NAMES), help="search space (picks its released benchmark file)")
    search.add_argument("--bench", help="benchmark file (default: the space's released file, found without flags)")
    search.add_argument("--out", help="run directory (default runs/<space>-seed<seed>)")
    search.add_argument("--resume", action="store_true", help="continue the run in --out where it stopped")
    search.add_argument("--targets", type=_str_list, default=(),
                        help="comma-separated targets (default: the KD columns plus imagenet_super)")
    search.add_argument("--weights", type=_weights, default={}, help="JCM weights, e.g. c100_kd=2,flower_kd=1 (default equal)")
    search.add_argument("--split-seed", type=int, default=0, help="seed of the search/test split")
    search.add_argument("--search-fraction", type=float, default=0.6, help="share of architectures searched on")
    search.add_argument("--seed", type=int, default=0, help="seed of the evolution")
    defaults = EvolutionConfig()
    search.add_argument("--population", type=int, default=defaults.population_size)
    search.add_argument("--iterations", type=int, default=None,
                        help=f"iterations (default {defaults.iterations}; with --resume, a new total)")
    search.add_argument("--sample-ratio", type=float, default=defaults.sample_ratio, help="share of the population sampled per iteration")
    search.add_argument("--top-k", type=int, default=defaults.top_k, help="parent drawn among the sample's top k")
    search.add_argument("--margin", type=float, default=defaults.margin, help="a child joins if JCM(child) - JCM(parent) >= margin")
    search.add_argument("--retry-cap", type=int, default=defaults.retry_cap, help="mutations tried per iteration")
    search.add_argument("--gene-probability", type=float, default=defaults.gene_probability, help="chance each gene is redrawn")
    search.add_argument("--seed-proxies", type=_str_list, default=(),
                        help="genome strings or proxy JSON files put into the initial population")
    search.add_argument("--quiet", action="store_true", help="no progress output")
    _add_stats_options(search)

    rank = sub.add_parser("rank", help="correlate a proxy's scores with a benchmark's accuracies")
    rank.add_argument("--proxy", required=True, help="params, flops, a genome string, or a proxy JSON such as best.json")
    rank.add_argument("--bench", help="benchmark file (.pth released format, or .jsonl/.json)")
    rank.add_argument("--space", choices=sorted(BENCH_FILE_NAMES), help="use the space's released file as --bench")
    rank.add_argument("--split", choices=("all", "search", "test"), default="all", help="which architectures (default all)")
    rank.add_argument("--split-seed", type=int, default=None, help="split seed (default: the proxy run's, else 0)")
    rank.add_argument("--search-fraction", type=float, default=None, help="search share (default: the run's, else 0.6)")
    rank.add_argument("--targets", type=_str_list, default=(), help="comma-separated targets (default: all columns)")
    rank.add_argument("--json", action="store_true", help="print JSON: target -> {kendall, spearman, pearson, n}")
    _add_stats_options(rank)

    cache = sub.add_parser("cache", help="manage the statistics cache")
    cache_sub = cache.add_subparsers(dest="cache_command", required=True)
    build = cache_sub.add_parser("build", help="precompute the statistics of a benchmark's architectures")
    build.add_argument("--bench", help="benchmark file")
    build.add_argument("--space", choices=sorted(BENCH_FILE_NAMES), help="use the space's released file as --bench")
    build.add_argument("--targets", type=_str_list, default=(), help="targets (matters with --per-target-stats)")
    _add_stats_options(build)
    return parser


def _plan_from_args(args: argparse.Namespace, targets: Sequence[str]):
    from autoprox.search import SearchSettings, stats_plan

    settings = SearchSettings(bench="", input=args.input, batch_size=args.batch_size, stat_seeds=tuple(args.stat_seeds),
                              per_target_stats=args.per_target_stats)
    return stats_plan(settings, targets)


def cmd_search(args: argparse.Namespace) -> int:
    from autoprox.search import SearchSettings, run_search

    if args.resume:
        if not args.out:
            raise RunDirError("--resume needs --out RUN_DIR")
        report = run_search(None, args.out, resume=True, quiet=args.quiet, extend_iterations=args.iterations)
    else:
        if not args.space and not args.bench:
            raise BenchmarkError("give --space autoformer|pit or --bench FILE")
        bench_path = _bench_path(args)
        evolution = EvolutionConfig(
            population_size=args.population,
            iterations=args.iterations if args.iterations is not None else EvolutionConfig().iterations,
            sample_ratio=args.sample_ratio,
            top_k=args.top_k, margin=args.margin, retry_cap=args.retry_cap,
            gene_probability=args.gene_probability, seed=args.seed,
        )
        seed_genomes = tuple(resolve_proxy(p).name for p in args.seed_proxies)
        if any(resolve_proxy(p).genome is None for p in args.seed_proxies):
            raise ProxyError("--seed-proxies takes genomes or proxy files, not architecture-level proxies")
        settings = SearchSettings(
            bench=bench_path, targets=tuple(args.targets), weights=args.weights, split_seed=args.split_seed,
            search_fraction=args.search_fraction, input=args.input, batch_size=args.batch_size,
            stat_seeds=tuple(args.stat_seeds), per_target_stats=args.per_target_stats, cache_dir=args.cache_dir,
            cache_precision=args.cache_precision, workers=args.workers, seed_proxies=seed_genomes,
            evolution=evolution,
        )
        out = args.out or f"runs/{load_benchmark(bench_path).space}-seed{args.seed}"
        report = run_search(settings, out, quiet=args.quiet)
    _print_best(report)
    return 0 if report.get("finished") else 130


def _fmt(value) -> str:
    return "   nan" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:+.3f}"


def _print_best(report: dict) -> None:
    print(f"best proxy: {report['genome']}")
    print(f"{'target':<16}{'search tau':>12}{'test tau':>10}{'params search':>15}{'params test':>13}")
    for target in report["targets"]:
        row = [report["search"], report["test"], report["params"]["search"], report["params"]["test"]]
        cells = [_fmt(r.get("targets", {}).get(target, {}).get("kendall")) for r in row]
        print(f"{target:<16}{cells[0]:>12}{cells[1]:>10}{cells[2]:>15}{cells[3]:>13}")
    cells = [_fmt(r.get("jcm")) for r in (report["search"], report["test"], report["params"]["search"], report["params"]["test"])]
    print(f"{'JCM':<16}{cells[0]:>12}{cells[1]:>10}{cells[2]:>15}{cells[3]:>13}")
    print(f"written to {Path(report['run']) / 'best.json'}")


def cmd_rank(args: argparse.Namespace) -> int:
    from autoprox.search import evaluate_on_split

    proxy = resolve_proxy(args.proxy)
    bench = load_benchmark(_bench_path(args))
    targets = bench.check_targets(list(args.targets) or bench.targets)
    run_split = proxy.provenance.get("split") or {}
    split_seed = args.split_seed if args.split_seed is not None else run_split.get("seed", 0)
    fraction = args.search_fraction if args.search_fraction is not None else run_split.get("search_fraction", 0.6)
    split = split_benchmark(len(bench), split_seed, fraction)
    indices = split.indices(args.split, len(bench))
    plan = _plan_from_args(args, targets)
    cache = StatisticsCache(args.cache_dir, args.cache_precision)
    if proxy.needs_statistics and not args.json:
        print(f"scoring {len(indices)} architectures with {proxy.name}", file=sys.stderr)
    progress = Progress("statistics", every=15) if proxy.needs_statistics else None
    result = evaluate_on_split(proxy, bench, indices, targets, plan, cache, {}, workers=args.workers, progress=progress)
    if "invalid" in result:
        raise ProxyError(f"proxy {proxy.name} is invalid on this benchmark: {result['invalid']}")
    per_target = result["targets"]
    if args.json:
        clean = {t: {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in m.items()}
                 for t, m in per_target.items()}
        print(json.dumps(clean, indent=2))
        return 0
    print(f"proxy {proxy.name} on {Path(bench.source).name} ({bench.space}, split {args.split}, {len(indices)} architectures)")
    print(f"{'target':<16}{'kendall':>9}{'spearman':>10}{'pearson':>9}{'n':>5}")
    for target, m in per_target.items():
        print(f"{target:<16}{_fmt(m['kendall']):>9}{_fmt(m['spearman']):>10}{_fmt(m['pearson']):>9}{m['n']:>5}")
    return 0


def cmd_cache_build(args: argparse.Namespace) -> int:
    bench = load_benchmark(_bench_path(args))
    targets = bench.check_targets(list(args.targets) or bench.default_targets())
    plan = _plan_from_args(args, targets)
    cache = StatisticsCache(args.cache_dir, args.cache_precision)
    result = build_cache(cache, plan.requests(bench.archs), workers=args.workers, progress=Progress("statistics", every=15))
    seconds = result["seconds"]
    mean = sum(seconds) / len(seconds) if seconds else 0.0
    print(f"{result['requests']} entries in {cache.root}: {result['computed']} computed"
          + (f" ({mean:.2f} s each per worker)" if seconds else "") + f", {result['requests'] - result['computed']} already cached")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    warnings.filterwarnings("default")
    try:
        if args.command == "search":
            return cmd_search(args)
        if args.command == "rank":
            return cmd_rank(args)
        return cmd_cache_build(args)
    except USER_ERRORS as exc:
        if os.environ.get("AUTOPROX_DEBUG"):
            raise
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"autoprox: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("autoprox: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into head & co.
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
