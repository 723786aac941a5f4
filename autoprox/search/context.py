"""The run object: one place where settings become working objects.

A :class:`RunContext` is made from :class:`~autoprox.search.settings.SearchSettings`
(a new search) or opened from a run directory (``config.json``); either way it holds
the benchmark, the targets, the search/test split, the statistics plan and the cache,
and it scores a proxy on a part of the split and computes its figures. Everything that
works on a run (the search itself, transfer studies, ``show``, ``curves``, ``export``'s
formula check, the benchmark scripts) goes through it, so they cannot disagree on how a
run is read. A new search asks it for its checks (:meth:`RunContext.check_start`) and for the
fitness of its search part (:meth:`RunContext.fitness_evaluator`), so that the search reads its
settings here, where the context was made from them, and not again after.

Everything that works on a run, of one space or several (a
:class:`~autoprox.search.multispace.MultiRunContext`), reads it through
:class:`~autoprox.search.searchrun.SearchRun`, the interface both kinds implement: where they differ, each
does it its own way (``with_session``, ``test_prefetch``, ``parts``), so no caller asks which kind it holds.
Both write ``config.json`` through :func:`run_config`, and a search's ``best.json`` is :func:`best_report`'s.

A run records its benchmark portably: a file found in the usual places
(:func:`autoprox.data.benchmark.bench_search_dirs`) is recorded by its file name and
sha256, never by an absolute path, so a committed run reopens on any machine that has
the same file in one of those places.
"""

from __future__ import annotations

import datetime as _dt
import math
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np

from autoprox import __version__
from autoprox.core.atomic import json_safe
from autoprox.core.errors import ArchitectureError, BenchmarkError, ConfigError, GenomeError, RunDirError
from autoprox.core.parallel import DaskExecutor, Executor
from autoprox.core.progress import Progress
from autoprox.data.benchmark import (
    Benchmark,
    Split,
    load_benchmark,
    locate_benchmark,
    portable_bench_path,
    split_benchmark,
)
from autoprox.data.cache import StatisticsCache, StatsPlan
from autoprox.data.entries import STATS_VERSION
from autoprox.data.prefetch import Prefetch
from autoprox.genome.terminals import TerminalSource, computed_sets, terminal_table
from autoprox.genome.tree import InvalidProxy, parse_genome
from autoprox.proxies.baselines import baseline_scores, choose_baselines
from autoprox.proxies.figures import beyond_size, figures
from autoprox.proxies.proxy import Proxy, score_archs
from autoprox.proxies.scoring import ScoringProxy
from autoprox.search.fitness import FitnessEvaluator, FitnessRecord, make_folds
from autoprox.search.objectives import ObjectiveData, search_objective
from autoprox.search.rundir import CONFIG, RunDirectory
from autoprox.search.settings import OPERATORS_FIELD, SearchSettings, settings_of_config
from autoprox.search.space_evaluator import build_search_statistics, space_evaluator
from autoprox.spaces.descriptors import descriptor_columns
from autoprox.spaces.registry import get_space

if TYPE_CHECKING:
    from autoprox.search.searchrun import SearchRun

#: How messages name the parts of a benchmark a run names.
_PART_NAMES = {"search": "the search split", "test": "the test split", "all": "all architectures"}

#: Scores of a proxy: one array per statistics class count (see :class:`StatsPlan`).
Scores = Mapping[int, np.ndarray]


