"""How each kind of proxy turns architectures into raw values: the one scoring core.

A :class:`Scorer` gives, for one statistics seed and class count, one
:class:`~autoprox.proxies.zoo_scores.RawResult` per architecture (a raw value or the reason it
failed, and the seconds it took), and turns the raw values of a ranked set into scores
(:meth:`Scorer.set_scores`: the identity, except for set-level proxies such as TVT).
Everything that scores a proxy goes through it: :meth:`autoprox.proxies.proxy.Proxy.score`
(the runs, ``rank --proxy P``), the ranking table (several seeds, one row per proxy) and
the ViT search (freshly sampled architectures, scored chunk by chunk, whose statistics may
not be kept).

There are three kinds, each a registry or a wrapper of one:

* architecture proxies (``params``, ``flops``), registered with
  :func:`register_architecture_proxy`: computed from the architecture alone, with a
  classifier head of ``head_classes`` (the engine's convention: 100, whatever the
  statistics' class count);
* zoo proxies (:data:`autoprox.proxies.zoo.ZOO`): hand-crafted, computed on fresh
  networks, kept in the score cache beside the statistics cache;
* genomes: evaluated on per-block statistics (the statistics cache, or computed and
  dropped when ``keep_statistics`` is false).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np

from autoprox.core.parallel import as_executor
from autoprox.core.registry import Registry
from autoprox.data.cache import StatisticsCache, StatsPlan, StatsRequest, build_cache
from autoprox.genome.rank_formula import RankFormula
from autoprox.genome.terminals import TerminalSource, terminal_table
from autoprox.genome.tree import (
    InvalidProxy,
    genome_computed_sets,
    genome_extras,
    genome_terminals,
    genome_to_string,
    parse_genome,
    reads_statistics,
    score_architecture,
)
from autoprox.networks.statistics import InputSpec, compute_statistics, torch_threads
from autoprox.proxies.zoo import ZOO, ZooProxy
from autoprox.proxies.zoo_scores import RawResult, ZooScoreCache, compute_raw_values, computed_name
from autoprox.spaces.architectures import (
    arch_to_config,
    count_macs,
    count_params,
    parse_arch,
    transformer_widths,
)

#: The classifier head architecture-level quantities are counted with (the benchmark's README).
HEAD_CLASSES = 100

Progress = Callable[[int, int], None]


class Scorer:
    """One kind of proxy's way to score architectures (see the module docstring)."""

    kind: str = ""
    #: Whether scoring reads per-block statistics (the statistics cache).
    needs_statistics: bool = False
    #: Whether scores need the whole ranked set (a normalisation over it).
    set_level: bool = False

    @property
    def source(self) -> str:
        """Where the proxy comes from, in a few words."""
        raise NotImplementedError

    @property
    def nature(self) -> str:
        """Why it is not a genome, for a refusal to seed the search with it."""
        raise NotImplementedError

    def describe(self, spec: InputSpec, teacher=None) -> tuple[str, str]:
        """(what it reads, which passes it runs afresh per architecture), as tables say it."""
        raise NotImplementedError

    def computed_as(self, teacher=None) -> str | None:
        """The registered proxy computed in its place, when another one is (TVT without a teacher)."""
        return None

    def prepare(self, archs: Sequence, cache: StatisticsCache, plan: StatsPlan, workers: int = 1,
                progress: Progress | None = None) -> bool:
        """Compute, for a whole plan at once, what :meth:`raw_values` will read; True when
        ``progress`` was reported here (the statistics of genome proxies)."""
        return False

    def raw_values(self, archs: Sequence, spec: InputSpec, seed: int, num_classes: int, cache: StatisticsCache,
                   *, workers: int = 1, progress: Progress | None = None, teacher=None,
                   keep_statistics: bool = True, head_classes: int = HEAD_CLASSES) -> list[RawResult]:
        """One :class:`RawResult` per architecture of ``archs`` for statistics seed ``seed`` and
        ``num_classes`` classes; a failure is kept as its reason and never stops the others."""
        raise NotImplementedError

    def set_scores(self, raws: Sequence) -> np.ndarray:
        """Scores of a ranked set from its raw values (one seed)."""
        return np.asarray(raws, dtype=np.float64)


# ---------------------------------------------------------------- architecture proxies


