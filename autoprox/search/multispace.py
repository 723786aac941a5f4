"""Searches over several spaces at once: one run, several benchmarks, one fitness.

A :class:`MultiRunContext` holds one :class:`~autoprox.search.context.RunContext` per
benchmark (its space's benchmark, split, statistics plan and cache, exactly as a
single-space run of the same settings would have them), and the fitness of a genome is
the JCM over every (benchmark, target) pair: each pair's Kendall is computed within its
own space, never across spaces, and weighted by its benchmark's weight
(``bench_weights``, by space name) times its target's (``weights``). Pairs are named
``SPACE/TARGET`` (``pit/c100_kd``) in every record, the hall of fame and ``best.json``.

A multi-space search checks its start and makes its fitness through its context, as a single-space search
does (:meth:`MultiRunContext.check_start`, :meth:`MultiRunContext.fitness_evaluator`: each benchmark's
:meth:`~autoprox.search.context.RunContext.fitness_evaluator` in turn): both kinds implement
:class:`~autoprox.search.searchrun.SearchRun`. :func:`new_context` makes either kind of run from its settings and
:func:`open_context` opens either from its ``config.json`` (a list of benchmarks only when there are several).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from autoprox.core.correlation import jcm as joint_metric
from autoprox.core.errors import ConfigError, RunDirError
from autoprox.core.parallel import Executor
from autoprox.data.benchmark import Benchmark, load_benchmark, locate_benchmark
from autoprox.data.prefetch import Prefetch
from autoprox.genome.tree import InvalidProxy, genome_to_string
from autoprox.core.errors import GenomeError
from autoprox.proxies.proxy import Proxy
from autoprox.search.context import RunContext, load_run_benchmark, run_config
from autoprox.search.searchrun import SearchRun
from autoprox.search.fitness import FitnessEvaluator, FitnessRecord, MemoisedFitness
from autoprox.search.rundir import CONFIG, RunDirectory
from autoprox.search.settings import SearchSettings, settings_of_config
from autoprox.spaces.descriptors import (
    terminal_differences,
    terminal_meanings,
)

#: Between a space and a target in a pair's name.
PAIR_SEPARATOR = "/"

def pair_name(space: str, target: str) -> str:
    """The name of a (benchmark, target) pair: ``pit/c100_kd``."""
    return f"{space}{PAIR_SEPARATOR}{target}"


@dataclass(frozen=True)
class MultiBench:
    """What a multi-space run shows where a single-space run shows its benchmark: the joined space
    name (``autoformer+pit``), each benchmark's sha256, and the architecture count over all."""

    space: str
    sha256: tuple[str, ...]
    size: int

    def __len__(self) -> int:
        return self.size


@dataclass(frozen=True)
class MultiSplit:
    """The parts' splits side by side: ``search`` and ``test`` hold (space, index) pairs."""

    parts: tuple

    @property
    def search(self) -> tuple:
        return tuple((c.bench.space, i) for c in self.parts for i in c.split.search)

    @property
    def test(self) -> tuple:
        return tuple((c.bench.space, i) for c in self.parts for i in c.split.test)

    def to_json(self) -> list:
        return [c.split.to_json() | {"space": c.bench.space} for c in self.parts]


@dataclass(frozen=True)
class MultiPlan:
    """The parts' statistics plans side by side."""

    parts: tuple

    def to_json(self) -> list:
        return [c.plan.to_json() | {"space": c.bench.space} for c in self.parts]


