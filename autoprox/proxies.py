"""Proxies by name: built-in architecture-level ones, genome strings and proxy JSON files,
and scoring a benchmark's architectures with any of them."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np

from autoprox.cache import StatisticsCache, StatsRequest, build_cache
from autoprox.fitness import StatsPlan
from autoprox.genome import GenomeError, InvalidProxy, genome_to_string, parse_genome, score_architecture
from autoprox.spaces import count_macs, count_params

#: Built-in proxies that need only the architecture (100-class head, as the benchmark's README).
ARCHITECTURE_PROXIES: dict[str, Callable] = {
    "params": lambda arch: count_params(arch, num_classes=100),
    "flops": lambda arch: count_macs(arch, num_classes=100),
}


class ProxyError(ValueError):
    """A proxy name, genome or file that cannot be used."""


@dataclass(frozen=True)
class Proxy:
    """A proxy ready to score architectures."""

    name: str
    genome: object = None  # a deap PrimitiveTree for statistics-based proxies
    provenance: Mapping = field(default_factory=dict)

    @property
    def needs_statistics(self) -> bool:
        return self.genome is not None


def resolve_proxy(text: str) -> Proxy:
    """``params``, ``flops``, a path to a proxy JSON (such as a run's ``best.json``), or a genome string."""
    if text in ARCHITECTURE_PROXIES:
        return Proxy(text)
    path = Path(text)
    if text.endswith(".json") or path.is_file():
        if not path.is_file():
            raise ProxyError(f"proxy file not found: {path}")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError, OSError) as exc:
            raise ProxyError(f"{path}: not a JSON proxy file ({exc})") from None
        if not isinstance(data, dict) or not isinstance(data.get("genome"), str):
            raise ProxyError(f"{path}: no 'genome' string in this proxy file")
        try:
            tree = parse_genome(data["genome"])
        except GenomeError as exc:
            raise ProxyError(f"{path}: {exc}") from None
        return Proxy(genome_to_string(tree), tree, {"file": str(path), **{k: data[k] for k in ("run", "stats", "split") if k in data}})
    try:
        tree = parse_genome(text)
    except GenomeError as exc:
        raise ProxyError(
            f"unknown proxy {text!r}: not a built-in ({', '.join(ARCHITECTURE_PROXIES)}), "
            f"not a file, and not a genome ({exc})"
        ) from None
    return Proxy(genome_to_string(tree), tree)


def score_archs(proxy: Proxy, archs: Sequence, cache: StatisticsCache, plan: StatsPlan,
                workers: int = 1, progress: Callable[[int, int], None] | None = None) -> dict[int, np.ndarray]:
    """Scores of ``archs`` per class count (mean over the plan's seeds).

    Statistics come from the cache (computed in parallel where missing) and are read
    one architecture at a time, so memory stays flat. Raises InvalidProxy.
    """
    if not proxy.needs_statistics:
        values = np.array([ARCHITECTURE_PROXIES[proxy.name](a) for a in archs], dtype=np.float64)
        return {classes: values.copy() for classes in plan.class_counts}
    build_cache(cache, plan.requests(archs), workers=workers, progress=progress)
    from autoprox.statistics import torch_threads

    # per class count, one row per seed; averaged as FitnessEvaluator does, to the last bit
    runs = {classes: np.zeros((len(plan.seeds), len(archs))) for classes in plan.class_counts}
    with torch_threads(1):
        for index, arch in enumerate(archs):
            for row, seed in enumerate(plan.seeds):
                for classes in plan.class_counts:
                    stats = cache.get(StatsRequest(arch, plan.spec, seed, classes))
                    runs[classes][row, index] = score_architecture(proxy.genome, stats)
    return {classes: np.mean(values, axis=0) for classes, values in runs.items()}


__all__ = ["ARCHITECTURE_PROXIES", "InvalidProxy", "Proxy", "ProxyError", "resolve_proxy", "score_archs"]
