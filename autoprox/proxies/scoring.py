"""One scoring interface for every proxy kind.

:class:`ScoringProxy` is what a caller scores with, whatever the proxy: a
:class:`~autoprox.proxies.proxy.Proxy` (a built-in, a zoo proxy, a genome, a rank or weighted formula) and an
:class:`~autoprox.proxies.ensemble.EnsembleProxy` (joint or per target) implement it with the same signatures,
so a command, an app or the Python API scores any proxy the same way and never asks which kind it holds.
The helpers below are the parts both kinds share (the arguments of :meth:`ScoringProxy.score_architectures`,
the per-seed outcomes of a candidate).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable, Mapping, Protocol, Sequence, runtime_checkable

import numpy as np

from autoprox.core.errors import ConfigError, ProxyError
from autoprox.data.cache import StatisticsCache, StatsPlan
from autoprox.networks.statistics import InputSpec

#: ``progress(done, total)``, called while statistics or raw values are computed.
ProgressFn = Callable[[int, int], None]
#: What a ViT search records per candidate: (score or per-seed raw values, seconds, error; "" when scored).
Outcome = tuple[object, float, str]


@runtime_checkable
class ScoringProxy(Protocol):
    """A proxy of any kind, as it is scored.

    ``target`` and ``targets`` name benchmark targets: a per-target ensemble scores each with members of its own;
    every other proxy scores every target alike, each with the statistics of the target's class count in the
    plan (:attr:`StatsPlan.target_classes`).
    """

    name: str
    provenance: Mapping
    note: str

    @property
    def kind(self) -> str:
        """A label for tables: ``architecture``, ``genome``, ``zoo``, ``rank formula``, ``ensemble``, ..."""

    @property
    def needs_statistics(self) -> bool:
        """Whether scoring computes (or reads cached) statistics of networks."""

    @property
    def set_level(self) -> bool:
        """Whether its scores need the whole ranked set (TVT's min-max normalisation)."""

    @property
    def targets(self) -> tuple[str, ...]:
        """The targets it has members of their own for (a per-target ensemble's); empty when it scores every
        target alike."""

    def scoring_plan(self, plan: StatsPlan) -> StatsPlan:
        """The statistics it is scored with where a command has ``plan``: ``plan`` itself, or, for an ensemble
        that recorded one, the statistics its references were scored with (at ``plan``'s class counts)."""

    def target_scores(self, archs: Sequence, cache: StatisticsCache, plan: StatsPlan, targets: Sequence[str],
                      workers: int = 1, progress: ProgressFn | None = None,
                      teacher=None) -> dict[str, np.ndarray]:
        """Scores of ``archs`` per target of ``targets``; InvalidProxy naming the first failing architecture."""

    def scores(self, archs: Sequence, cache: StatisticsCache, plan: StatsPlan, target: str | None = None,
               workers: int = 1, progress: ProgressFn | None = None, teacher=None) -> np.ndarray:
        """One score per architecture of ``archs``, for ``target`` (None: a joint ensemble's members, a proxy's
        first class count of ``plan``); InvalidProxy as :meth:`target_scores`."""

    def candidate_scores(self, archs: Sequence, spec: InputSpec, seeds: Sequence[int], cache: StatisticsCache,
                         target: str | None = None, *, workers: int = 1, keep_statistics: bool = True,
                         head_classes: int = 100, teacher=None) -> list[Outcome]:
        """One :data:`Outcome` per architecture, failures kept and never stopping the others (the ViT search's
        form): the statistics and the head have ``head_classes`` classes (an ensemble member: its own count)."""

    def score_architectures(self, archs, workers: int = 1, cache_dir: str | None = None, progress: bool = False,
                            *, cache: StatisticsCache | None = None, plan: StatsPlan | None = None,
                            target: str | None = None) -> np.ndarray:
        """Scores of architectures as ``autoprox score`` computes them, with the command line's defaults for
        what is not given (:func:`scoring_inputs`)."""


def architectures_given(archs) -> list:
    """The architectures ``archs`` stands for (configs, a Benchmark, a space's name or a benchmark file), parsed;
    ConfigError (one line) for what is none, or none at all."""
    from autoprox.data.benchmark import BENCH_FILE_NAMES, Benchmark, default_bench_path, load_benchmark
    from autoprox.spaces.architectures import parse_arch

    if isinstance(archs, Benchmark):
        parsed = list(archs.archs)
    elif isinstance(archs, (str, Path)):
        path = default_bench_path(str(archs)) if str(archs) in BENCH_FILE_NAMES else Path(archs)
        parsed = list(load_benchmark(path).archs)
    elif isinstance(archs, Iterable):  # configs, or records parse_arch gives back as they are
        parsed = [parse_arch(dict(arch) if isinstance(arch, Mapping) else arch) for arch in archs]
    else:
        raise ConfigError(f"archs: expected architecture configs, a benchmark file or a space's name, got "
                          f"{type(archs).__name__}")
    if not parsed:
        raise ConfigError("no architecture to score")
    return parsed


def scoring_inputs(archs, workers: int, cache_dir: str | None, cache: StatisticsCache | None,
                   plan: StatsPlan | None) -> tuple[list, StatisticsCache, StatsPlan]:
    """The arguments of :meth:`ScoringProxy.score_architectures`, checked (one-line ConfigError) and defaulted
    as on the command line: the parsed architectures, the cache (``cache_dir``'s, else ``$AUTOPROX_CACHE`` or
    ``~/.cache/autoprox``) and the plan (:meth:`StatsPlan.default`: a gaussian minibatch of 8, statistics seed
    0, a 100-class head)."""
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ConfigError(f"workers: expected at least 1, got {workers!r}"[:200])
    parsed = architectures_given(archs)
    plan = StatsPlan.default() if plan is None else plan
    cache = StatisticsCache(cache_dir) if cache is None else cache
    return parsed, cache, plan


def check_cache_and_plan(cache, plan) -> None:
    """ConfigError naming what a scoring call lacks (its cache, its plan), where it would fail inside with an
    AttributeError."""
    for name, value, kind in (("cache", cache, StatisticsCache), ("plan", plan, StatsPlan)):
        if value is None:
            raise ConfigError(f"score: {name} is None: give a {kind.__name__}, or score with the command line's "
                              "cache and plan: proxy.score_architectures(archs)")


def check_target(proxy: ScoringProxy, target: str | None) -> None:
    """ProxyError unless ``proxy`` scores ``target``: a proxy that scores every target alike scores any (None
    too), a per-target ensemble one of its :attr:`~ScoringProxy.targets`, which it names (checked before any
    scoring)."""
    if not proxy.targets or target in proxy.targets:
        return
    if target is None:
        raise ProxyError(f"{proxy.name} is a per-target ensemble ({', '.join(proxy.targets)}): "
                         "name one target (--target)")
    raise ProxyError(f"{proxy.name} has no members for target {target!r}; it has: {', '.join(proxy.targets)}")


def candidate_outcomes(runs: Sequence[Sequence], set_level: bool) -> list[Outcome]:
    """Each architecture's :data:`Outcome` from one run of raw results per statistics seed: the first failure's
    reason, else the mean over seeds, or for a set-level proxy the raw value per seed (normalised over the whole
    candidate set later)."""
    outcomes = []
    for index in range(len(runs[0]) if runs else 0):
        results = [run[index] for run in runs]
        seconds = float(sum(r.seconds for r in results if r.seconds == r.seconds))
        errors = [r.error for r in results if not r.ok]
        if errors:
            outcomes.append((None, seconds, errors[0][:300]))
            continue
        raws = [r.raw for r in results]
        outcomes.append((raws if set_level else float(np.mean(raws)), seconds, ""))
    return outcomes


__all__ = ["Outcome", "ProgressFn", "ScoringProxy", "architectures_given", "candidate_outcomes",
           "check_cache_and_plan", "check_target", "scoring_inputs"]
