"""Scores of a run's genomes on a part of its split, for the HTML report.

A report scores several genomes (the hall of fame's, the chosen proxy) on the same
architectures. Each architecture's statistics are read from the run's cache once and
every genome is evaluated on them, with the same code, the same statistics plan and one
torch thread as the search and ``best.json`` use, so the figures agree with theirs to the
last digit. Statistics missing from the cache are computed first (a progress line on
stderr), or, when computing is not allowed (a search in progress), the part is reported
as not available.
"""

from __future__ import annotations

from functools import cached_property
from typing import Callable, Mapping, Sequence

from autoprox.core.progress import Progress
from autoprox.data.cache import build_cache, load_statistics
from autoprox.genome.tree import (
    InvalidProxy,
    genome_extras,
    parse_genome,
    score_architecture,
)
from autoprox.networks.statistics import torch_threads
from autoprox.proxies.scorers import mean_over_seeds
from autoprox.search.context import RunContext


class PartScorer:
    """Scores genomes on one part (``search`` or ``test``) of a run's split.

    ``statistics`` is a dict that keeps the loaded statistics between reports (keyed by
    part and extras), so a served report reads them once.
    """

    def __init__(self, context: RunContext, part: str, statistics: dict) -> None:
        self.context = context
        self.part = part
        self.archs = context.archs(part)
        self.statistics = statistics

    def available(self, genomes: Sequence[str], compute: bool, say: Callable[[str], None]) -> bool:
        """Whether the statistics ``genomes`` read are in the cache (computed first when ``compute``)."""
        if not self.archs:
            return False
        plan = self.context.plan.with_extras(self._extras(genomes))
        requests = plan.requests(self.archs)
        missing = sum(not self.context.cache.contains(r) for r in requests)
        if not missing:
            return True
        if not compute:
            return False
        say(f"computing {missing} missing statistics entries of the {self.part} split "
            f"({len(self.archs)} architectures)")
        build_cache(self.context.cache, requests, workers=self.context.settings.workers,
                    progress=Progress(f"statistics, {self.part} split", every=15))
        return True

    @cached_property
    def _terminals(self) -> list[dict[str, float]]:
        """Each architecture's scalar terminal values, read once for every genome the report scores."""
        return self.context.scalar_terminals(self.archs)

    def scores(self, genome: str) -> dict[int, object]:
        """The genome's scores per class count (mean over the plan's seeds); InvalidProxy when it fails."""
        tree = parse_genome(genome)
        extras = genome_extras(tree)
        stats = self._loaded(extras)
        terminals = self._terminals
        per_key = {}
        with torch_threads(1):
            for key, sets in stats.items():
                values = []
                for index, blocks in enumerate(sets):
                    try:
                        values.append(score_architecture(tree, blocks, terminals[index]))
                    except InvalidProxy as exc:
                        raise InvalidProxy(f"invalid on the {self.part} split (architecture {index}: {exc})") from None
                per_key[key] = values
        import numpy as np

        return mean_over_seeds({key: np.asarray(v, dtype=np.float64) for key, v in per_key.items()})

    def figures(self, genome: str) -> Mapping:
        """Per-target correlations and the JCM of the genome on this part, or ``{"invalid": reason}``."""
        try:
            return self.context.figures(self.scores(genome), self.part)
        except InvalidProxy as exc:
            return {"invalid": str(exc)}

    def _extras(self, genomes: Sequence[str]) -> tuple[str, ...]:
        found: list[str] = []
        for genome in genomes:
            found += [e for e in genome_extras(parse_genome(genome)) if e not in found]
        return tuple(found)

    def _loaded(self, extras: tuple[str, ...]) -> dict:
        key = (str(self.context.run.path if self.context.run else ""), self.part, extras)
        if key not in self.statistics:
            plan = self.context.plan.with_extras(extras)
            self.statistics[key] = load_statistics(self.context.cache, plan, self.archs, mapped=True)
        return self.statistics[key]


__all__ = ["PartScorer"]
