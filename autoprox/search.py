"""A whole proxy search: benchmark and split -> statistics cache -> evolution -> run directory.

:func:`run_search` wires the steps together; each step lives in its own module.
"""

from __future__ import annotations

import datetime as _dt
import random
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

from autoprox import __version__
from autoprox.atomic import json_safe
from autoprox.benchmark import Benchmark, BenchmarkError, Split, load_benchmark, split_benchmark, target_classes
from autoprox.cache import STATS_VERSION, StatisticsCache, build_cache
from autoprox.evolution import (
    EvolutionConfig,
    EvolutionState,
    evolve_step,
    initial_population,
    rng_from_json,
    rng_state_to_json,
)
from autoprox.fitness import FitnessEvaluator, FitnessRecord, StatsPlan, figures, load_statistics, make_folds
from autoprox.descriptors import beyond_size, terminal_values
from autoprox.genome import GenomeSpace, InvalidProxy, parse_genome
from autoprox.halloffame import HallOfFame, write_hall_of_fame
from autoprox.progress import Progress
from autoprox.proxies import Proxy, score_archs
from autoprox.rundir import RunDirectory
from autoprox.statistics import InputSpec, torch_threads


@dataclass(frozen=True)
class SearchSettings:
    """Everything a search depends on, as given by the user (recorded in ``config.json``)."""

    bench: str
    targets: tuple[str, ...] = ()
    weights: Mapping[str, float] = field(default_factory=dict)
    split_seed: int = 0
    search_fraction: float = 0.6
    input: str = "gaussian"
    batch_size: int = 8
    stat_seeds: tuple[int, ...] = (0,)
    per_target_stats: bool = False
    cache_dir: str | None = None
    cache_precision: str = "float16"
    workers: int = 1
    seed_proxies: tuple[str, ...] = ()
    evolution: EvolutionConfig = field(default_factory=EvolutionConfig)
    #: The genome space (GenomeSpace.to_json()); empty: the paper's template, mean, statistics only.
    genome: Mapping = field(default_factory=dict)
    #: Cross-validated fitness: folds of the search split (0: none, the paper's) and how
    #: fold JCMs combine (mean, or worst fold).
    cv_folds: int = 0
    cv_mode: str = "mean"

    def to_json(self) -> dict:
        data = asdict(self)
        data["genome"] = GenomeSpace.from_json(self.genome).to_json()
        data["targets"] = list(self.targets)
        data["stat_seeds"] = list(self.stat_seeds)
        data["seed_proxies"] = list(self.seed_proxies)
        data["weights"] = dict(self.weights)
        return data

    @classmethod
    def from_json(cls, data: Mapping) -> "SearchSettings":
        values = dict(data)
        values["targets"] = tuple(values["targets"])
        values["stat_seeds"] = tuple(values["stat_seeds"])
        values["seed_proxies"] = tuple(values.get("seed_proxies", ()))
        values["evolution"] = EvolutionConfig(**values["evolution"])
        values["genome"] = dict(values.get("genome") or {})
        return cls(**values)

    @property
    def genome_space(self) -> GenomeSpace:
        return GenomeSpace.from_json(self.genome)


def stats_plan(settings: SearchSettings, targets: Sequence[str]) -> StatsPlan:
    spec = InputSpec.parse(settings.input, settings.batch_size)
    classes = {t: (target_classes(t) if settings.per_target_stats else 100) for t in targets}
    return StatsPlan(spec, tuple(settings.stat_seeds), classes)


def split_figures(scores: Mapping[int, "object"], bench: Benchmark, indices: Sequence[int],
                  targets: Sequence[str], plan: StatsPlan, weights: Mapping[str, float]) -> dict:
    """Per-target figures and JCM of scores given for ``indices`` of ``bench``."""
    accuracies = {t: bench.accuracies[t][list(indices)] for t in targets}
    return figures(scores, accuracies, targets, plan.target_classes, weights)


def evaluate_on_split(proxy: Proxy, bench: Benchmark, indices: Sequence[int], targets: Sequence[str],
                      plan: StatsPlan, cache: StatisticsCache, weights: Mapping[str, float],
                      workers: int = 1, progress: Callable[[int, int], None] | None = None) -> dict:
    """Figures of ``proxy`` on the architectures ``indices`` of ``bench``."""
    archs = [bench.archs[i] for i in indices]
    try:
        scores = score_archs(proxy, archs, cache, plan, workers=workers, progress=progress)
    except InvalidProxy as exc:
        return {"invalid": str(exc)}
    return split_figures(scores, bench, indices, targets, plan, weights)