@dataclass(frozen=True)
class ArchitectureProxy(Scorer):
    """A proxy computed from the architecture alone: ``function(arch, num_classes)``."""

    name: str
    function: Callable[..., float]
    description: str
    kind = "architecture"

    def __call__(self, arch, num_classes: int = HEAD_CLASSES) -> float:
        return self.function(arch, num_classes)

    @property
    def source(self) -> str:
        return self.description

    @property
    def nature(self) -> str:
        return "computed from the architecture alone, not from the per-block statistics"

    def describe(self, spec: InputSpec, teacher=None) -> tuple[str, str]:
        return "architecture", "no: architecture only"

    def raw_values(self, archs, spec, seed, num_classes, cache, *, workers=1, progress=None, teacher=None,
                   keep_statistics=True, head_classes=HEAD_CLASSES) -> list[RawResult]:
        results = []
        for arch in archs:
            start = time.perf_counter()
            value = float(self.function(arch, head_classes))
            results.append(RawResult(value, time.perf_counter() - start))
        return results


#: Architecture proxies by name, in registration order.
ARCHITECTURE_PROXIES: Registry[str, ArchitectureProxy] = Registry("architecture proxy", shares_names_with=ZOO)


def register_architecture_proxy(name: str, description: str):
    """Register the decorated ``function(arch, num_classes) -> number`` as architecture proxy ``name``."""

    def decorate(function: Callable[..., float]) -> Callable[..., float]:
        ARCHITECTURE_PROXIES.add(name, ArchitectureProxy(name, function, description))
        return function

    return decorate


@register_architecture_proxy("params", "parameter count")
def _params(arch, num_classes: int = HEAD_CLASSES) -> int:
    return count_params(arch, num_classes=num_classes)


@register_architecture_proxy("flops", "multiply-accumulates")
def _flops(arch, num_classes: int = HEAD_CLASSES) -> int:
    return count_macs(arch, num_classes=num_classes)


# ------------------------------------------------------------------------ zoo proxies


@dataclass(frozen=True)
class ZooScorer(Scorer):
    """A hand-crafted proxy of :data:`autoprox.proxies.zoo.ZOO`."""

    entry: ZooProxy
    kind = "zoo"

    @property
    def set_level(self) -> bool:
        return self.entry.set_level

    @property
    def source(self) -> str:
        return self.entry.source

    @property
    def nature(self) -> str:
        entry = self.entry
        return (f"a hand-crafted proxy ({entry.source}: {entry.definition}) computed from its own network "
                f"({entry.passes or 'initialised weights'}), not an expression over the eight per-block "
                "statistics F1..F4g")

    def describe(self, spec: InputSpec, teacher=None) -> tuple[str, str]:
        computed = ZOO[computed_name(self.entry.name, teacher)]
        return computed.input, f"yes: {computed.passes}" if computed.passes else "no pass: initialised weights only"

    def computed_as(self, teacher=None) -> str | None:
        name = computed_name(self.entry.name, teacher)
        return name if name != self.entry.name else None

    def raw_values(self, archs, spec, seed, num_classes, cache, *, workers=1, progress=None, teacher=None,
                   keep_statistics=True, head_classes=HEAD_CLASSES) -> list[RawResult]:
        name = computed_name(self.entry.name, teacher)
        return compute_raw_values([name], archs, spec, seed, num_classes, teacher=teacher, workers=workers,
                                  score_cache=ZooScoreCache(cache.root), progress=progress)[name]

    def set_scores(self, raws: Sequence) -> np.ndarray:
        return self.entry.set_scores(raws)


# ---------------------------------------------------------------------------- genomes


@dataclass(frozen=True)
class GenomeScorer(Scorer):
    """A genome (a parsed tree) evaluated on per-block statistics."""

    tree: object
    kind = "genome"

    @property
    def needs_statistics(self) -> bool:
        """Only a genome that reads a statistic needs a network pass; one of architecture
        terminals alone is scored from each architecture's block count (the same values)."""
        return reads_statistics(self.tree)

    @property
    def source(self) -> str:
        return "genome string"

    @property
    def nature(self) -> str:  # pragma: no cover - a genome can always seed, shape permitting
        return "a genome"

    def describe(self, spec: InputSpec, teacher=None) -> tuple[str, str]:
        reads = f"statistics ({spec.kind}, batch {spec.batch_size})"
        computed = genome_computed_sets(self.tree)
        if computed:
            return f"{reads} and {', '.join(computed)} terminals", "no: statistics and zoo score caches"
        return reads, "no: statistics cache"

    def prepare(self, archs, cache, plan, workers=1, progress=None) -> bool:
        if not self.needs_statistics:
            return False
        # The extra statistics (the spread terminals' entries) only when the genome reads them.
        build_cache(cache, plan.with_extras(genome_extras(self.tree)).requests(archs), workers=workers,
                    progress=progress)
        return progress is not None

    def raw_values(self, archs, spec, seed, num_classes, cache, *, workers=1, progress=None, teacher=None,
                   keep_statistics=True, head_classes=HEAD_CLASSES) -> list[RawResult]:
        # Scalar terminals: the architectures' own, and the zoo's (computed on the statistics' network
        # and batch, kept in the score cache beside the statistics cache) when the genome reads them.
        computed = genome_computed_sets(self.tree)
        if not keep_statistics and (self.needs_statistics or computed):
            return _fresh_genome_values(genome_to_string(self.tree), archs, spec, seed, num_classes, workers,
                                        head_classes)
        source = (TerminalSource(spec, seed, num_classes, cache.root, workers, names=genome_terminals(self.tree))
                  if computed else None)
        scalars = terminal_table(archs, source, computed, head_classes)
        if not self.needs_statistics:
            return _blocks_only_values(self.tree, archs, scalars, progress)
        requests = [StatsRequest(arch, spec, seed, num_classes, genome_extras(self.tree)) for arch in archs]
        build_cache(cache, requests, workers=workers, progress=progress)
        results = []
        with torch_threads(1):  # as the fitness evaluator: the same numbers to the last bit
            for request, arch_scalars in zip(requests, scalars):
                start = time.perf_counter()
                try:
                    value = score_architecture(self.tree, cache.get(request), arch_scalars)
                except InvalidProxy as exc:
                    results.append(RawResult(None, time.perf_counter() - start, f"invalid: {exc}"))
                    continue
                results.append(RawResult(value, time.perf_counter() - start))
        return results