@dataclass(frozen=True)
class MultiRunContext:
    """One run over several benchmarks: one :class:`RunContext` per benchmark (``parts``).

    Make one with :meth:`from_settings` or :func:`open_context`; it answers the calls a
    search, ``show``, ``curves`` and ``export`` make of a run (``score``, ``figures``,
    ``evaluate``, ``beyond_size``), with figures keyed by pair (:func:`pair_name`).
    """

    settings: SearchSettings
    parts: tuple[RunContext, ...]
    run: RunDirectory | None = None

    @classmethod
    def from_settings(cls, settings: SearchSettings, run: str | Path | RunDirectory | None = None,
                      benches: Sequence[Benchmark] | None = None,
                      measured_on: str | None = "search") -> "MultiRunContext":
        """The context of a new multi-space run; ConfigError (one line) for what such a run cannot do:
        one benchmark, two of one space, weights of an unknown space, an explicit split, cross-validated
        fitness, architecture terminals that the spaces define differently. A fitness beyond a base is
        refused by the search itself (:meth:`check_start`, :meth:`fitness_evaluator`): the leave-one-space-out
        protocol, whose searches each see one space, takes it."""
        paths = settings.benches
        if len(paths) < 2:
            raise ConfigError("a multi-space search needs at least two benchmarks")
        if settings.split_indices is not None:
            raise ConfigError("a multi-space search splits each benchmark by --split-seed; explicit split indices "
                              "are for one benchmark")
        if settings.cv_folds:
            raise ConfigError("--cv-folds is for one benchmark; a multi-space search's fitness is the JCM over "
                              "every (benchmark, target) pair")
        loaded = list(benches) if benches is not None else [load_benchmark(locate_benchmark(p)) for p in paths]
        spaces = [b.space for b in loaded]
        if len(set(spaces)) != len(spaces):
            raise ConfigError(f"a multi-space search takes one benchmark per space; got spaces {', '.join(spaces)}")
        for name, weight in settings.bench_weights.items():
            if name not in spaces:
                raise ConfigError(f"--bench-weights names space {name!r}, which this search does not have "
                                  f"({', '.join(spaces)})")
            if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight) \
                    or weight < 0:
                raise ConfigError(f"the weight of benchmark {name} must be a finite number, at least 0; got {weight!r}")
        if not sum(settings.bench_weights.get(s, 1.0) for s in spaces) > 0:
            raise ConfigError("the benchmark weights must sum to a positive number")
        check_arch_terminals_agree(settings, spaces)
        targets = settings.targets or shared_default_targets(loaded)
        parts = tuple(RunContext.from_settings(replace(settings, bench=path, bench_weights={}, targets=targets),
                                               bench=bench, measured_on=measured_on)
                      for path, bench in zip(paths, loaded))
        settings = replace(settings, bench=tuple(p.settings.bench for p in parts), targets=tuple(targets))
        return cls(settings, parts, run if run is None or isinstance(run, RunDirectory) else RunDirectory(run))

    @classmethod
    def open(cls, path: str | Path | RunDirectory, benches: Sequence[str | Path] | None = None) -> "MultiRunContext":
        """The context of the multi-space run in ``path``: each benchmark found again by its recorded
        name and sha256 (``benches``: where to look instead, one per benchmark), each split checked
        against the recorded one."""
        run = path if isinstance(path, RunDirectory) else RunDirectory(path)
        config = run.config()
        try:
            settings = settings_of_config(config)
            recorded = config["benchmark"]
            splits = config["split"]
            if not settings.multi_space or not isinstance(recorded, list) or len(recorded) != len(settings.benches):
                raise ValueError("a multi-space run records one benchmark per space")
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise RunDirError(f"{run.file(CONFIG)}: not a run configuration this autoprox can read "
                              f"({type(exc).__name__}: {exc})") from None
        if benches is not None and len(benches) != len(settings.benches):
            raise ConfigError(f"{run.path} searched {len(settings.benches)} benchmarks; give --bench once for each "
                              f"(got {len(benches)})")
        loaded = []
        for i, (name, entry) in enumerate(zip(settings.benches, recorded)):
            sha256 = entry.get("sha256") if isinstance(entry, dict) else None
            file = Path(benches[i]) if benches is not None else locate_benchmark(name, sha256, near=run.path)
            spaces = config.get("spaces")
            bench = load_run_benchmark(run, file, spaces[i] if isinstance(spaces, list) and i < len(spaces) else None)
            if sha256 and bench.sha256 != sha256:
                raise RunDirError(f"{file} is not the benchmark {run.path} was made with "
                                  f"(sha256 {bench.sha256[:12]}..., the run recorded {sha256[:12]}...)")
            loaded.append(bench)
        context = cls.from_settings(settings, run, benches=loaded)
        if splits != context.split.to_json():
            raise RunDirError(f"{run.file(CONFIG)}: its recorded splits differ from those its settings give")
        return context

    def check_start(self) -> None:
        """Every refusal a new multi-space search makes of its settings, before its run directory is written:
        one it cannot run (:func:`check_searchable`), then each benchmark's
        (:meth:`~autoprox.search.context.RunContext.check_start`)."""
        check_searchable(self.settings)
        for part in self.parts:
            part.check_start()

    def fitness_evaluator(self, executor: Executor | None = None, quiet: bool = True
                          ) -> tuple[MultiFitnessEvaluator, None]:
        """The fitness of a multi-space search: one evaluator per benchmark, their statistics built in turn
        (:meth:`~autoprox.search.context.RunContext.fitness_evaluator`); no fitted base (:func:`check_searchable`)."""
        check_searchable(self.settings)
        evaluators = {}
        try:
            for part in self.parts:
                evaluators[part.bench.space] = part.fitness_evaluator(executor, quiet)[0]
        except BaseException:
            for evaluator in evaluators.values():
                evaluator.close()
            raise
        return MultiFitnessEvaluator(evaluators, self.pair_weights), None

    # ---------------------------------------------------------------- what a run shows

    @property
    def spaces(self) -> tuple[str, ...]:
        return tuple(c.bench.space for c in self.parts)

    @property
    def bench(self) -> MultiBench:
        return MultiBench("+".join(self.spaces), tuple(c.bench.sha256 for c in self.parts),
                          sum(len(c.bench) for c in self.parts))

    @property
    def split(self) -> MultiSplit:
        return MultiSplit(self.parts)

    @property
    def plan(self) -> MultiPlan:
        return MultiPlan(self.parts)

    @property
    def targets(self) -> tuple[str, ...]:
        """The (benchmark, target) pairs, by name."""
        return tuple(pair_name(c.bench.space, t) for c in self.parts for t in c.targets)

    @property
    def pair_weights(self) -> dict[str, float]:
        """Each pair's JCM weight: its benchmark's weight times its target's."""
        settings = self.settings
        return {pair_name(c.bench.space, t): settings.bench_weights.get(c.bench.space, 1.0)
                * settings.weights.get(t, 1.0) for c in self.parts for t in c.targets}

    def config_json(self, command: Sequence[str] | None = None) -> dict:
        """``config.json`` of a multi-space run: the single-space record's fields, as one list per benchmark
        (:func:`~autoprox.search.context.run_config`)."""
        return run_config(self.settings, self.parts, command)

    def with_session(self, changes: Mapping[str, Any]) -> "MultiRunContext":
        """This run with the session settings ``changes`` made, in its settings and in each benchmark's
        (:meth:`~autoprox.search.context.RunContext.with_session`)."""
        return replace(self, settings=self.settings.replaced(changes),
                       parts=tuple(part.with_session(changes) for part in self.parts))

    def test_prefetch(self, executor: Executor | None = None) -> Prefetch:
        """Nothing: a multi-space search computes its test splits' statistics for its final report."""
        return Prefetch.nothing()

    def indices(self, part: str) -> list[tuple[str, int]]:
        return [(c.bench.space, i) for c in self.parts for i in c.indices(part)]

    def archs(self, part: str) -> list:
        return [a for c in self.parts for a in c.archs(part)]

    # -------------------------------------------------------------- scoring a proxy

    def score(self, proxy: Proxy, part: str, workers=None, progress: Callable[[int, int], None] | None = None
              ) -> list[dict[int, np.ndarray]]:
        """Scores of ``proxy`` on ``part`` of each benchmark, one entry per benchmark; raises InvalidProxy
        naming the space where it fails."""
        scores = []
        for context in self.parts:
            try:
                scores.append(context.score(proxy, part, workers=workers, progress=progress))
            except InvalidProxy as exc:
                raise InvalidProxy(f"{context.bench.space}: {exc}") from None
        return scores

    def figures(self, scores: Sequence[Mapping[int, np.ndarray]], part: str, targets=None, weights=None) -> dict:
        """Per-pair correlations and the JCM over every pair (each pair's Kendall within its own space),
        with each benchmark's own figures under ``spaces``."""
        per_space = {c.bench.space: c.figures(s, part, weights=self.settings.weights)
                     for c, s in zip(self.parts, scores)}
        pairs = {pair_name(space, t): f for space, result in per_space.items() for t, f in result["targets"].items()}
        kendalls = {name: f["kendall"] for name, f in pairs.items()}
        return {"targets": pairs, "jcm": joint_metric(kendalls, weights or self.pair_weights), "spaces": {
            space: {"jcm": result["jcm"]} for space, result in per_space.items()}}

    def beyond_size(self, scores: Sequence[Mapping[int, np.ndarray]], part: str, targets=None) -> dict:
        """The beyond-size report of each benchmark, keyed by pair."""
        return {pair_name(c.bench.space, t): report for c, s in zip(self.parts, scores)
                for t, report in c.beyond_size(s, part).items()}

    def evaluate(self, proxy: Proxy, part: str, targets=None, weights=None, workers=None, progress=None) -> dict:
        """Figures of ``proxy`` on ``part`` of every benchmark, or ``{"invalid": reason}``."""
        try:
            scores = self.score(proxy, part, workers=workers, progress=progress)
        except InvalidProxy as exc:
            return {"invalid": str(exc)}
        return self.figures(scores, part, weights=weights)


