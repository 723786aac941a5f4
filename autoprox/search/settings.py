"""Search settings: everything a search depends on, as recorded in ``config.json``."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Mapping, Sequence

from autoprox.data.cache import StatsPlan
from autoprox.genome.tree import GenomeSpace
from autoprox.search.evolution import EvolutionConfig


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
    #: An explicit search part (benchmark indices; the rest is the test part), used instead of
    #: ``split_seed`` and ``search_fraction`` when set (the outer folds of ``autoprox evaluate``).
    #: ``split_seed`` still seeds the inner folds of ``cv_folds``.
    split_indices: tuple[int, ...] | None = None

    def to_json(self) -> dict:
        data = asdict(self)
        # Absent rather than null when unset, so the configuration of an ordinary search
        # reads exactly as before the field existed.
        if self.split_indices is None:
            del data["split_indices"]
        else:
            data["split_indices"] = list(self.split_indices)
        if self.evolution.patience is None:  # likewise: the paper's setting records no patience
            del data["evolution"]["patience"]
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
        indices = values.get("split_indices")
        values["split_indices"] = None if indices is None else tuple(int(i) for i in indices)
        return cls(**values)

    @property
    def genome_space(self) -> GenomeSpace:
        return GenomeSpace.from_json(self.genome)


def stats_plan(settings: SearchSettings, targets: Sequence[str]) -> StatsPlan:
    """The statistics plan of ``settings`` for ``targets``."""
    return StatsPlan.from_options(settings.input, settings.batch_size, settings.stat_seeds, targets,
                                  settings.per_target_stats)