def _blocks_only_values(tree, archs: Sequence, scalars: Sequence[Mapping[str, float]],
                        progress=None) -> list[RawResult]:
    """A genome of scalar terminals alone (``scalars``: each architecture's values): its blocks hold no
    statistic, only their count matters (a sum over blocks: the architecture's transformer blocks,
    as its depth descriptor counts them), so no statistics are computed or cached."""
    results = []
    with torch_threads(1):
        for done, (arch, arch_scalars) in enumerate(zip(archs, scalars), 1):
            start = time.perf_counter()
            try:
                value = score_architecture(tree, [{} for _ in transformer_widths(arch)], arch_scalars)
            except InvalidProxy as exc:
                results.append(RawResult(None, time.perf_counter() - start, f"invalid: {exc}"))
            else:
                results.append(RawResult(value, time.perf_counter() - start))
            if progress:
                progress(done, len(archs))
    return results


def _fresh_genome_value(genome: str, config: dict, space: str, spec: dict, seed: int, num_classes: int,
                        head_classes: int) -> tuple[float | None, float, str]:
    """Worker body: one architecture's statistics computed, scored and dropped: (value, seconds, error)."""
    start = time.perf_counter()
    try:
        arch = parse_arch(config, space)
        tree = parse_genome(genome)
        spec_obj = InputSpec(**spec)
        computed = genome_computed_sets(tree)
        source = TerminalSource(spec_obj, seed, num_classes, names=genome_terminals(tree)) if computed else None
        scalars = terminal_table([arch], source, computed, head_classes)[0]
        stats = (compute_statistics(arch, spec_obj, seed, num_classes, **{extra: True for extra in genome_extras(tree)})
                 if reads_statistics(tree) else [{} for _ in transformer_widths(arch)])
        with torch_threads(1):
            value = score_architecture(tree, stats, scalars)
        return value, time.perf_counter() - start, ""
    except InvalidProxy as exc:
        return None, time.perf_counter() - start, f"invalid: {exc}"[:300]
    except Exception as exc:  # noqa: BLE001 - a failure is recorded and the others go on
        return None, time.perf_counter() - start, f"{type(exc).__name__}: {exc}"[:300]


def _fresh_genome_values(genome: str, archs: Sequence, spec: InputSpec, seed: int, num_classes: int, workers: int,
                         head_classes: int) -> list[RawResult]:
    jobs = [(genome, arch_to_config(a), a.space, spec.to_json(), seed, num_classes, head_classes) for a in archs]
    outcomes = as_executor(workers).run(_fresh_genome_value, jobs)
    return [RawResult(value, seconds, error) for value, seconds, error in outcomes]


# ---------------------------------------------------------------------- rank formulas


