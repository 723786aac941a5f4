"""``autoprox vit-search``: training-free ViT search under a parameter budget."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from autoprox.cli.options import (
    add_command_options,
    add_stats_options,
    cpu_only,
    executor_from_args,
    plan_from_args,
    refuse_proxy_list,
    use_space_files,
)
from autoprox.core.errors import BenchmarkError, ConfigError
from autoprox.core.numbers import format_column, format_float, format_millions
from autoprox.core.progress import Progress
from autoprox.data.benchmark import load_benchmark, split_benchmark
from autoprox.data.cache import StatisticsCache, StatsPlan
from autoprox.networks.statistics import InputSpec
from autoprox.proxies.proxy import resolve_proxy
from autoprox.proxies.scoring import ScoringProxy, check_target


def add_parser(sub) -> None:
    from autoprox.apps.vitsearch import paper_budgets_text

    vit = sub.add_parser(
        "vit-search", help="training-free ViT search: sample architectures under a budget, keep the proxy's best",
        description="Sample --samples distinct architectures of --space within --params and rank them by --proxy; "
                    "or, with --on-bench FILE, choose among a benchmark's architectures and report how good the pick "
                    "really is. Paper budgets: " + paper_budgets_text(),
    )
    add_command_options(vit, "vit-search")
    add_stats_options(vit)


def run(args: argparse.Namespace) -> int:
    from autoprox.apps.vitsearch import (
        VitSearchSettings,
        check_samples,
        check_vit_search_out,
        default_budget,
        parse_budget,
        run_vit_search,
    )

    files = use_space_files(args)
    if args.on_bench:
        return _vit_search_on_bench(args)
    space = args.space or (files[0].name if files else None)
    if not space:
        raise BenchmarkError("give --space NAME or --space-file FILE (or --on-bench FILE)")
    from autoprox.spaces.registry import REGISTRY

    space = REGISTRY.get(space).name  # ArchitectureError naming the known spaces
    cpu_only(args, "vit-search (sampling fresh architectures)")
    defaulted = _default_proxy(args, space)
    budget = parse_budget(args.params) if args.params else default_budget(space, args.classes)
    refuse_proxy_list(args.proxy, "vit-search", "a list is compared on a benchmark's architectures with --on-bench FILE")
    proxy = resolve_proxy(args.proxy)
    if defaulted:
        _default_target(args, proxy)
    _check_target(args, [proxy])
    stats = {"input": args.input, "batch_size": args.batch_size, "stat_seeds": tuple(args.stat_seeds)}
    stats = _scoring_statistics(proxy, args, stats)
    settings = VitSearchSettings(
        space=space, proxy=proxy.name, samples=args.samples, budget=budget, classes=args.classes, top=args.top,
        seed=args.seed, **stats, cache_dir=args.cache_dir, cache_precision=args.cache_precision,
        keep_statistics=not args.no_keep_statistics, workers=args.workers,
        target=args.target if proxy.targets else None,
    )
    out = Path(args.out or f"runs/vit-{space}-{_out_label(args.proxy, proxy.name)}-seed{args.seed}")
    check_vit_search_out(out)  # someone else's folder is refused before anything is said or scored
    check_samples(space, args.samples, budget, args.classes)
    print(f"scoring {args.samples} {space} architectures ({format_millions(budget[0])} to "
          f"{format_millions(budget[1])} parameters) "
          f"with {proxy.name} into {out}", file=sys.stderr)
    try:
        with executor_from_args(args) as executor:
            summary = run_vit_search(settings, proxy, out, progress=Progress("vit-search", every=15),
                                     executor=executor, log=lambda line: print(line, file=sys.stderr, flush=True))
    except KeyboardInterrupt:
        kept = f" (scores so far are in {out})" if (out / "scores.jsonl").is_file() else ""
        print(f"autoprox: interrupted; run the same command again to resume{kept}", file=sys.stderr)
        return 130
    _check_failures(summary, out)
    print(f"{summary['scored']} scored, {summary['failed']} failed, "
          f"{summary['search_seconds']:.0f} s "
          f"({format_float(summary['seconds_per_architecture'], 2, signed=False)} s per architecture)")
    sys.stdout.write(top_table(summary["top"]))
    print(f"written to {out / 'top.json'} and {out / 'top.csv'}")
    return 0


def _out_label(text: str, name: str) -> str:
    """The proxy's part of the default ``--out``, one folder name: a proxy file by its name, a run's ``best.json``
    by its run's folder (every run's file is best.json), a recommended proxy with its ':' and '/' made '-', a long
    genome as ``genome``."""
    import re

    if text.endswith(".json"):
        path = Path(text)
        label = path.parent.name if path.stem == "best" and path.parent.name else path.stem
    else:
        label = name if len(name) < 30 else "genome"
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", label).strip("-.") or "proxy"


def top_table(top: list[dict]) -> str:
    """The best architectures as ``vit-search`` prints them: scores with the same decimals down the column."""
    scores = format_column([row["score"] for row in top])
    width = max([14] + [len(s) for s in scores])
    lines = [f"{'rank':>4} {'score':>{width}} {'params':>12} {'MACs':>15}  arch"]
    lines += [f"{row['rank']:>4} {score:>{width}} {row['params']:>12,} {row['macs']:>15,}  {json.dumps(row['arch'])}"
              for row, score in zip(top, scores)]
    return "\n".join(lines) + "\n"


def _check_failures(summary: dict, out: Path) -> None:
    """Architectures that could not be scored: the reason on the terminal (one warning, the first reason and how
    many share it), and VitSearchError (exit 2) when none could be scored; ``top.json`` lists every one."""
    import warnings

    from autoprox.core.errors import VitSearchError

    failures = summary.get("failures") or []
    if not failures:
        return
    first = str(failures[0]["error"])
    alike = sum(str(f["error"]) == first for f in failures)
    reason = (f"first: {first}" + (f"; {alike} of them for this reason" if 1 < alike < len(failures) else "")
              if alike < len(failures) else f"each: {first}" if len(failures) > 1 else first)
    if not summary["scored"] and summary.get("finished"):
        raise VitSearchError(f"no architecture could be scored: {len(failures)} of {summary['samples']} failed "
                             f"({reason}); {out / 'top.json'} lists them")
    warnings.warn(f"{len(failures)} of {summary['samples']} architectures could not be scored ({reason}); "
                  f"{out / 'top.json'} lists them", stacklevel=2)


def _check_target(args: argparse.Namespace, proxies) -> None:
    """ConfigError when ``--target`` is given but no proxy is a per-target ensemble (it would be ignored)."""
    if args.target is not None and not any(p.targets for p in proxies):
        raise ConfigError(f"--target {args.target} chooses the members of a per-target ensemble file; "
                          f"{', '.join(p.name if len(p.name) < 40 else 'the genome' for p in proxies)} scores every "
                          "target alike: leave --target out")


def _scoring_statistics(proxy: ScoringProxy, args: argparse.Namespace, stats: dict) -> dict:
    """The statistics ``proxy`` is scored with in place of the options' (:meth:`ScoringProxy.scoring_plan`: those
    an ensemble's references were scored with, where it recorded them); ProxyError when a per-target ensemble is
    given no --target of its own."""
    check_target(proxy, args.target)
    given = StatsPlan(InputSpec.parse(stats["input"], stats["batch_size"]), tuple(stats["stat_seeds"]), {})
    plan = proxy.scoring_plan(given)
    if plan is given:
        return stats
    recorded = {"input": plan.spec.kind if plan.spec.kind != "images" else f"images:{plan.spec.image_dir}",
                "batch_size": plan.spec.batch_size, "stat_seeds": tuple(plan.seeds)}
    if recorded != stats:
        print(f"{proxy.name}: statistics as its references were scored ({recorded['input']}, batch "
              f"{recorded['batch_size']}, seeds {list(recorded['stat_seeds'])})", file=sys.stderr)
    return recorded


def _default_proxy(args: argparse.Namespace, space: str) -> bool:
    """``--proxy`` left out: the default of :func:`autoprox.apps.vitsearch.default_proxy` for ``space``, said on stderr.
    Whether it was left out."""
    from autoprox.apps.vitsearch import default_proxy

    if args.proxy is not None:
        return False
    args.proxy = default_proxy(space)
    print(f"--proxy not given: {args.proxy} for space {space}", file=sys.stderr)
    return True


def _default_target(args: argparse.Namespace, proxy) -> None:
    """The default proxy is a per-target ensemble (a space's ``recommended:SPACE/joint``) and ``--target`` is left
    out: its first target (the first of the space's default targets), said on stderr. A per-target ensemble the
    user names still needs its ``--target``."""
    if args.target is None and proxy.targets:
        targets = list(proxy.targets)
        args.target = targets[0]
        print(f"--target not given: {args.target}, the first of the default proxy's targets ({', '.join(targets)}); "
              "--target T for another", file=sys.stderr)


def _vit_search_on_bench(args: argparse.Namespace) -> int:
    from autoprox.apps.vitsearch import parse_budget, pick_on_bench, picks_table
    from autoprox.proxies.proxy import resolve_proxies
    from autoprox.spaces.architectures import count_params

    bench = load_benchmark(args.on_bench)
    _default_proxy(args, bench.space)
    targets = bench.check_targets(list(args.targets) or bench.targets)
    indices = split_benchmark(len(bench), args.split_seed).indices(args.split, len(bench))
    if args.params:
        low, high = parse_budget(args.params)
        indices = [i for i in indices if low <= count_params(bench.archs[i]) <= high]
        if not indices:
            raise BenchmarkError(f"no architecture of {Path(bench.source).name} lies within {args.params}M parameters")
    if args.out:  # a picks.json vit-search did not write is refused before the scoring
        from autoprox.apps.vitsearch import PICKS_JSON, is_picks_file
        from autoprox.core.atomic import check_output_file
        from autoprox.core.errors import RunDirError

        check_output_file(Path(args.out) / PICKS_JSON, "vit-search", is_picks_file, "--out", RunDirError)
    proxies = resolve_proxies(args.proxy)
    _check_target(args, proxies)
    for proxy in proxies:  # a per-target ensemble without --target, or without its members, before any scoring
        check_target(proxy, args.target)
    plan = plan_from_args(args, targets)
    cache = StatisticsCache(args.cache_dir, args.cache_precision)
    with executor_from_args(args) as executor:
        picks = pick_on_bench(proxies, bench, indices, targets, plan, cache, workers=executor,
                              progress_factory=lambda name: Progress(f"scoring {name}", every=15),
                              target=args.target)
    if args.json:
        print(json.dumps([p.__dict__ for p in picks], indent=2))
    else:
        print(f"pick of each proxy among {len(indices)} architectures of {Path(bench.source).name} "
              f"(split {args.split}); accuracy of the pick, and its percentile in brackets")
        print(picks_table(picks, targets))
    if args.out:
        from autoprox.core.atomic import atomic_write_json

        atomic_write_json(Path(args.out) / PICKS_JSON, [p.__dict__ for p in picks])
    return 0