def shared_default_targets(benches: Sequence[Benchmark]) -> tuple[str, ...]:
    """The default targets every benchmark has, in the first one's order; ConfigError when none."""
    first = benches[0].default_targets()
    shared = tuple(t for t in first if all(t in b.default_targets() for b in benches[1:]))
    if not shared:
        raise ConfigError("the benchmarks share no default target; give --targets")
    return shared


def check_arch_terminals_agree(settings: SearchSettings, spaces: Sequence[str]) -> None:
    """ConfigError when the genome space has architecture terminals and ``spaces`` define them differently."""
    if not settings.genome_space.arch_terminals:
        return
    differ = terminal_differences(spaces)
    if differ:
        name = differ[0]
        meanings = "; ".join(f"{s}: {terminal_meanings(s)[name]}" for s in spaces)
        raise ConfigError(f"--arch-terminals: the spaces {', '.join(spaces)} define {', '.join(differ)} differently "
                          f"({name}: {meanings}), so a formula on them would not mean one thing; search without "
                          "--arch-terminals (docs/manual.md#searching-several-spaces)")


def new_context(settings: SearchSettings, run: str | Path | RunDirectory | None = None,
                measured_on: str | None = "search") -> SearchRun:
    """The context of a new run of ``settings``: a :class:`MultiRunContext` when they name several benchmarks,
    else a :class:`~autoprox.search.context.RunContext` (their ``from_settings``)."""
    maker = MultiRunContext if settings.multi_space else RunContext
    return maker.from_settings(settings, run, measured_on=measured_on)