@dataclass(frozen=True)
class RunContext:
    """Settings, benchmark, targets, split, statistics plan and cache of one run.

    Make one with :meth:`from_settings` (a new run) or :meth:`open` (a run directory);
    never by hand. ``run`` is the run directory when there is one.
    """

    settings: SearchSettings
    bench: Benchmark
    targets: tuple[str, ...]
    split: Split
    plan: StatsPlan
    cache: StatisticsCache
    run: RunDirectory | None = None

    # ------------------------------------------------------------------ making one

    @classmethod
    def from_settings(cls, settings: SearchSettings, run: str | Path | RunDirectory | None = None,
                      bench: Benchmark | None = None, measured_on: str | None = "search") -> "RunContext":
        """The context of a new run: the benchmark loaded and its targets and weights checked.

        ``settings.targets`` empty means the benchmark's default targets; the returned
        context's ``settings`` name them, as ``config.json`` records them. Each target must
        be able to rank the architectures of the part ``measured_on`` (the search split by
        default; None: no check): at least three measured values, not all equal. All this is
        checked before any statistics are computed.
        """
        if settings.multi_space:
            raise ConfigError(f"{len(settings.benches)} benchmarks given where one is taken; a search over several "
                              "spaces is made by autoprox search (autoprox.search.multispace)")
        # A recorded bare file name (a portable run) is looked for in the usual places.
        bench = bench if bench is not None else load_benchmark(locate_benchmark(settings.bench))
        targets = tuple(bench.check_targets(list(settings.targets) or bench.default_targets()))
        for name, weight in settings.weights.items():
            bench.check_targets([name])
            if name not in targets:  # its weight would weigh nothing: the JCM sums over the searched targets
                raise ConfigError(f"--weights names {name}, which is not one of the targets searched "
                                  f"({', '.join(targets)}): add it to --targets, or leave its weight out")
            if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight) \
                    or weight < 0:
                raise ConfigError(f"the weight of {name} must be a finite number, at least 0; got {weight!r}")
        settings.fitness_mode  # noqa: B018 - ConfigError for an unknown fitness, before anything is computed
        settings = replace(settings, targets=targets, bench=portable_bench_path(settings.bench))
        split = settings_split(settings, len(bench))
        if settings.split_indices is not None:
            settings = replace(settings, split_indices=split.search)  # recorded sorted
        if measured_on is not None:
            bench.check_measured(targets)
            bench.check_measured(targets, split.indices(measured_on, len(bench)), _PART_NAMES[measured_on])
        return cls(settings, bench, targets, split, stats_plan(settings, targets),
                   StatisticsCache(settings.cache_dir, settings.cache_precision), _run_directory(run))

    @classmethod
    def open(cls, path: str | Path | RunDirectory, bench: str | Path | None = None) -> "RunContext":
        """The context of the run in ``path``, from its ``config.json``.

        The benchmark is found again by the recorded path, else by its file name in the
        usual places (:func:`autoprox.data.benchmark.bench_search_dirs`) and beside the
        run, and must have the recorded sha256; ``bench`` overrides where to look. The
        split is the recorded one (checked against the one its seed, or its explicit
        ``split_indices``, gives).
        """
        run = _run_directory(path)
        config = run.config()
        try:
            settings = settings_of_config(config)
            settings.genome_space  # noqa: B018 - checks the recorded genome space
            recorded = config.get("benchmark") or {}
            if not isinstance(recorded, dict) or not isinstance(recorded.get("sha256", ""), (str, type(None))):
                raise ValueError("'benchmark' must be an object with a sha256 string")
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise RunDirError(f"{run.file(CONFIG)}: not a run configuration this autoprox can read "
                              f"({type(exc).__name__}: {exc})") from None
        sha256 = recorded.get("sha256")
        bench_path = Path(bench) if bench is not None else locate_benchmark(settings.bench, sha256, near=run.path)
        loaded = load_run_benchmark(run, bench_path, config.get("space"))
        if sha256 and loaded.sha256 != sha256:
            raise BenchmarkError(f"{bench_path} is not the benchmark {run.path} was made with "
                                 f"(sha256 {loaded.sha256[:12]}..., the run recorded {sha256[:12]}...)")
        context = cls.from_settings(settings, run, bench=loaded)
        split_json = config.get("split")
        try:
            recorded_split = Split.from_json(split_json) if split_json is not None else None
        except (KeyError, TypeError, ValueError) as exc:
            raise RunDirError(f"{run.file(CONFIG)}: its recorded split is unreadable "
                              f"({type(exc).__name__}: {exc})") from None
        if recorded_split is not None and recorded_split != context.split:
            raise RunDirError(f"{run.file(CONFIG)}: its recorded split differs from the one its settings give")
        return context

    def fitness_bases(self) -> tuple[dict[str, dict], dict[str, np.ndarray]]:
        """The base of the objective ``settings.fitness`` names (one beyond a base), fitted per target on the search part
        alone: ``(choices, scores)``, the choice per target (plain JSON) and its scores on the search part.

        Only the search part's accuracies reach the fitting
        (:func:`autoprox.proxies.baselines.choose_baselines`); the test part is never seen.
        """
        mode = self.settings.fitness_mode
        if mode.base is None:
            raise ConfigError(f"fitness {mode.name} has no base")
        columns = descriptor_columns(self.bench.archs)
        search = self.indices("search")
        choices = choose_baselines(columns, self.bench.accuracies, search, self.targets, [mode.base])[mode.base]
        scores = {t: baseline_scores(mode.base, choices[t], columns, search) for t in self.targets}
        return choices, scores

    def config_json(self, command: Sequence[str] | None = None) -> dict:
        """What ``config.json`` records for this run (no absolute path of this machine): :func:`run_config`."""
        return run_config(self.settings, self.parts, command)

    @property
    def parts(self) -> tuple["RunContext", ...]:
        """The single-benchmark contexts of the run: this one."""
        return (self,)

    def with_session(self, changes: Mapping[str, Any]) -> "RunContext":
        """This run with the session settings ``changes`` made (by setting name,
        :meth:`~autoprox.search.settings.SearchSettings.replaced`): a resume's workers, statistics cache or
        total of iterations; the cache is opened again where it moved."""
        settings = self.settings.replaced(changes)
        cache = self.cache if settings.cache_dir == self.settings.cache_dir else \
            StatisticsCache(settings.cache_dir, settings.cache_precision)
        return replace(self, settings=settings, cache=cache)

    def test_prefetch(self, executor: Executor | None = None) -> Prefetch:
        """The test split's statistics to compute during the evolution (:class:`~autoprox.data.prefetch.Prefetch`):
        where there is a test split, on this machine (not ``--scheduler``), with ``--workers`` 2 or more (one
        worker asks for one process at a time). Otherwise :meth:`~autoprox.data.prefetch.Prefetch.nothing`: the
        final report computes them."""
        if not self.split.test or self.settings.workers < 2 or isinstance(executor, DaskExecutor):
            return Prefetch.nothing()
        return Prefetch(self.cache, self.plan.requests(self.archs("test")))

    def check_start(self) -> None:
        """Every refusal a new search makes of its settings, made before its run directory is written or any
        statistics are computed: a refused start leaves no ``config.json`` behind it (which would refuse the
        corrected command as a run already there, and a resume of it as another search).

        The seed proxies must lie in the genome space; the computed terminal sets must be readable with the
        statistics plan (:meth:`check_terminal_sets`); cross-validation folds must fit the search part.
        """
        settings = self.settings
        space = settings.genome_space
        for text in settings.seed_proxies:
            if not space.contains(parse_genome(text)):
                raise GenomeError(f"seed proxy {text} uses an aggregation or input outside this search's genome space")
        self.check_terminal_sets()
        if settings.cv_folds:
            make_folds(len(self.split.search), settings.cv_folds, settings.split_seed)

    def fitness_evaluator(self, executor: Executor | None = None, quiet: bool = True
                          ) -> tuple[FitnessEvaluator, dict | None]:
        """The fitness of the search part, and the fitted base of an objective beyond one (None otherwise).

        The search part's statistics are built first (with ``executor``, else the settings' workers; a
        progress line unless ``quiet``), then its scalar terminals; the evaluator strategy, the objective
        (:func:`autoprox.search.objectives.search_objective`, with its cross-validation folds) and the base,
        fitted per target on the search part alone, are the settings'. How the statistics are then held
        (in memory, memory-mapped, or sharded on a Dask cluster's workers) is
        :func:`autoprox.search.space_evaluator.space_evaluator`'s.
        """
        settings, plan = self.settings, self.plan
        archs = self.archs("search")
        build_search_statistics(self.cache, plan, archs, executor if executor is not None else settings.workers,
                                quiet)
        terminals = self.scalar_terminals(archs, executor, quiet)
        folds = make_folds(len(self.split.search), settings.cv_folds, settings.split_seed) \
            if settings.cv_folds else None
        objective = search_objective(settings.fitness, folds, settings.cv_mode)
        fitness_choices, bases = self.fitness_bases() if objective.base is not None else (None, None)
        data = ObjectiveData(self.accuracies("search"), tuple(self.targets), plan.target_classes,
                             settings.weights, bases or {})
        evaluator = space_evaluator(self.cache, plan, archs, terminals, data, objective, evaluation=settings.evaluation,
                                    kernels=settings.kernels, workers=settings.workers, executor=executor)
        return evaluator, fitness_choices

    # ---------------------------------------------------------------- parts of it

    def indices(self, part: str) -> list[int]:
        """Benchmark indices of ``part``: ``search``, ``test`` or ``all``."""
        return self.split.indices(part, len(self.bench))

    def archs(self, part: str) -> list:
        return [self.bench.archs[i] for i in self.indices(part)]

    def accuracies(self, part: str, targets: Sequence[str] | None = None) -> dict[str, np.ndarray]:
        indices = self.indices(part)
        return {t: self.bench.accuracies[t][indices] for t in (targets or self.targets)}

    # -------------------------------------------------------------- scoring a proxy

    def check_terminal_sets(self) -> tuple[str, ...]:
        """The computed terminal sets the genome space chose; ConfigError when they cannot be read with this
        statistics plan (checked before a search writes anything, and before any statistics are computed)."""
        computed = computed_sets(self.settings.genome_space.terminals)
        if computed and len(self.plan.keys()) != 1:
            raise ConfigError(f"--terminals {','.join(computed)} reads one network per architecture: use one "
                              "--stat-seeds seed and no --per-target-stats")
        return tuple(computed)

    def scalar_terminals(self, archs: Sequence, executor=None, quiet: bool = True) -> list[dict[str, float]]:
        """Per architecture of ``archs``, the scalar terminal values this run's genomes read: every set
        the architecture alone gives, and the computed sets its genome space chose (the zoo's: on each
        network and batch of the plan's statistics, read from or kept in the score cache beside them;
        ``executor`` or the settings' workers compute the missing ones).

        Raises
        ------
        ConfigError
            A computed set with several statistics sets (seeds or class counts): its values are of
            one network and batch per architecture.
        """
        settings, plan = self.settings, self.plan
        computed = self.check_terminal_sets()
        source = None
        if computed:
            seed, classes = plan.keys()[0]
            source = TerminalSource(plan.spec, seed, classes, self.cache.root,
                                    workers=executor if executor is not None else settings.workers,
                                    progress=None if quiet else Progress(",".join(computed) + " terminals", every=15))
        return terminal_table(archs, source, computed)

    def score(self, proxy: Proxy, part: str, workers: int | None = None,
              progress: Callable[[int, int], None] | None = None) -> dict[int, np.ndarray]:
        """Scores of ``proxy`` on ``part``, one array per statistics class count (the search's form; a proxy of
        any kind, an ensemble's included, is scored per target by :meth:`target_scores`).

        Raises :class:`~autoprox.genome.tree.InvalidProxy` when the proxy fails there.
        """
        return score_archs(proxy, self.archs(part), self.cache, self.plan,
                           workers=self.settings.workers if workers is None else workers, progress=progress)

    def target_scores(self, proxy: ScoringProxy, part: str, given_targets: Sequence[str] | None = None,
                      workers: int | None = None, progress: Callable[[int, int], None] | None = None
                      ) -> tuple[dict[str, np.ndarray], "RunContext"]:
        """Scores of any proxy on ``part`` keyed by target, and this context keyed by target too, so that its
        :meth:`figures` and :meth:`beyond_size` read each target's own scores.

        The targets are this context's that the proxy scores (all of them, or a per-target ensemble's and those
        of ``given_targets``, which it must have); the statistics are :meth:`ScoringProxy.scoring_plan`'s (an
        ensemble's recorded ones). Raises InvalidProxy when the proxy fails there.
        """
        given = tuple(given_targets or ())
        targets = [t for t in self.targets if not proxy.targets or t in proxy.targets or t in given]
        scores = proxy.target_scores(self.archs(part), self.cache, proxy.scoring_plan(self.plan), targets,
                                     workers=self.settings.workers if workers is None else workers,
                                     progress=progress)
        keyed = replace(self, targets=tuple(targets), plan=replace(self.plan, target_classes={t: t for t in targets}))
        return scores, keyed

    def figures(self, scores: Scores, part: str, targets: Sequence[str] | None = None,
                weights: Mapping[str, float] | None = None) -> dict:
        """Per-target correlations and the JCM of ``scores`` given for ``part``."""
        targets = list(targets or self.targets)
        return figures(scores, self.accuracies(part, targets), targets, self.plan.target_classes,
                       self.settings.weights if weights is None else weights)

    def beyond_size(self, scores: Scores, part: str, targets: Sequence[str] | None = None) -> dict:
        """The beyond-size report (:func:`autoprox.proxies.figures.beyond_size`) of ``scores`` on ``part``."""
        archs = self.archs(part)
        report = {}
        for target in targets or self.targets:
            values = scores[self.plan.target_classes[target]]
            report.update(beyond_size(values, archs, self.accuracies(part, [target]), [target]))
        return report

    def evaluate(self, proxy: Proxy, part: str, targets: Sequence[str] | None = None,
                 weights: Mapping[str, float] | None = None, workers: int | None = None,
                 progress: Callable[[int, int], None] | None = None) -> dict:
        """Figures of ``proxy`` on ``part``, or ``{"invalid": reason}``."""
        try:
            scores = self.score(proxy, part, workers=workers, progress=progress)
        except InvalidProxy as exc:
            return {"invalid": str(exc)}
        return self.figures(scores, part, targets, weights)