def best_report(record: FitnessRecord, bench: Benchmark, split: Split, targets: Sequence[str],
                plan: StatsPlan, cache: StatisticsCache, settings: SearchSettings, run: RunDirectory,
                iteration: int) -> dict:
    """``best.json``: the genome, its figures on both splits, and the parameter count's beside them."""
    tree = parse_genome(record.genome)
    proxy = Proxy(record.genome, tree)
    params = Proxy("params")
    # Score the proxy once per split; its figures and its beyond-size report both read them.
    scores = {}
    for name, indices in (("search", split.search), ("test", split.test)):
        try:
            scores[name] = score_archs(proxy, [bench.archs[i] for i in indices], cache, plan, workers=settings.workers)
        except InvalidProxy as exc:
            scores[name] = InvalidProxy(str(exc))
    splits = {"search": split.search, "test": split.test}

    def on_split(name: str, summary: Callable) -> dict:
        if isinstance(scores[name], InvalidProxy):
            return {"invalid": str(scores[name])}
        return summary(scores[name], splits[name])

    report = {
        "genome": record.genome,
        "canonical": record.canonical,
        "run": str(run.path),
        "iteration": iteration,
        "space": bench.space,
        "targets": list(targets),
        "weights": dict(settings.weights),
        "stats": plan.to_json(),
        "split": split.to_json(),
        "search": on_split("search", lambda v, i: split_figures(v, bench, i, targets, plan, settings.weights)),
        "test": on_split("test", lambda v, i: split_figures(v, bench, i, targets, plan, settings.weights)),
        "params": {
            "search": evaluate_on_split(params, bench, split.search, targets, plan, cache, settings.weights),
            "test": evaluate_on_split(params, bench, split.test, targets, plan, cache, settings.weights),
        },
        "genome_space": settings.genome_space.to_json(),
        "cv": {"folds": settings.cv_folds, "mode": settings.cv_mode, "fitness": record.jcm,
               "fold_jcm": record.fold_jcm} if settings.cv_folds else None,
        "written": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }
    if "jcm" in report["search"] and "jcm" in report["test"]:
        report["generalisation_gap"] = report["search"]["jcm"] - report["test"]["jcm"]
    report["beyond_size"] = {
        name: on_split(name, lambda v, i: beyond_size_from_scores(v, bench, i, targets, plan)) for name in splits
    }
    return json_safe(report)


def beyond_size_of(proxy: Proxy, bench: Benchmark, indices: Sequence[int], targets: Sequence[str],
                   plan: StatsPlan, cache: StatisticsCache) -> dict:
    """:func:`autoprox.descriptors.beyond_size` of a proxy on ``indices`` of ``bench``."""
    try:
        scores = score_archs(proxy, [bench.archs[i] for i in indices], cache, plan)
    except InvalidProxy as exc:
        return {"invalid": str(exc)}
    return beyond_size_from_scores(scores, bench, indices, targets, plan)


def beyond_size_from_scores(scores: Mapping[int, "object"], bench: Benchmark, indices: Sequence[int],
                            targets: Sequence[str], plan: StatsPlan) -> dict:
    """:func:`autoprox.descriptors.beyond_size` of scores given for ``indices`` of ``bench``."""
    archs = [bench.archs[i] for i in indices]
    by_target = {}
    for target in targets:
        values = scores[plan.target_classes[target]]
        accuracies = {target: bench.accuracies[target][list(indices)]}
        by_target.update(beyond_size(values, archs, accuracies, [target]))
    return by_target


def _log(message: str, quiet: bool) -> None:
    if not quiet:
        print(message, file=sys.stderr, flush=True)


