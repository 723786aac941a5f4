"""The cuts of the in-space evaluation protocol (:mod:`autoprox.apps.protocols.outer_folds`): its outer folds, and one
fold's search scored on the fold, the proxy it chose beside each descriptor baseline chosen on the same
search part."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np

from autoprox.apps.protocols.jobs import search_job
from autoprox.apps.protocols.summary import REFERENCE, fold_jcm
from autoprox.apps.selection import SELECTIONS
from autoprox.core.atomic import json_safe
from autoprox.core.correlation import correlate
from autoprox.core.errors import BenchmarkError, ConfigError, RunDirError
from autoprox.data.benchmark import Benchmark, load_benchmark
from autoprox.genome.tree import InvalidProxy
from autoprox.proxies.baselines import baseline_scores, choose_baselines
from autoprox.proxies.ensemble import EnsembleProxy
from autoprox.proxies.scoring import ScoringProxy
from autoprox.search.context import RunContext
from autoprox.search.rundir import RunDirectory
from autoprox.search.settings import SearchSettings
from autoprox.spaces.descriptors import descriptor_columns


# ------------------------------------------------------------------ the outer folds

@dataclass(frozen=True)
class OuterFold:
    """One outer fold: its repeat, its number, and its search and test parts (benchmark indices)."""

    repeat: int
    fold: int
    search: tuple[int, ...]
    test: tuple[int, ...]

    @property
    def name(self) -> str:
        """Its run directory, relative to the protocol's: ``repeat-R/fold-K``."""
        return f"repeat-{self.repeat}/fold-{self.fold}"

    def to_json(self) -> dict:
        return {"repeat": self.repeat, "fold": self.fold, "run": self.name,
                "search": list(self.search), "test": list(self.test)}


#: Fewest test architectures of an outer fold: fewer cannot be ranked (every figure NaN).
MIN_FOLD_TEST = 3


def check_fold_count(folds: int, size: int) -> None:
    """Refuse a fold count the benchmark cannot give (each test part needs 3 architectures to rank)."""
    if folds < 2:
        raise ConfigError(f"--folds must be at least 2, got {folds}")
    if folds > size:
        raise ConfigError(f"--folds {folds} is more than the benchmark's {size} architectures")
    if size // folds < MIN_FOLD_TEST:
        raise ConfigError(f"--folds {folds} leaves {size // folds} test architecture(s) in a fold of the benchmark's "
                          f"{size}, and a fold needs at least {MIN_FOLD_TEST} to rank them: give at most "
                          f"--folds {max(size // MIN_FOLD_TEST, 2)}")


def outer_folds(size: int, folds: int, repeats: int = 1, seed: int = 0) -> list[OuterFold]:
    """``repeats`` x ``folds`` outer folds of ``range(size)``.

    Repeat ``r`` shuffles the indices with ``random.Random(seed + r)`` and deals them out
    round-robin, so the test parts of one repeat are disjoint, cover every architecture
    and differ in size by at most one.
    """
    check_fold_count(folds, size)
    if repeats < 1:
        raise ConfigError(f"--repeats must be at least 1, got {repeats}")
    made = []
    for repeat in range(repeats):
        order = list(range(size))
        random.Random(seed + repeat).shuffle(order)
        for fold in range(folds):
            test = sorted(order[fold::folds])
            chosen = set(test)
            made.append(OuterFold(repeat, fold, tuple(i for i in range(size) if i not in chosen), tuple(test)))
    return made


def check_fold_labels(bench: Benchmark, targets: Sequence[str], made: Sequence[OuterFold]) -> None:
    """BenchmarkError (one line) unless every target can rank the architectures of each fold's search part (what
    its search learns from) and of its test part (what it is judged on): measured values, enough of them, not all
    equal (:meth:`~autoprox.data.benchmark.Benchmark.measured_problem`). Checked before anything is written, so
    that a protocol does not stop at the first fold whose search would be refused."""
    for fold in made:
        for target in targets:
            problem = (bench.measured_problem(target, fold.search, f"the search part of {fold.name}")
                       or bench.measured_problem(target, fold.test, f"the test part of {fold.name}"))
            if problem:
                raise BenchmarkError(f"{problem}; give fewer --folds or other --targets")


def fold_settings(settings: SearchSettings, fold: OuterFold, workers: int | None = None) -> SearchSettings:
    """The search of one outer fold: ``settings`` with the fold's search part as ``split_indices``."""
    return replace(settings, split_indices=fold.search,
                   workers=settings.workers if workers is None else workers)