#: What ``best.json`` says in place of test figures when the run searched on every architecture.
NO_TEST_PART = "no test part: the search used every architecture"
#: What it says in their place when a signal stopped the search (they are computed when it resumes).
TEST_DEFERRED = "not computed: the search was stopped before its end; resuming it computes them"


def best_report(record: FitnessRecord, context: "SearchRun", iteration: int, executor: Executor | None = None,
                fitness_choices: dict | None = None, test_figures: bool = True, quiet: bool = True,
                prefetch: Prefetch | None = None) -> dict:
    """``best.json``: the genome, its figures on both splits, and the parameter count's beside them.

    The figures are the plain ones (Kendall, JCM) whatever the fitness; with another fitness,
    ``fitness`` says which, its value on the search part and the base chosen per target
    (``fitness_choices``). A run without a test part says so (:data:`NO_TEST_PART`) in place of
    its test figures; without ``test_figures`` (a search stopped by a signal, which must stop at
    once) they are left for its resume to compute (:data:`TEST_DEFERRED`). Unless ``quiet``, each split
    says on stderr that it is being scored, with a progress line while its statistics are computed or read
    (the test split's are computed here, after the evolution, or waited for from ``prefetch``, which computes
    them during the evolution: :meth:`~autoprox.search.searchrun.SearchRun.test_prefetch`). One function for both
    kinds of run (:class:`~autoprox.search.searchrun.SearchRun`).
    """
    settings, run = context.settings, context.run
    proxy = Proxy(record.genome, parse_genome(record.genome))
    params = Proxy("params")
    parts = ("search", "test") if context.split.test and test_figures else ("search",)
    absent = TEST_DEFERRED if context.split.test else NO_TEST_PART
    # Score the proxy once per split; its figures and its beyond-size report both read them.
    scores = {"test": InvalidProxy(absent)}
    for part in parts:
        if not quiet:
            print(f"final report: the best proxy on the {part} split ({len(context.indices(part))} architectures)",
                  file=sys.stderr, flush=True)
        progress = None if quiet else Progress(f"{part} split statistics", every=15)
        if part == "test" and prefetch is not None:
            prefetch.wait(progress)
        try:
            scores[part] = context.score(proxy, part, workers=executor, progress=progress)
        except InvalidProxy as exc:
            scores[part] = InvalidProxy(str(exc))

    def on_split(part: str, summary: Callable) -> dict:
        if part not in parts:
            return {"none": absent}
        if isinstance(scores[part], InvalidProxy):
            return {"invalid": str(scores[part])}
        return summary(scores[part], part)

    report = {
        "genome": record.genome,
        "canonical": record.canonical,
        "run": str(run.path) if run is not None else None,
        "iteration": iteration,
        "space": context.bench.space,
        "targets": list(context.targets),
        "weights": dict(settings.weights),
        "stats": context.plan.to_json(),
        "split": context.split.to_json(),
        "search": on_split("search", context.figures),
        "test": on_split("test", context.figures),
        "params": {part: context.evaluate(params, part, workers=1) if part in parts else {"none": absent}
                   for part in ("search", "test")},
        "genome_space": settings.genome_space.to_json(),
        "cv": {"folds": settings.cv_folds, "mode": settings.cv_mode, "fitness": record.fitness,
               "fold_jcm": record.fold_fitness} if settings.cv_folds else None,
        "written": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }
    if not settings.fitness_mode.plain:
        report["fitness"] = {"name": settings.fitness, "search": record.fitness, "plain_jcm": record.jcm,
                             "targets": record.fitness_targets, "base": fitness_choices}
    if "jcm" in report["search"] and "jcm" in report["test"]:
        report["generalisation_gap"] = report["search"]["jcm"] - report["test"]["jcm"]
    report["beyond_size"] = {part: on_split(part, context.beyond_size) for part in ("search", "test")}
    return json_safe(report)


