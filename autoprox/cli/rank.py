"""``autoprox rank``: correlate a proxy's scores with a benchmark's accuracies, or rank many proxies."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Mapping

from autoprox.cli.options import (
    PART_NAMES,
    add_command_options,
    add_stats_options,
    bench_path,
    evaluation_context,
    executor_from_args,
    plan_from_args,
    usable_targets,
)
from autoprox.core.errors import ConfigError, ProxyError
from autoprox.core.numbers import format_float
from autoprox.core.progress import Progress
from autoprox.data.benchmark import BENCH_FILE_NAMES, load_benchmark, split_benchmark
from autoprox.data.cache import StatisticsCache
from autoprox.proxies.ensemble import EnsembleProxy
from autoprox.proxies.proxy import resolve_proxies, resolve_proxy
from autoprox.proxies.proxy_input import split_proxy_list

#: What this command prints is its product (a listing): a closed output pipe (``| head``) ends it with status 0
#: (:data:`autoprox.cli.main.LISTINGS`).
LISTING = True


def add_parser(sub) -> None:
    rank = sub.add_parser("rank", help="correlate a proxy's scores with a benchmark's accuracies")
    add_command_options(rank, "rank")
    add_stats_options(rank)


def _wants_table(args: argparse.Namespace) -> bool:
    names = split_proxy_list(args.proxy)
    return args.seeds is not None or args.format is not None or len(names) != 1 or names[0] == "all"


def cmd_rank_table(args: argparse.Namespace) -> int:
    """``rank --proxy all|a,b,c [--seeds ...] [--format ...]``: the ranking table."""
    from autoprox.apps.ranking import format_table, rank_table

    proxies = resolve_proxies(args.proxy)
    ensembles = [p.name for p in proxies if isinstance(p, EnsembleProxy)]
    if ensembles:
        raise ProxyError(f"the ranking table takes no ensemble ({ensembles[0]}): rank it alone with --proxy FILE")
    for proxy in proxies:  # without --bench or --space: the benchmark of the first run proxy
        args.bench = args.bench or run_bench(args, proxy)
    bench = load_benchmark(bench_path(args))
    part = args.split or "all"
    targets = bench.check_targets(list(args.targets) or bench.default_targets())
    split = split_benchmark(len(bench), args.split_seed if args.split_seed is not None else 0,
                            args.search_fraction if args.search_fraction is not None else 0.6)
    indices = split.indices(part, len(bench))
    recorded = recorded_test_split(proxies, bench) if args.split is None else None
    if recorded is not None:  # the default of a single run proxy's rank: the test split its search never saw
        part, indices = "test", sorted(recorded["test"])
        print("split: test, the architectures the searches of the run proxies never saw (their runs' recorded "
              "split); --split all ranks every architecture", file=sys.stderr)
    if args.targets:
        bench.check_measured(targets, indices, PART_NAMES[part])
    else:
        targets = list(usable_targets(bench, targets, indices, PART_NAMES[part]))
    seeds = tuple(args.seeds) if args.seeds is not None else tuple(args.stat_seeds)
    if args.seeds is not None and tuple(args.stat_seeds) != (0,):
        raise ConfigError("the ranking table takes --seeds (each one repetition); --stat-seeds is for a single proxy")
    plan = plan_from_args(args, targets)
    cache = StatisticsCache(args.cache_dir, args.cache_precision)
    fmt = args.format or ("json" if args.json else "markdown")
    print(f"ranking {len(proxies)} {'proxy' if len(proxies) == 1 else 'proxies'} on {len(indices)} architectures of {Path(bench.source).name}, "
          f"seeds {', '.join(map(str, seeds))}", file=sys.stderr)
    with executor_from_args(args) as executor:
        table = rank_table(proxies, bench, indices, targets, seeds, plan.spec,
                           plan.target_classes, cache, workers=executor, quiet=False, split=part)
    sys.stdout.write(format_table(table, fmt))
    return 0


def run_bench(args: argparse.Namespace, proxy) -> str | None:
    """Without --bench and --space, the benchmark file the run of a proxy file was made with (found as the run
    opens it: :meth:`RunContext.open`): the run holding it (its ``best.json``), or the run a file of
    ``autoprox select`` records; None for any other proxy."""
    if args.bench or getattr(args, "space", None):
        return None
    run_dir = recorded_run(proxy, split_proxy_list(getattr(args, "proxy", None) or ""))
    if run_dir is None:
        return None
    from autoprox.core.errors import ConfigError
    from autoprox.search.multispace import open_context

    context = open_context(run_dir)
    if context.settings.multi_space:
        spaces = ", ".join(part.bench.space for part in context.parts)
        raise ConfigError(f"{run_dir} searched several benchmarks ({spaces}): give --space or --bench to rank "
                          "its proxy on one of them")
    bench = context.bench.source
    print(f"benchmark: {bench}, the one {run_dir} was made with (--bench FILE ranks on another)", file=sys.stderr)
    return bench


def recorded_run(proxy, named: list[str]) -> Path | None:
    """The run directory a proxy file came from: the folder of a run's ``best.json``, else the run the file
    records (``run``: ``autoprox select`` writes the run it chose from, as it was given), this one only for a
    file the user ``named`` (a ``recommended:`` proxy's packaged file records a run of the repository that
    made it). None when neither is a run directory."""
    from autoprox.search.rundir import RunDirectory

    provenance = proxy.provenance if isinstance(proxy.provenance, Mapping) else {}
    source, run = provenance.get("file"), provenance.get("run")
    if not isinstance(source, str):
        return None
    folders = [Path(source).parent]
    if isinstance(run, str) and run and source in {str(Path(name)) for name in named}:
        folders.append(Path(run))
    return next((folder for folder in folders if RunDirectory(folder).exists()), None)


def networks_note(proxy) -> str | None:
    """The line saying which columns of a formula proxy (a table search's ``best.json``, a rank formula with
    ``"missing": "neutral"``) networks read as no information, as
    :func:`autoprox.proxies.table_scores.reading_note` says it of a table."""
    from autoprox.proxies.scorers import RankFormulaScorer

    scorer = getattr(proxy, "scorer", None)  # an ensemble has none: its members are genomes and built-ins
    return scorer.networks_note(proxy.name) if isinstance(scorer, RankFormulaScorer) else None


def in_sample_note(proxy, bench, name: str | None = None) -> str | None:
    """The note for a ``recommended:`` proxy ranked on a packaged benchmark it was chosen or searched on: a
    ``recommended:SPACE/...`` one on that space's file, ``recommended:any/searched`` on the file of any space
    it was searched on (its file's ``searched_on``). ``name``: the name the proxy was given by (a genome proxy
    is named by its genome)."""
    from autoprox.core.atomic import read_json_file
    from autoprox.core.errors import ProxyError
    from autoprox.data.benchmark import default_bench_path, file_sha256
    from autoprox.proxies.recommended import is_recommended_name, resolve_recommended, split_recommended_name

    name = name if name is not None else proxy.name
    if not is_recommended_name(name):
        return None
    space = split_recommended_name(name)[0]
    if space in BENCH_FILE_NAMES:
        if file_sha256(default_bench_path(space)) != bench.sha256:
            return None
        return (f"in-sample: {name} was chosen by the evaluation protocol on this very benchmark's architectures, "
                "so these figures are not an estimate on architectures it never saw; the protocol's outer-fold "
                "test figures are (docs/results-in-space.md)")
    try:  # recommended:any/...: a searched proxy's file says which spaces its search saw
        searched_on = read_json_file(resolve_recommended(name)[0], "a proxy file", ProxyError).get("searched_on")
    except (ProxyError, AttributeError):
        return None
    if not isinstance(searched_on, list) or bench.space not in searched_on or bench.space not in BENCH_FILE_NAMES \
            or file_sha256(default_bench_path(bench.space)) != bench.sha256:
        return None
    return (f"in-sample: {name} was searched on every architecture of {', '.join(map(str, searched_on))}, this "
            "benchmark's included, so these figures are not an estimate on architectures it never saw; the "
            "N-space protocol's figures, on the space each search did not see, are (docs/results-new-space.md)")


def recorded_test_split(proxies, bench) -> dict | None:
    """The split the run proxies of a table share, when it covers this benchmark (as :func:`default_part`)."""
    splits = [recorded_split(p.provenance, bench) for p in proxies]
    splits = [s for s in splits if s]
    if splits and all(s == splits[0] for s in splits) and default_part(splits[0], len(bench)) == "test":
        return splits[0]
    return None


def recorded_split(provenance, bench):
    """The search/test split a proxy's run recorded for ``bench``'s space: a multi-space run's entry of that space;
    None for a run of another space (its indices number another benchmark's architectures) or no run."""
    if not isinstance(provenance, dict):
        return None
    split = provenance.get("split")
    if isinstance(split, list):  # a multi-space run's proxy: the split of this benchmark's space, if any
        return next((s for s in split if isinstance(s, dict) and s.get("space") == bench.space), None)
    space = provenance.get("space")
    return None if isinstance(space, str) and space != bench.space else split


def default_part(run_split, size: int) -> str:
    """``test`` for a proxy whose run's recorded split covers exactly this benchmark's ``size`` architectures
    (its search never saw the test split), else ``all``."""
    if not isinstance(run_split, dict):
        return "all"
    search, test = run_split.get("search"), run_split.get("test")
    if not isinstance(search, list) or not isinstance(test, list) or not all(
            isinstance(i, int) and not isinstance(i, bool) for i in search + test):
        return "all"
    return "test" if test and sorted(search + test) == list(range(size)) else "all"


def run(args: argparse.Namespace) -> int:
    """``rank --proxy P``: one proxy's correlations per target, and its beyond-size figures beside them."""
    from autoprox.core.atomic import json_safe
    from autoprox.genome.tree import InvalidProxy

    from autoprox.cli.tables import bench_from_table_run, rank_on_tables, wants_tables

    bench_from_table_run(args)
    if wants_tables(args):
        return rank_on_tables(args)
    if _wants_table(args):
        return cmd_rank_table(args)
    proxy = resolve_proxy(args.proxy)
    if proxy.note:
        print(f"{proxy.name}: {proxy.note}", file=sys.stderr)
    args.bench = run_bench(args, proxy) or args.bench  # the run's own benchmark, as if given with --bench
    bench = load_benchmark(bench_path(args))
    for note in (in_sample_note(proxy, bench, args.proxy), networks_note(proxy)):
        if note:
            print(note, file=sys.stderr)
    run_split = recorded_split(proxy.provenance, bench)
    searched = proxy.provenance.get("space")
    if args.split is None and isinstance(proxy.provenance.get("split"), dict) and isinstance(searched, str) \
            and searched != bench.space:
        print(f"split: all, every architecture of {bench.space}: the search of {args.proxy} was on {searched}, whose "
              "split numbers other architectures", file=sys.stderr)
    part = args.split or default_part(run_split, len(bench))
    if args.split is None and part == "test":
        print(f"split: test, the architectures the search of {args.proxy} never saw (its run's recorded split); "
              "--split all ranks every architecture", file=sys.stderr)
    context = evaluation_context(args, run_split, all_targets=True, part=part, bench=bench)
    indices = context.indices(part)
    if proxy.kind != "architecture" and not args.json:
        print(f"scoring {len(indices)} architectures with {proxy.name}", file=sys.stderr)
    progress = Progress("statistics" if proxy.needs_statistics else proxy.name, every=15) if proxy.kind != "architecture" else None
    try:  # scored once; the correlations and the beyond-size report both read these scores
        with executor_from_args(args) as executor:
            scores, context = context.target_scores(proxy, part, args.targets, workers=executor, progress=progress)
    except InvalidProxy as exc:
        raise ProxyError(f"proxy {proxy.name} is invalid on this benchmark: {exc}") from None
    per_target = context.figures(scores, part, weights={})["targets"]
    beyond = context.beyond_size(scores, part)
    keys = ("kendall_with_params", "kendall_with_depth", "partial_given_params", "partial_given_depth", "bar",
            "beats_bar")
    per_target = {t: m | {k: beyond[t][k] for k in keys} for t, m in per_target.items()}
    if args.json:
        print(json.dumps(json_safe(per_target), indent=2))
        return 0
    print(f"proxy {proxy.name} on {Path(bench.source).name} ({bench.space}, split {part}, {len(indices)} architectures)")
    print(f"{'target':<16}{'kendall':>9}{'spearman':>10}{'pearson':>9}{'n':>5}"
          f"{'tau params':>12}{'tau depth':>11}{'partial|params':>16}{'partial|depth':>15}  {'bar':<16}{'beats bar':>9}")
    for target, m in per_target.items():
        bar = m["bar"]
        bar_text = f"{bar['descriptor']} {format_float(bar['kendall'])}"
        print(f"{target:<16}{format_float(m['kendall']):>9}{format_float(m['spearman']):>10}"
              f"{format_float(m['pearson']):>9}{m['n']:>5}"
              f"{format_float(m['kendall_with_params']):>12}{format_float(m['kendall_with_depth']):>11}"
              f"{format_float(m['partial_given_params']):>16}{format_float(m['partial_given_depth']):>15}"
              f"  {bar_text:<16}"
              f"{'yes' if m['beats_bar'] else 'no':>9}")
    print("tau params, tau depth: the proxy's Kendall with the parameter count, the depth; partial|params, "
          "partial|depth: its partial Kendall\nwith the target given them (nan: undefined); bar: the best coarse "
          "descriptor for the target (params, depth, width, macs) on these architectures")
    return 0
