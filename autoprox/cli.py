"""The ``autoprox`` command line: ``search``, ``transfer``, ``rank``, ``cache build``, reports and ``vit-search``.

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
from autoprox.proxies import ProxyError, resolve_proxies, resolve_proxy, seed_genome, split_proxy_list
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


def _proxy_list(text: str) -> tuple[str, ...]:
    """Comma list of proxies, split at top-level commas only (genome strings hold commas)."""
    return tuple(split_proxy_list(text))


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


def _add_search_options(search: argparse.ArgumentParser, out_help: str, resume_help: str) -> None:
    """Options of ``search``, shared by ``transfer`` (which runs one search per held-out target)."""
    search.add_argument("--space", choices=sorted(BENCH_FILE_NAMES), help="search space (picks its released benchmark file)")
    search.add_argument("--bench", help="benchmark file (default: the space's released file, found without flags)")
    search.add_argument("--out", help=out_help)
    search.add_argument("--resume", action="store_true", help=resume_help)
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
    search.add_argument("--seed-proxies", type=_proxy_list, default=(),
                        help="comma list of autoprox_a, autoprox_p, genome strings or proxy JSON files put into the "
                             "initial population (hand-crafted zoo proxies cannot be: they are refused with the reason)")
    search.add_argument("--quiet", action="store_true", help="no progress output")
    genome = search.add_argument_group("genome space and selection (beyond the paper; defaults are the paper's)")
    genome.add_argument("--genome", choices=("template", "free"), default="template",
                        help="the paper's template trees, or free-form typed trees")
    genome.add_argument("--aggregation", default="mean",
                        help="over blocks: mean (the paper), sum, wmean (depth-weighted mean), std, "
                             "a comma list, or gene (all four, chosen by evolution)")
    genome.add_argument("--arch-terminals", action="store_true",
                        help="let genomes use architecture-level scalars (parameter count, MACs, depth, width, "
                             "heads, MLP ratio and their logarithms)")
    genome.add_argument("--cv-folds", type=int, default=0,
                        help="cross-validated fitness over K folds of the search split (default 0: none)")
    genome.add_argument("--cv-mode", choices=("mean", "worst"), default="mean",
                        help="combine fold JCMs by their mean or take the worst fold")
    genome.add_argument("--parsimony", action="store_true", help="at equal JCM the smaller proxy ranks higher")
    _add_stats_options(search)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="autoprox", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    search = sub.add_parser("search", help="evolve a zero-cost proxy on a benchmark",
                            formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    _add_search_options(search, out_help="run directory (default runs/<space>-seed<seed>)",
                        resume_help="continue the run in --out where it stopped")

    transfer = sub.add_parser(
        "transfer", help="search on all targets but one and report the held-out one, for each target in turn",
        description="For each target in turn: a whole search on the other targets into OUT/holdout-<target>, then "
                    "the discovered proxy's Kendall on the held-out target (search and test split) beside the "
                    "parameter count and the best coarse descriptor. Takes every option of 'search'.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    _add_search_options(transfer, out_help="study directory (default runs/transfer-<space>-seed<seed>)",
                        resume_help="continue the study in --out where it stopped")

    rank = sub.add_parser("rank", help="correlate a proxy's scores with a benchmark's accuracies")
    rank.add_argument("--proxy", required=True,
                      help="a built-in (params, flops, snip, grasp, synflow, grad_norm, fisher, plain, nwot, zico, te_nas, "
                           "dss, tvt, tvt_l2, autoprox_a, autoprox_p), a genome string, a proxy JSON such as best.json; "
                           "'all' or a comma list prints the ranking table")
    rank.add_argument("--bench", help="benchmark file (.pth released format, or .jsonl/.json)")
    rank.add_argument("--space", choices=sorted(BENCH_FILE_NAMES), help="use the space's released file as --bench")
    rank.add_argument("--split", choices=("all", "search", "test"), default="all", help="which architectures (default all)")
    rank.add_argument("--split-seed", type=int, default=None, help="split seed (default: the proxy run's, else 0)")
    rank.add_argument("--search-fraction", type=float, default=None, help="search share (default: the run's, else 0.6)")
    rank.add_argument("--targets", type=_str_list, default=(), help="comma-separated targets (default: all columns)")
    rank.add_argument("--json", action="store_true", help="print JSON: target -> {kendall, spearman, pearson, n}")
    rank.add_argument("--seeds", type=_int_list, default=None,
                      help="ranking table: seeds, each one repetition (network initialisation and minibatch); "
                           "mean and std over them (default: --stat-seeds)")
    rank.add_argument("--format", choices=("markdown", "csv", "json"), default=None,
                      help="ranking table format (default markdown); giving it, --seeds, 'all' or a comma list selects "
                           "the table, whose targets default to the KD columns plus imagenet_super")
    _add_stats_options(rank)

    cache = sub.add_parser("cache", help="manage the statistics cache")
    cache_sub = cache.add_subparsers(dest="cache_command", required=True)
    build = cache_sub.add_parser("build", help="precompute the statistics of a benchmark's architectures")
    build.add_argument("--bench", help="benchmark file")
    build.add_argument("--space", choices=sorted(BENCH_FILE_NAMES), help="use the space's released file as --bench")
    build.add_argument("--targets", type=_str_list, default=(), help="targets (matters with --per-target-stats)")
    _add_stats_options(build)

    show = sub.add_parser("show", help="print a run's hall of fame with readable formulas (works while it runs)")
    show.add_argument("run", help="run directory")
    show.add_argument("--top", type=int, default=10, help="rows to print (default 10)")
    show.add_argument("--latex", action="store_true", help="also print each formula as LaTeX")
    show.add_argument("--no-simplify", action="store_true", help="print the formulas as built, without SymPy simplification")
    show.add_argument("--timeout", type=float, default=None, help="seconds allowed to simplify one formula (default 10)")
    show.add_argument("--save", action="store_true",
                      help="write the hall of fame into the run directory (for runs made before hall_of_fame.json)")
    show.add_argument("--beyond-size", action="store_true",
                      help="also compute, for each shown entry, its Kendall with the parameter count and the depth, its "
                           "partial Kendall given each, and the best coarse descriptor per target, on the run's search "
                           "split (scores from the statistics cache; takes a while, progress on stderr)")

    export = sub.add_parser("export", help="write a proxy as a standalone Python module (torch only)")
    export.add_argument("source", help="a run directory (its best.json), a proxy JSON, or a genome string")
    export.add_argument("--out", required=True, help="the module to write, e.g. proxy.py")
    export.add_argument("--rank", type=int, default=None, help="export the hall of fame's entry of this rank instead")
    export.add_argument("--no-simplify", action="store_true", help="put the formula in the docstring as built")
    export.add_argument("--timeout", type=float, default=None, help="seconds allowed to simplify the formula (default 10)")

    curves = sub.add_parser("curves", help="plot the evolution of one or more runs (PNG)")
    curves.add_argument("runs", nargs="+", metavar="RUN", help="run directories, overlaid")
    curves.add_argument("--out", required=True, help="PNG to write")
    curves.add_argument("--csv", nargs="?", const=True, default=None, metavar="CSV",
                        help="also write the plotted numbers (default path: --out with .csv)")
    curves.add_argument("--window", type=int, default=10, help="iterations in the rolling acceptance rate (default 10)")
    _add_vit_search_parser(sub)
    return parser


def _plan_from_args(args: argparse.Namespace, targets: Sequence[str]):
    from autoprox.search import SearchSettings, stats_plan

    settings = SearchSettings(bench="", input=args.input, batch_size=args.batch_size, stat_seeds=tuple(args.stat_seeds),
                              per_target_stats=args.per_target_stats)
    return stats_plan(settings, targets)


def _genome_space(args: argparse.Namespace):
    from autoprox.genome import AGGREGATIONS, GenomeSpace

    names = list(AGGREGATIONS) if args.aggregation == "gene" else [
        a if a.startswith("block_") else f"block_{a}" for a in _str_list(args.aggregation)]
    return GenomeSpace(args.genome, tuple(names), args.arch_terminals)


def _search_settings(args: argparse.Namespace):
    """SearchSettings of a new search (or transfer study) from the command line."""
    from autoprox.search import SearchSettings

    if not args.space and not args.bench:
        raise BenchmarkError("give --space autoformer|pit or --bench FILE")
    evolution = EvolutionConfig(
        population_size=args.population,
        iterations=args.iterations if args.iterations is not None else EvolutionConfig().iterations,
        sample_ratio=args.sample_ratio,
        top_k=args.top_k, margin=args.margin, retry_cap=args.retry_cap,
        gene_probability=args.gene_probability, seed=args.seed, parsimony=args.parsimony,
    )
    space = _genome_space(args)
    seed_genomes = tuple(seed_genome(p) for p in args.seed_proxies)
    return SearchSettings(
        bench=_bench_path(args), targets=tuple(args.targets), weights=args.weights, split_seed=args.split_seed,
        search_fraction=args.search_fraction, input=args.input, batch_size=args.batch_size,
        stat_seeds=tuple(args.stat_seeds), per_target_stats=args.per_target_stats, cache_dir=args.cache_dir,
        cache_precision=args.cache_precision, workers=args.workers, seed_proxies=seed_genomes,
        evolution=evolution, genome=space.to_json(), cv_folds=args.cv_folds, cv_mode=args.cv_mode,
    )


def cmd_search(args: argparse.Namespace) -> int:
    from autoprox.search import run_search

    if args.resume:
        if not args.out:
            raise RunDirError("--resume needs --out RUN_DIR")
        report = run_search(None, args.out, resume=True, quiet=args.quiet, extend_iterations=args.iterations)
    else:
        settings = _search_settings(args)
        out = args.out or f"runs/{load_benchmark(settings.bench).space}-seed{args.seed}"
        report = run_search(settings, out, quiet=args.quiet)
    _print_best(report)
    return 0 if report.get("finished") else 130


def cmd_transfer(args: argparse.Namespace) -> int:
    from autoprox.transfer import TRANSFER_FILE, format_transfer, run_transfer

    if args.resume:
        if not args.out:
            raise RunDirError("--resume needs --out STUDY_DIR")
        if args.iterations is not None:
            raise ValueError("--iterations cannot change on --resume of a transfer study")
        study = run_transfer(None, args.out, resume=True, quiet=args.quiet)
        out = Path(args.out)
    else:
        settings = _search_settings(args)
        out = Path(args.out or f"runs/transfer-{load_benchmark(settings.bench).space}-seed{args.seed}")
        study = run_transfer(settings, out, quiet=args.quiet)
    print(format_transfer(study, "test"), end="")
    print(f"written to {out / TRANSFER_FILE}")
    return 0 if study.get("finished") else 130


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


def _wants_table(args: argparse.Namespace) -> bool:
    names = split_proxy_list(args.proxy)
    return args.seeds is not None or args.format is not None or len(names) != 1 or names[0] == "all"


def cmd_rank_table(args: argparse.Namespace) -> int:
    """``rank --proxy all|a,b,c [--seeds ...] [--format ...]``: the ranking table."""
    from autoprox.ranking import format_table, rank_table
    from autoprox.statistics import InputSpec

    proxies = resolve_proxies(args.proxy)
    bench = load_benchmark(_bench_path(args))
    targets = bench.check_targets(list(args.targets) or bench.default_targets())
    split = split_benchmark(len(bench), args.split_seed if args.split_seed is not None else 0,
                            args.search_fraction if args.search_fraction is not None else 0.6)
    indices = split.indices(args.split, len(bench))
    seeds = tuple(args.seeds) if args.seeds is not None else tuple(args.stat_seeds)
    if args.seeds is not None and tuple(args.stat_seeds) != (0,):
        raise ValueError("the ranking table takes --seeds (each one repetition); --stat-seeds is for a single proxy")
    plan = _plan_from_args(args, targets)
    cache = StatisticsCache(args.cache_dir, args.cache_precision)
    fmt = args.format or ("json" if args.json else "markdown")
    print(f"ranking {len(proxies)} proxies on {len(indices)} architectures of {Path(bench.source).name}, "
          f"seeds {', '.join(map(str, seeds))}", file=sys.stderr)
    table = rank_table(proxies, bench, indices, targets, seeds, InputSpec.parse(args.input, args.batch_size),
                       plan.target_classes, cache, workers=args.workers, quiet=False, split=args.split)
    sys.stdout.write(format_table(table, fmt))
    return 0


def cmd_rank(args: argparse.Namespace) -> int:
    """``rank --proxy P``: one proxy's correlations per target, and its beyond-size figures beside them."""
    from autoprox.genome import InvalidProxy
    from autoprox.proxies import score_archs
    from autoprox.atomic import json_safe
    from autoprox.search import beyond_size_from_scores, split_figures

    if _wants_table(args):
        return cmd_rank_table(args)
    proxy = resolve_proxy(args.proxy)
    if proxy.note:
        print(f"{proxy.name}: {proxy.note}", file=sys.stderr)
    bench = load_benchmark(_bench_path(args))
    targets = bench.check_targets(list(args.targets) or bench.targets)
    run_split = proxy.provenance.get("split") or {}
    split_seed = args.split_seed if args.split_seed is not None else run_split.get("seed", 0)
    fraction = args.search_fraction if args.search_fraction is not None else run_split.get("search_fraction", 0.6)
    split = split_benchmark(len(bench), split_seed, fraction)
    indices = split.indices(args.split, len(bench))
    plan = _plan_from_args(args, targets)
    cache = StatisticsCache(args.cache_dir, args.cache_precision)
    if proxy.kind != "architecture" and not args.json:
        print(f"scoring {len(indices)} architectures with {proxy.name}", file=sys.stderr)
    progress = Progress("statistics" if proxy.needs_statistics else proxy.name, every=15) if proxy.kind != "architecture" else None
    try:  # scored once; the correlations and the beyond-size report both read these scores
        scores = score_archs(proxy, [bench.archs[i] for i in indices], cache, plan, workers=args.workers,
                             progress=progress)
    except InvalidProxy as exc:
        raise ProxyError(f"proxy {proxy.name} is invalid on this benchmark: {exc}") from None
    per_target = split_figures(scores, bench, indices, targets, plan, {})["targets"]
    beyond = beyond_size_from_scores(scores, bench, indices, targets, plan)
    keys = ("kendall_with_params", "kendall_with_depth", "partial_given_params", "partial_given_depth", "bar",
            "beats_bar")
    per_target = {t: m | {k: beyond[t][k] for k in keys} for t, m in per_target.items()}
    if args.json:
        print(json.dumps(json_safe(per_target), indent=2))
        return 0
    print(f"proxy {proxy.name} on {Path(bench.source).name} ({bench.space}, split {args.split}, {len(indices)} architectures)")
    print(f"{'target':<16}{'kendall':>9}{'spearman':>10}{'pearson':>9}{'n':>5}"
          f"{'tau params':>12}{'tau depth':>11}{'partial|params':>16}{'partial|depth':>15}  {'bar':<16}{'beats bar':>9}")
    for target, m in per_target.items():
        bar = m["bar"]
        bar_text = f"{bar['descriptor']} {_fmt(bar['kendall'])}"
        print(f"{target:<16}{_fmt(m['kendall']):>9}{_fmt(m['spearman']):>10}{_fmt(m['pearson']):>9}{m['n']:>5}"
              f"{_fmt(m['kendall_with_params']):>12}{_fmt(m['kendall_with_depth']):>11}"
              f"{_fmt(m['partial_given_params']):>16}{_fmt(m['partial_given_depth']):>15}  {bar_text:<16}"
              f"{'yes' if m['beats_bar'] else 'no':>9}")
    print("tau params, tau depth: the proxy's Kendall with the parameter count, the depth; partial|params, "
          "partial|depth: its partial Kendall\nwith the target given them (nan: undefined); bar: the best coarse "
          "descriptor for the target (params, depth, width, macs) on these architectures")
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