def run_search(settings: SearchSettings | None, out: str | Path, resume: bool = False,
               stop_after: int | None = None, quiet: bool = False,
               extend_iterations: int | None = None) -> dict:
    """Run (or resume) a proxy search into ``out``; return the content of ``best.json``.

    ``stop_after`` ends the run after that iteration as if interrupted (tests use it to
    show that a resumed run ends identical to an uninterrupted one).
    """
    run = RunDirectory(out)
    if resume:
        config = run.config()
        settings = SearchSettings.from_json(config["settings"])
        if extend_iterations is not None:
            evolution = asdict(settings.evolution) | {"iterations": extend_iterations}
            settings = SearchSettings(**(asdict(settings) | {"evolution": EvolutionConfig(**evolution)}))
            config["settings"] = settings.to_json()
            run.update_config(config)
    elif settings is None:
        raise ValueError("settings are needed for a new search")

    bench = load_benchmark(settings.bench)
    if resume and bench.sha256 != config["benchmark"]["sha256"]:
        raise BenchmarkError(f"{settings.bench} changed since the run started (sha256 differs)")
    targets = bench.check_targets(settings.targets or bench.default_targets())
    for name in settings.weights:
        bench.check_targets([name])
    split = split_benchmark(len(bench), settings.split_seed, settings.search_fraction)
    plan = stats_plan(settings, targets)
    cache = StatisticsCache(settings.cache_dir, settings.cache_precision)

    if not resume:
        settings = SearchSettings(**(asdict(settings) | {"targets": tuple(targets),
                                                         "evolution": settings.evolution}))
        config = {
            "autoprox_version": __version__,
            "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "command": sys.argv,
            "settings": settings.to_json(),
            "space": bench.space,
            "benchmark": {"path": str(settings.bench), "sha256": bench.sha256, "architectures": len(bench)},
            "split": split.to_json(),
            "stats": plan.to_json() | {"version": STATS_VERSION, "cache_dir": str(cache.root),
                                        "precision": cache.precision},
        }
        run.create(config)

    _log(f"autoprox search: {bench.space}, {len(split.search)} search / {len(split.test)} test architectures, "
         f"targets {', '.join(targets)}, run directory {run.path}", quiet)
    all_archs = list(bench.archs)
    build_cache(cache, plan.requests(all_archs), workers=settings.workers,
                progress=None if quiet else Progress("statistics", every=15))
    search_archs = [bench.archs[i] for i in split.search]
    stats = load_statistics(cache, plan, search_archs)
    accuracies = {t: bench.accuracies[t][list(split.search)] for t in targets}
    space = settings.genome_space
    folds = make_folds(len(split.search), settings.cv_folds, settings.split_seed) if settings.cv_folds else None
    evaluator = FitnessEvaluator(stats, accuracies, targets, plan.target_classes, settings.weights,
                                 terminals=[terminal_values(a) for a in search_archs], folds=folds,
                                 fold_mode=settings.cv_mode)
    evo = settings.evolution

    # The hall of fame sees every fresh evaluation; on resume it is rebuilt from
    # evaluations.jsonl (cut back to the checkpoint), so it ends as in an uninterrupted run.
    hall = HallOfFame()

    def on_evaluation(record: FitnessRecord, iteration: int) -> None:
        run.append_evaluation(record.to_json() | {"iteration": iteration})
        if hall.consider(record, iteration):
            write_hall_of_fame(run, hall)

    with torch_threads(1):
        checkpoint = run.checkpoint() if resume else None
        if checkpoint is None:
            rng = random.Random(evo.seed)
            if resume:
                run.truncate_logs(-1)
            write_hall_of_fame(run, hall)
            population, fresh, invalid = initial_population(
                evaluator, evo, rng, list(settings.seed_proxies), on_evaluation,
                progress=None if quiet else Progress("initial population", every=15), space=space,
            )
            write_hall_of_fame(run, hall)
            state = EvolutionState(0, population, rng_state_to_json(rng), fresh, invalid, evaluator.seconds)
            run.write_checkpoint(state.to_json())
        else:
            state = EvolutionState.from_json(checkpoint)
            rng = rng_from_json(state.rng_state)
            run.truncate_logs(state.iteration)
            records = run.evaluations()
            evaluator.remember(FitnessRecord.from_json({k: v for k, v in r.items() if k != "iteration"})
                               for r in records)
            hall = HallOfFame.from_evaluations(records, capacity=hall.capacity)
            write_hall_of_fame(run, hall)
            _log(f"resuming at iteration {state.iteration} of {evo.iterations}", quiet)

        ticker = None if quiet else Progress("evolution", every=30)
        interrupted = False
        try:
            while state.iteration < evo.iterations:
                if stop_after is not None and state.iteration >= stop_after:
                    interrupted = True
                    break
                record = evolve_step(state, evaluator, evo, rng, on_evaluation, space=space)
                run.append_log(json_safe(record))
                write_hall_of_fame(run, hall)
                run.write_checkpoint(state.to_json())
                if ticker:
                    ticker(state.iteration, evo.iterations)
        except KeyboardInterrupt:
            interrupted = True
            _log(f"\ninterrupted: saving the state of iteration {state.iteration}", quiet)
            state = EvolutionState.from_json(run.checkpoint())
    best = state.best(evo.parsimony)
    report = best_report(best, bench, split, targets, plan, cache, settings, run, state.iteration)
    report["finished"] = not interrupted
    run.write_best(report)
    if interrupted:
        _log(f"stopped at iteration {state.iteration}; continue with: autoprox search --resume --out {run.path}", quiet)
    return report
