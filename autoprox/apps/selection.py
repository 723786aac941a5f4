"""How the proxy of a finished search is chosen: its best search fitness, or a rule that
prefers proxies whose figures hold across parts of the search data.

Every rule reads the run directory only (``best.json``, ``hall_of_fame.json`` and, through
:class:`~autoprox.search.context.RunContext`, the run's search part and statistics): a rule
never sees the run's test part, so the evaluation protocol can score its choice there.

Rules are registered with :func:`register_selection`; the protocol (``autoprox evaluate
--selection NAME``) and the recommended proxies use them by name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np

from autoprox.core.errors import ConfigError
from autoprox.genome.tree import InvalidProxy, parse_genome
from autoprox.proxies.proxy import Proxy
from autoprox.search.context import RunContext
from autoprox.search.fitness import make_folds
from autoprox.search.halloffame import load_hall_of_fame
from autoprox.search.rundir import RunDirectory, read_json

#: Selection name -> function(run directory) -> Proxy.
SELECTIONS: dict[str, Callable[[Path], Proxy]] = {}

#: Hall-of-fame entries a rule considers (the best distinct proxies by search fitness).
CANDIDATES = 10
#: Folds of the search part over which a rule measures how a proxy's figures hold.
INNER_FOLDS = 5


def register_selection(name: str):
    """Register the decorated function (run directory -> :class:`Proxy`) as selection ``name``."""

    def decorate(function: Callable[[Path], Proxy]):
        SELECTIONS[name] = function
        return function

    return decorate


def selection(name: str) -> Callable[[Path], Proxy]:
    """The rule registered as ``name``; ConfigError naming the known ones otherwise."""
    if name not in SELECTIONS:
        raise ConfigError(f"unknown selection {name!r}; known: {', '.join(SELECTIONS)}")
    return SELECTIONS[name]


@register_selection("best")
def select_best(run_dir: Path) -> Proxy:
    """The run's ``best.json`` genome: the best search-part fitness (the paper's choice)."""
    genome = read_json(Path(run_dir) / "best.json")["genome"]
    return Proxy(genome, parse_genome(genome))


def inner_fold_jcms(proxy: Proxy, context: RunContext, folds: int = INNER_FOLDS) -> list[float]:
    """The proxy's JCM on each of ``folds`` disjoint parts of the run's search part (seeded by the
    run's split seed); NaN where it is undefined. Raises InvalidProxy."""
    scores = context.score(proxy, "search", workers=1)
    search = context.indices("search")
    jcms = []
    for fold in make_folds(len(search), min(folds, len(search) // 3 or 1) if len(search) >= 6 else 2,
                           context.settings.split_seed):
        part = {classes: values[fold] for classes, values in scores.items()}
        accuracies = {t: values[fold] for t, values in context.accuracies("search").items()}
        from autoprox.proxies.figures import figures

        jcms.append(figures(part, accuracies, list(context.targets), context.plan.target_classes,
                            context.settings.weights)["jcm"])
    return jcms


def lower_bound(jcms: list[float]) -> float:
    """Mean minus standard deviation of fold JCMs (-inf when any is undefined)."""
    values = np.asarray(jcms, dtype=np.float64)
    if values.size == 0 or np.isnan(values).any():
        return float("-inf")
    return float(values.mean() - values.std(ddof=1)) if values.size > 1 else float(values[0])


@register_selection("cv-lcb")
def select_cv_lower_bound(run_dir: Path, candidates: int = CANDIDATES, folds: int = INNER_FOLDS) -> Proxy:
    """Among the hall of fame's best ``candidates``, the proxy with the highest mean minus sd of
    its JCM over ``folds`` parts of the search part: a proxy that ranks every part well is preferred
    to one that ranks some parts very well. Ties go to the better search fitness."""
    run = RunDirectory(run_dir)
    entries = load_hall_of_fame(run).hall.entries[:candidates]
    if not entries:
        return select_best(run_dir)
    context = RunContext.open(run)
    best, best_bound = None, float("-inf")
    for entry in entries:
        proxy = Proxy(entry.genome, parse_genome(entry.genome))
        try:
            bound = lower_bound(inner_fold_jcms(proxy, context, folds))
        except InvalidProxy:
            continue
        if best is None or bound > best_bound:
            best, best_bound = proxy, bound
    return best if best is not None else select_best(run_dir)


__all__ = ["CANDIDATES", "INNER_FOLDS", "SELECTIONS", "inner_fold_jcms", "lower_bound", "register_selection",
           "select_best", "select_cv_lower_bound", "selection"]