def cmd_show(args: argparse.Namespace) -> int:
    from autoprox.halloffame import show_run

    print(show_run(args.run, top=args.top, simplify=not args.no_simplify, latex=args.latex,
                   timeout=args.timeout, save=args.save, beyond_size=args.beyond_size), end="")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from autoprox.export import export_proxy

    path, formula = export_proxy(args.source, args.out, rank=args.rank, simplify=not args.no_simplify,
                                 timeout=args.timeout)
    print(f"wrote {path}: score(model, inputs, targets) -> float, depends on torch only "
          f"(architecture terminals, if any, are read from the model; pass descriptors=... to give them)")
    print(f"score = {formula.text}")
    if formula.note:
        print(f"({formula.note})")
    return 0


def cmd_curves(args: argparse.Namespace) -> int:
    from autoprox.curves import write_curves

    csv_path = Path(args.out).with_suffix(".csv") if args.csv is True else args.csv
    runs = write_curves(args.runs, args.out, csv_path, window=args.window)
    print(f"wrote {args.out}" + (f" and {csv_path}" if csv_path else "") + f" ({len(runs)} run(s))")
    return 0


def _add_vit_search_parser(sub) -> None:
    from autoprox.vitsearch import PAPER_BUDGETS

    vit = sub.add_parser(
        "vit-search", help="training-free ViT search: sample architectures under a budget, keep the proxy's best",
        description="Sample --samples distinct architectures of --space within --params and rank them by --proxy; "
                    "or, with --on-bench FILE, choose among a benchmark's architectures and report how good the pick "
                    "really is. Paper budgets: " + ", ".join(f"{s} {lo:g}:{hi:g}" for s, (lo, hi) in PAPER_BUDGETS.items()),
    )
    vit.add_argument("--space", choices=sorted(BENCH_FILE_NAMES), help="search space (sampling mode)")
    vit.add_argument("--proxy", required=True,
                     help="params, flops, a zoo proxy, autoprox_a/p, a genome string or a proxy JSON; "
                          "with --on-bench also 'all' or a comma list")
    vit.add_argument("--samples", type=int, default=400, help="distinct architectures to sample (default 400)")
    vit.add_argument("--params", default=None,
                     help="parameter budget MIN:MAX in millions (default: the paper's, autoformer 4:9, pit 2:25)")
    vit.add_argument("--classes", type=int, default=100, help="classes of the head (default 100)")
    vit.add_argument("--top", type=int, default=5, help="how many of the best to write (default 5)")
    vit.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    vit.add_argument("--out", help="output directory (default runs/vit-<space>-<proxy>-seed<seed>)")
    vit.add_argument("--no-keep-statistics", action="store_true",
                     help="do not store sampled architectures' statistics in the cache (400 AutoFormer ones take ~11 GB)")
    vit.add_argument("--on-bench", metavar="FILE", help="choose among this benchmark's architectures instead of sampling")
    vit.add_argument("--split", choices=("all", "test"), default="all",
                     help="with --on-bench: choose among all architectures or the test split only (default all)")
    vit.add_argument("--split-seed", type=int, default=0, help="with --on-bench --split test: the split seed")
    vit.add_argument("--targets", type=_str_list, default=(), help="with --on-bench: targets to report (default all)")
    vit.add_argument("--json", action="store_true", help="with --on-bench: print JSON instead of the table")
    _add_stats_options(vit)