def run_config(settings: SearchSettings, parts: Sequence[RunContext], command: Sequence[str] | None = None) -> dict:
    """``config.json`` of a run over ``parts``, one single-benchmark context per benchmark: the one writer of both
    kinds of run. After the header (:func:`config_header`), the benchmark (path, file, sha256, architecture
    count), the split and the statistics plan: each one object for a run of one benchmark; for a run of several,
    one list entry per benchmark naming its ``space``, after the list of ``spaces``."""
    def benchmark(part: RunContext) -> dict:
        return {"path": part.settings.bench, "file": Path(part.bench.source).name, "sha256": part.bench.sha256,
                "architectures": len(part.bench)}

    def stats(part: RunContext) -> dict:
        return part.plan.to_json() | {"version": STATS_VERSION, "precision": part.cache.precision}

    config = config_header(settings, "+".join(part.bench.space for part in parts), command)
    records = {"benchmark": benchmark, "split": lambda part: part.split.to_json(), "stats": stats}
    if not settings.multi_space:
        (part,) = parts
        return config | {name: record(part) for name, record in records.items()}
    spaces = [part.bench.space for part in parts]
    return config | {"spaces": spaces} | {name: [record(part) | {"space": space} for part, space in zip(parts, spaces)]
                                          for name, record in records.items()}


