"""Fitness on a Dask cluster: the architectures' statistics sharded across the workers.

Each worker holds the statistics of its share of the search architectures in memory (a
Dask actor, loaded once from the statistics cache: a path the workers share, or each
worker's own cache, where missing entries are computed), and stays so for the whole
search. An evaluation sends the genome string to every shard and gathers one score per
architecture and statistics set: a few kilobytes, whatever the size of the statistics.
Scores are computed exactly as :class:`autoprox.search.evaluators.ExactEvaluator` does on
one machine (single-threaded, the same reductions in the same order), so a sharded
search gives the same proxies and figures to the last digit.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from autoprox.core.errors import ConfigError
from autoprox.data.cache import StatisticsCache, StatsPlan, load_statistics
from autoprox.genome.tree import (
    DEFAULT_KERNELS,
    InvalidProxy,
    kernel_map,
    parse_genome,
    score_architecture,
)
from autoprox.networks.statistics import InputSpec, torch_threads
from autoprox.proxies.zoo_scores import zoo_terminal_set
from autoprox.spaces.architectures import arch_to_config, parse_arch


class StatisticsShard:
    """The statistics of some architectures, held in a worker's memory; scores genomes on them.

    Made on the worker (as a Dask actor) from plain arguments: the cache's root and
    precision, the statistics plan's parts, the architectures as (space, config), their
    terminal values and the kernel set's name (:data:`autoprox.primitives.KERNEL_SETS`).
    """

    def __init__(self, cache_root: str | None, precision: str, spec: dict, seeds: Sequence[int],
                 target_classes: dict, archs: Sequence[tuple[str, dict]],
                 terminals: Sequence[dict] | None, extras: Sequence[str] = (),
                 kernels: str = DEFAULT_KERNELS) -> None:
        zoo_terminal_set()  # a worker imports this module alone, and the genomes it parses may read zoo terminals
        plan = StatsPlan(InputSpec(**spec), tuple(seeds), dict(target_classes), tuple(extras))
        parsed = [parse_arch(config, space) for space, config in archs]
        with torch_threads(1):
            self.stats = load_statistics(StatisticsCache(cache_root, precision), plan, parsed)
        self.terminals = list(terminals) if terminals is not None else None
        self.size = len(parsed)
        self.kernels = kernel_map(kernels)

    def scores(self, genome: str) -> dict:
        """``{(seed, classes) as "seed:classes": [score per architecture]}``, or ``{"invalid": reason}``."""
        tree = parse_genome(genome)
        terminals = self.terminals or [None] * self.size
        result = {}
        try:
            with torch_threads(1):
                for (seed, classes), archs in self.stats.items():
                    result[f"{seed}:{classes}"] = [score_architecture(tree, s, t, kernels=self.kernels)
                                                       for s, t in zip(archs, terminals)]
        except InvalidProxy as exc:
            return {"invalid": str(exc)}
        return result


def shard_ranges(size: int, count: int) -> list[range]:
    """``count`` contiguous, near-equal ranges covering ``range(size)`` (none empty)."""
    count = max(1, min(count, size))
    bounds = [round(i * size / count) for i in range(count + 1)]
    return [range(bounds[i], bounds[i + 1]) for i in range(count)]


class ShardedScorer:
    """Scores genomes on statistics sharded across a Dask cluster's workers.

    ``architecture_scores(tree)`` returns what
    :meth:`autoprox.search.evaluators.ExactEvaluator.architecture_scores` returns on one
    machine: per class count, the mean over seeds of each architecture's score.
    """

    def __init__(self, client, cache: StatisticsCache, plan: StatsPlan, archs: Sequence,
                 terminals: Sequence[dict] | None = None, shards: int | None = None,
                 kernels: str = DEFAULT_KERNELS) -> None:
        workers = list(client.scheduler_info()["workers"])
        if not workers:
            raise ConfigError("the Dask cluster has no worker")
        self.size = len(archs)
        self.ranges = shard_ranges(self.size, shards or len(workers))
        spec = plan.spec.to_json()
        futures = []
        for number, part in enumerate(self.ranges):
            arch_args = [(archs[i].space, arch_to_config(archs[i])) for i in part]
            part_terminals = [terminals[i] for i in part] if terminals is not None else None
            futures.append(client.submit(
                StatisticsShard, str(cache.root), cache.precision, spec, list(plan.seeds), dict(plan.target_classes),
                arch_args, part_terminals, list(plan.extras), kernels, actor=True, workers=[workers[number % len(workers)]],
                allow_other_workers=True, pure=False))
        self.actors = client.gather(futures)

    def architecture_scores(self, tree) -> dict[int, np.ndarray]:
        """Per class count, the mean over seeds of each architecture's score; raises InvalidProxy."""
        from autoprox.genome.tree import genome_to_string

        genome = genome_to_string(tree)
        replies = [future.result() for future in [actor.scores(genome) for actor in self.actors]]
        for reply in replies:
            if "invalid" in reply:
                raise InvalidProxy(reply["invalid"])
        by_classes: dict[int, list[np.ndarray]] = {}
        for key in replies[0]:
            classes = int(key.split(":")[1])
            values = np.array([v for reply in replies for v in reply[key]], dtype=np.float64)
            by_classes.setdefault(classes, []).append(values)
        return {classes: np.mean(runs, axis=0) for classes, runs in by_classes.items()}


__all__ = ["ShardedScorer", "StatisticsShard", "shard_ranges"]