def cmd_vit_search(args: argparse.Namespace) -> int:
    from autoprox.vitsearch import PAPER_BUDGETS, VitSearchSettings, parse_budget, run_vit_search

    if args.on_bench:
        return _vit_search_on_bench(args)
    if not args.space:
        raise BenchmarkError("give --space autoformer|pit (or --on-bench FILE)")
    budget = parse_budget(args.params) if args.params else tuple(x * 1e6 for x in PAPER_BUDGETS[args.space])
    proxy = resolve_proxy(args.proxy)
    settings = VitSearchSettings(
        space=args.space, proxy=proxy.name, samples=args.samples, budget=budget, classes=args.classes, top=args.top,
        seed=args.seed, input=args.input, batch_size=args.batch_size, stat_seeds=tuple(args.stat_seeds),
        cache_dir=args.cache_dir, cache_precision=args.cache_precision,
        keep_statistics=not args.no_keep_statistics, workers=args.workers,
    )
    label = Path(args.proxy).stem if args.proxy.endswith(".json") else (proxy.name if len(proxy.name) < 30 else "genome")
    out = Path(args.out or f"runs/vit-{args.space}-{label}-seed{args.seed}")
    print(f"scoring {args.samples} {args.space} architectures ({budget[0] / 1e6:g}M-{budget[1] / 1e6:g}M) "
          f"with {proxy.name} into {out}", file=sys.stderr)
    try:
        summary = run_vit_search(settings, proxy, out, progress=Progress("vit-search", every=15))
    except KeyboardInterrupt:
        print(f"autoprox: interrupted; run the same command again to resume (scores so far are in {out})",
              file=sys.stderr)
        return 130
    print(f"{summary['scored']} scored, {summary['failed']} failed, "
          f"{summary['search_seconds']:.0f} s ({summary['seconds_per_architecture']:.2f} s per architecture)")
    print(f"{'rank':>4} {'score':>14} {'params':>12} {'MACs':>15}  arch")
    for row in summary["top"]:
        print(f"{row['rank']:>4} {row['score']:>14.6g} {row['params']:>12,} {row['macs']:>15,}  {json.dumps(row['arch'])}")
    print(f"written to {out / 'top.json'} and {out / 'top.csv'}")
    return 0