def config_header(settings: SearchSettings, space: str, command: Sequence[str] | None = None) -> dict:
    """The fields every ``config.json`` begins with: version, time, command (``command``, else this process's
    command line; a run made from Python records its call, :func:`~autoprox.search.rundir.python_call`), settings,
    the operations the genomes are built from (the genome space's unary then binary operations, in drawing order)
    and space."""
    return {
        "autoprox_version": __version__,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": list(command if command is not None else [Path(sys.argv[0]).name, *sys.argv[1:]]),
        "settings": settings.to_json(),
        OPERATORS_FIELD: list(settings.genome_space.unary_operators + settings.genome_space.binary_operators),
        "space": space,
    }


def settings_split(settings: SearchSettings, size: int) -> Split:
    """The search/test split ``settings`` ask for on a benchmark of ``size`` architectures.

    ``settings.split_indices`` when set (the search part; the rest is the test part,
    ``search_fraction`` then records the share it makes), else the seeded split of
    ``split_seed`` and ``search_fraction``. ``search_fraction`` 1 searches on every architecture
    and leaves the test part empty (for a configuration a protocol has already chosen).
    """
    if settings.split_indices is None:
        if settings.search_fraction == 1:  # search on every architecture: no test part
            return Split(tuple(range(size)), (), settings.split_seed, 1.0)
        return split_benchmark(size, settings.split_seed, settings.search_fraction)
    search = sorted(set(settings.split_indices))
    if len(search) != len(settings.split_indices):
        raise ConfigError("split_indices: an architecture index is given twice")
    outside = [i for i in search if not 0 <= i < size]
    if outside:
        raise ConfigError(f"split_indices: index {outside[0]} is outside the benchmark's {size} architectures")
    if not 0 < len(search) < size:
        raise ConfigError(f"split_indices: the search part must hold between 1 and {size - 1} of the {size} "
                          f"architectures, got {len(search)}")
    chosen = set(search)
    test = tuple(i for i in range(size) if i not in chosen)
    return Split(tuple(search), test, settings.split_seed, len(search) / size)