def open_context(path: str | Path | RunDirectory, bench=None) -> SearchRun:
    """The context of the run in ``path``, single- or multi-space, from its ``config.json``.
    ``bench``: where the benchmark is (a multi-space run: one path per benchmark)."""
    run = path if isinstance(path, RunDirectory) else RunDirectory(path)
    settings = run.config().get("settings")
    if isinstance(settings, dict) and isinstance(settings.get("bench"), list):
        benches = None if bench is None else ([bench] if isinstance(bench, (str, Path)) else list(bench))
        return MultiRunContext.open(run, benches)
    if bench is not None and not isinstance(bench, (str, Path)):
        bench = list(bench)
        if len(bench) != 1:
            raise ConfigError(f"{run.path} searched one benchmark; give --bench once")
        bench = bench[0]
    return RunContext.open(run, bench=bench)


# ------------------------------------------------------------------------ fitness

class MultiFitnessEvaluator(MemoisedFitness):
    """The fitness of a multi-space search: one :class:`FitnessEvaluator` per benchmark (each with its
    own evaluator strategy, objective and data), and the JCM over every (benchmark, target) pair of
    their Kendalls (:data:`pair_weights` weighting them); a record's ``fitness`` is that JCM.

    A genome invalid on any benchmark is invalid (the reason names the space). Records are
    memoised by canonical genome, as a single-space evaluator's.
    """

    def __init__(self, evaluators: Mapping[str, FitnessEvaluator], pair_weights: Mapping[str, float]) -> None:
        self.evaluators = dict(evaluators)
        self.pair_weights = dict(pair_weights)
        self.memo: dict[str, FitnessRecord] = {}
        self.evaluations = 0
        self.seconds = 0.0
        counted = {(space, key): blocks for space, e in self.evaluators.items() for key, blocks in (e.counted or {}).items()}
        self.counted = counted if all(e.counted is not None for e in self.evaluators.values()) else None

    @property
    def path_counts(self) -> dict[str, int]:
        return {kind: sum(e.path_counts[kind] for e in self.evaluators.values()) for kind in ("counted", "exact")}

    def prepare(self) -> float:
        return sum(e.prepare() for e in self.evaluators.values())

    def close(self) -> None:
        for evaluator in self.evaluators.values():
            evaluator.close()

    def _evaluate(self, tree, canonical: str) -> FitnessRecord:
        """The genome's record: per-pair Kendall, Spearman and Pearson, and the JCM over the pairs."""
        text = genome_to_string(tree)
        merged = FitnessRecord(text, canonical, True)
        for space, evaluator in self.evaluators.items():
            try:
                record = evaluator.evaluate(tree)
            except (InvalidProxy, GenomeError) as exc:  # pragma: no cover - the evaluator returns these as records
                return FitnessRecord(text, canonical, False, reason=f"{space}: invalid: {exc}"[:200])
            if not record.valid:
                return FitnessRecord(text, canonical, False, reason=f"{space}: {record.reason}"[:200])
            for field_name in ("kendall", "spearman", "pearson"):
                getattr(merged, field_name).update(
                    {pair_name(space, t): v for t, v in getattr(record, field_name).items()})
        merged.jcm = merged.fitness = joint_metric(merged.kendall, self.pair_weights)
        return merged


def check_searchable(settings: SearchSettings) -> None:
    """ConfigError when a multi-space search cannot run ``settings``: a fitness beyond a base (each space
    would need its own base; the leave-one-space-out protocol, whose searches each see one space, takes it)."""
    if not settings.fitness_mode.plain:
        raise ConfigError(f"--fitness {settings.fitness} is for one benchmark; a multi-space search's fitness is "
                          "the JCM over every (benchmark, target) pair (the leave-one-space-out protocol takes it)")


__all__ = ["MultiFitnessEvaluator", "MultiRunContext", "check_searchable", "new_context", "open_context", "pair_name",
           "shared_default_targets", "check_arch_terminals_agree"]