def _vit_search_on_bench(args: argparse.Namespace) -> int:
    from autoprox.proxies import resolve_proxies
    from autoprox.vitsearch import parse_budget, pick_on_bench, picks_table
    from autoprox.spaces import count_params

    bench = load_benchmark(args.on_bench)
    targets = bench.check_targets(list(args.targets) or bench.targets)
    indices = split_benchmark(len(bench), args.split_seed).indices(args.split, len(bench))
    if args.params:
        low, high = parse_budget(args.params)
        indices = [i for i in indices if low <= count_params(bench.archs[i]) <= high]
        if not indices:
            raise BenchmarkError(f"no architecture of {Path(bench.source).name} lies within {args.params}M parameters")
    proxies = resolve_proxies(args.proxy)
    plan = _plan_from_args(args, targets)
    cache = StatisticsCache(args.cache_dir, args.cache_precision)
    picks = pick_on_bench(proxies, bench, indices, targets, plan, cache, workers=args.workers,
                          progress_factory=lambda name: Progress(f"scoring {name}", every=15))
    if args.json:
        print(json.dumps([p.__dict__ for p in picks], indent=2))
    else:
        print(f"pick of each proxy among {len(indices)} architectures of {Path(bench.source).name} "
              f"(split {args.split}); accuracy of the pick, and its percentile in brackets")
        print(picks_table(picks, targets))
    if args.out:
        from autoprox.atomic import atomic_write_json

        atomic_write_json(Path(args.out) / "picks.json", [p.__dict__ for p in picks])
    return 0


REPORT_COMMANDS = {"show": cmd_show, "export": cmd_export, "curves": cmd_curves}


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    warnings.filterwarnings("default")
    try:
        if args.command in REPORT_COMMANDS:
            return REPORT_COMMANDS[args.command](args)
        if args.command == "search":
            return cmd_search(args)
        if args.command == "transfer":
            return cmd_transfer(args)
        if args.command == "rank":
            return cmd_rank(args)
        if args.command == "vit-search":
            return cmd_vit_search(args)
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