def stats_plan(settings: SearchSettings, targets: Sequence[str]) -> StatsPlan:
    """The statistics plan of ``settings`` for ``targets`` (with the extra statistics its genome space reads)."""
    return StatsPlan.from_options(settings.input, settings.batch_size, settings.stat_seeds, targets,
                                  settings.per_target_stats, extras=settings.genome_space.extras)


def load_run_benchmark(run: RunDirectory, path: str | Path, space: Any) -> Benchmark:
    """The benchmark in ``path`` of the run in ``run``, which recorded it in the search space ``space``. When it
    cannot be read and that space is not registered here (a plug-in's, where its package is not installed), a
    RunDirError names the space, not what the architectures lack in the spaces that are."""
    try:
        return load_benchmark(path)
    except (BenchmarkError, ArchitectureError):
        if not isinstance(space, str) or not space:
            raise
        try:
            get_space(space)
        except ArchitectureError:
            raise RunDirError(f"{run.path} was made in the search space {space!r}, which is not registered here: "
                              "install the plug-in package that registers it (autoprox spaces lists the spaces "
                              "registered here)") from None
        raise


def _run_directory(run: str | Path | RunDirectory | None) -> RunDirectory | None:
    if run is None or isinstance(run, RunDirectory):
        return run
    return RunDirectory(run)


__all__ = ["NO_TEST_PART", "RunContext", "Scores", "TEST_DEFERRED", "best_report", "config_header", "load_run_benchmark",
           "run_config", "settings_split", "stats_plan"]