@dataclass(frozen=True)
class RankFormulaScorer(Scorer):
    """A rank formula (:mod:`autoprox.genome.rank_formula`) on networks: each proxy column it reads is
    computed per architecture (``params``, ``flops`` and the zoo's proxies), then the formula
    transforms the columns within the ranked set, so it is set-level.

    ``missing``: a column autoprox cannot compute on networks (a table's own proxy) is refused
    (``"refuse"``) or entered as no information (``"neutral"``). A column that fails on an
    architecture (EPE-NAS with no two images of one label, say) is an empty cell there, as in a
    proxy table; an architecture fails only when every column does.
    """

    formula: RankFormula
    missing: str = "refuse"
    kind = "rank formula"
    set_level = True

    @property
    def source(self) -> str:
        return "rank formula over proxy columns"

    @property
    def nature(self) -> str:
        return "a formula over ranks of proxy columns, not an expression over the eight per-block statistics"

    @property
    def on_networks(self) -> RankFormula:
        """The formula networks score: each ``first(...)`` resolved to its first alternative whose
        columns autoprox computes."""
        return self.formula.resolved((*ARCHITECTURE_PROXIES, *ZOO))

    def computable(self) -> tuple[str, ...]:
        """The columns it reads that autoprox computes on networks; refuses the others unless neutral."""
        formula = self.on_networks
        known = [c for c in formula.columns if c in ARCHITECTURE_PROXIES or c in ZOO]
        unknown = [c for c in formula.required if c not in known]
        if unknown and self.missing == "refuse":
            raise KeyError(unknown[0])
        if not known:
            raise KeyError(formula.columns[0])
        return tuple(known)

    def not_computed(self) -> tuple[str, ...]:
        """The columns it reads that autoprox does not compute on networks (a table's own proxy): with
        ``missing="neutral"`` each is read as no information there."""
        return tuple(c for c in self.on_networks.columns if c not in ARCHITECTURE_PROXIES and c not in ZOO)

    def networks_note(self, name: str) -> str | None:
        """One line saying which columns of the proxy ``name`` networks score as no information; None when
        autoprox computes every column it reads."""
        absent = self.not_computed()
        known = [c for c in self.on_networks.columns if c not in absent]
        if not absent or not known or self.missing != "neutral":  # none missing, or refused when scored
            return None
        return (f"{name} reads {', '.join(absent)}, which autoprox does not compute on networks: read as no "
                f"information (0 after centring; an lrsum leaves it out); scored from {', '.join(known)}")

    def describe(self, spec: InputSpec, teacher=None) -> tuple[str, str]:
        return f"proxy columns {', '.join(self.computable())}", "yes: each zoo column's passes"

    def raw_values(self, archs, spec, seed, num_classes, cache, *, workers=1, progress=None, teacher=None,
                   keep_statistics=True, head_classes=HEAD_CLASSES) -> list[RawResult]:
        columns = {}
        for name in self.computable():
            scorer = ARCHITECTURE_PROXIES.get(name) or ZooScorer(ZOO[name])
            columns[name] = scorer.raw_values(archs, spec, seed, num_classes, cache, workers=workers,
                                              progress=progress, teacher=teacher, head_classes=head_classes)
        results = []
        for index in range(len(archs)):
            parts = {name: values[index] for name, values in columns.items()}
            seconds = sum(r.seconds for r in parts.values() if r.seconds == r.seconds)
            if not any(r.ok for r in parts.values()):
                results.append(RawResult(None, seconds, "; ".join(f"{n}: {r.error}" for n, r in parts.items())))
                continue
            # a column that fails on an architecture is an empty cell there, as in a proxy table: no information
            results.append(RawResult({name: float(r.raw) if r.ok else float("nan") for name, r in parts.items()},
                                     seconds))
        return results

    def set_scores(self, raws: Sequence) -> np.ndarray:
        names = list(raws[0]) if len(raws) else []
        columns = {name: np.asarray([r[name] for r in raws], dtype=np.float64) for name in names}
        return self.on_networks.score(columns, missing="neutral")


# ------------------------------------------------------------------------ over seeds


def mean_over_seeds(per_key: Mapping[tuple[int, int], np.ndarray]) -> dict[int, np.ndarray]:
    """Scores per class count from one array per (seed, class count): the mean over seeds,
    taken in the mapping's order (a plan's keys: seed by seed)."""
    by_classes: dict[int, list[np.ndarray]] = {}
    for (_, classes), values in per_key.items():
        by_classes.setdefault(classes, []).append(values)
    return {classes: np.mean(runs, axis=0) for classes, runs in by_classes.items()}


def scorer_for(name: str, genome=None, zoo: str | None = None, formula: RankFormula | None = None,
               missing: str = "refuse") -> Scorer:
    """The scorer of a proxy: its rank formula's, its genome's, its zoo entry's, or the architecture proxy ``name``.

    KeyError when ``zoo`` or ``name`` is not registered, or a formula reads a column no network gives.
    """
    if formula is not None:
        scorer = RankFormulaScorer(formula, missing)
        scorer.computable()
        return scorer
    if genome is not None:
        return GenomeScorer(genome if not isinstance(genome, str) else parse_genome(genome))
    if zoo is not None:
        return ZooScorer(ZOO[zoo])
    return ARCHITECTURE_PROXIES[name]


__all__ = ["ARCHITECTURE_PROXIES", "HEAD_CLASSES", "ArchitectureProxy", "GenomeScorer", "RankFormulaScorer", "RawResult", "Scorer",
           "ZooScorer", "mean_over_seeds", "register_architecture_proxy", "scorer_for"]