# ------------------------------------------------------------------ one fold

def test_scores(proxy: ScoringProxy, context: RunContext, part: str = "test") -> dict[str, np.ndarray]:
    """Scores per target of ``proxy`` (a genome, an ensemble: :class:`ScoringProxy`) on ``part`` of the fold's
    run, with the run's statistics (those an ensemble chosen on it recorded). Raises InvalidProxy."""
    return proxy.target_scores(context.archs(part), context.cache, context.plan, list(context.targets))


def fold_figures(proxy: ScoringProxy, context: RunContext, choices: Mapping[str, Mapping[str, dict]],
                 columns: Mapping[str, np.ndarray]) -> dict:
    """Test-part scores, Kendall per target and JCM of the proxy (or ensemble) and of each baseline's choice.

    ``context`` is the fold's run context (its test part is the outer test part).
    """
    targets, test = list(context.targets), context.indices("test")
    accuracies = context.accuracies("test")
    scores: dict[str, dict[str, list]] = {}
    result: dict = {}
    try:
        scores[REFERENCE] = test_scores(proxy, context)
    except InvalidProxy as exc:
        result["invalid"] = str(exc)
        scores[REFERENCE] = {t: np.full(len(test), np.nan) for t in targets}
    for name, per_target in choices.items():
        scores[name] = {t: baseline_scores(name, per_target[t], columns, test) for t in targets}
    kendall = {m: {t: correlate(s[t], accuracies[t])["kendall"] for t in targets} for m, s in scores.items()}
    weights = context.settings.weights
    result |= {
        "kendall": kendall,
        "jcm": {m: fold_jcm(k, weights) for m, k in kendall.items()},
        "choices": {name: dict(per_target) for name, per_target in choices.items()},
        "scores": {m: {t: np.asarray(v, dtype=np.float64).tolist() for t, v in s.items()} for m, s in scores.items()},
    }
    return result


def fold_result(run_dir: Path, fold: OuterFold, bench_path: str, baselines: Sequence[str],
                choose: Callable[[Path], ScoringProxy]) -> dict:
    """The figures of the finished fold search in ``run_dir``: the proxy ``choose(run_dir)`` returns
    and each baseline chosen on the fold's search part, scored on its test part (JSON-safe)."""
    bench = load_benchmark(bench_path)
    best = RunDirectory(run_dir).best(missing_ok=False)
    context = RunContext.open(run_dir, bench=bench_path)
    if list(context.split.test) != list(fold.test):
        raise RunDirError(f"{run_dir}: its test part is not the outer fold's")
    columns = descriptor_columns(bench.archs)
    choices = choose_baselines(columns, bench.accuracies, fold.search, context.targets, baselines)
    proxy = choose(run_dir)
    result = {"proxy": proxy.name, "genome": best["genome"], "search_jcm": best["search"].get("jcm"),
              **({"ensemble": proxy.to_json()} if isinstance(proxy, EnsembleProxy) else {}),
              **fold_figures(proxy, context, choices, columns)}
    return json_safe(result)


def outer_fold(fold_json: Mapping) -> OuterFold:
    return OuterFold(fold_json["repeat"], fold_json["fold"], tuple(fold_json["search"]), tuple(fold_json["test"]))


def evaluate_fold(settings_json: Mapping, bench_path: str, fold_json: Mapping, out: str, selection: str,
                  baselines: Sequence[str], stop_after: int | None = None, quiet: bool = True,
                  searches: str | None = None) -> dict:
    """Run (or resume, or take as finished) one outer fold's search, then score it on its test part.

    ``searches``: a protocol directory whose finished fold search is read instead (nothing is
    run or written there). Plain arguments, so that it runs in a joblib process as well as
    inline. Returns ``{"finished": bool, "result": figures or None, "seconds": ...}``.
    """
    start = time.perf_counter()
    fold = outer_fold(fold_json)
    run_dir = Path(searches if searches is not None else out) / fold.name
    if not search_job(settings_json, bench_path, str(run_dir), stop_after, quiet, searches is not None)["finished"]:
        return {"finished": False, "result": None, "seconds": time.perf_counter() - start}
    result = fold_result(run_dir, fold, bench_path, baselines, SELECTIONS[selection])
    return {"finished": True, "result": result, "seconds": time.perf_counter() - start}


__all__ = ["MIN_FOLD_TEST", "OuterFold", "check_fold_count", "evaluate_fold", "fold_figures", "fold_result",
           "fold_settings", "outer_fold", "outer_folds", "test_scores"]
