"""The N-space protocol: each labelled space left out in turn, rank formulas searched on the others.

For every space S of the N given (:class:`~autoprox.data.proxy_tables.TableSpace`):

1. the training spaces are the other N - 1; on them alone, with their labels, and reading only the
   proxy columns S has (which columns a space offers is not a label),
   * a rank-formula search per seed (:func:`~autoprox.apps.rank_search.search_rank_formula`),
     its formula chosen among its hall of fame by the best worst case over the training
     spaces on every row (with the ``margin`` objective, the best worst lead over each training
     space's better size count; the **selection** uses the training spaces only);
   * the single standard proxy with the best objective (``best-single``);
   * the AZ-NAS log-rank sum over the proxies chosen by forward selection (``greedy-lrsum``);
2. on S, with none of its labels used to choose anything, every one of those and the
   label-free baselines: ``params``, ``flops``, every proxy column S has, and the log-rank
   sum over every standard proxy S has (``lrsum-all``, nothing fitted);
3. S's labels then give each its figure (the mean Kendall over S's (table, target) pairs,
   every row), and the paired bootstrap of the searched formulas (their scores' figure,
   averaged over seeds) against ``params``, ``flops`` and ``lrsum-all``: the same resample of
   rows for both sides, 95% interval of the difference; and how many seeds are ahead.

The protocol writes ``protocol.json`` (atomically) after each left-out space, and a run
given the same ``--out`` and settings goes on from the spaces it has: each left-out space is a cut of
the one protocol runner (:mod:`autoprox.apps.protocols.runner`).
"""

from __future__ import annotations

import json
import math
import random
import time
from dataclasses import asdict
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from autoprox.apps.protocols.cross_space import DEFAULT_SEEDS
from autoprox.apps.protocols.runner import CutProtocol, check_recorded, previous_record, run_cuts
from autoprox.apps.protocols.summary import BOOTSTRAP_SAMPLES
from autoprox.apps.rank_search import (
    RankSearchSettings,
    best_single,
    figures_on,
    greedy_lrsum,
    prepare_spaces,
    search_rank_formula,
    space_leads,
)
from autoprox.core.atomic import make_directory
from autoprox.core.correlation import kendall_or_zero
from autoprox.core.errors import ConfigError
from autoprox.data.proxy_tables import STANDARD_PROXIES, TableSpace
from autoprox.genome.rank_formula import parse_formula
from autoprox.search.objectives import space_objective
from autoprox.search.rundir import PROTOCOL

__all__ = ["PROTOCOL_FORMAT", "SPACE_BASELINES", "label_free_candidates", "lrsum_all",
           "paired_interval", "run_space_protocol", "select_formula"]

PROTOCOL_FORMAT = "autoprox-space-protocol/1"
#: The label-free baselines every searched formula is paired with.
SPACE_BASELINES = ("params", "flops", "lrsum-all")


def lrsum_all(space: TableSpace) -> str:
    """The AZ-NAS log-rank sum over every standard proxy ``space`` has (nothing fitted)."""
    present = [name for name in STANDARD_PROXIES if all(name in t.proxies for t in space.tables)]
    return f"lrsum({', '.join(present)})"


def select_formula(hall_of_fame: Sequence[tuple[float, str, dict]], spaces: Sequence[TableSpace],
                   missing: str = "neutral", objective: str = "worst") -> tuple[str, dict[str, float], float]:
    """The hall-of-fame formula with the best worst case over ``spaces`` (the training spaces), every
    row; ties go to the better search fitness. Returns it, its figure on each space and that worst case
    (what the selection compared, so that a caller choosing among several searches compares the same). ``missing`` as
    the search's (:data:`~autoprox.apps.rank_search.MISSING_POLICIES`): with ``skip``, the worst case over
    the spaces that have the formula's columns. With an objective against size (``margin``), the worst
    case of the lead over each space's better size count."""
    prepared = prepare_spaces(spaces, None, random.Random(0))  # every row; transformed columns kept across formulas
    against_size = space_objective(objective).against_size
    best = None
    for rank, (_, text, _) in enumerate(hall_of_fame):
        per_space = figures_on(parse_formula(text), prepared, missing)
        if per_space is None:
            continue
        key = (float(np.min(space_leads(per_space, prepared, against_size))), -rank)
        if best is None or key > best[0]:
            best = (key, text, per_space)
    assert best is not None
    (worst, _), text, per_space = best
    return text, per_space, worst


def _scores(formula: str, space: TableSpace) -> list[np.ndarray]:
    parsed = parse_formula(formula)
    return [parsed.score(t.proxies, missing="neutral") for t in space.tables]


def _pair_kendalls(scores: list[np.ndarray], space: TableSpace, rows: list[np.ndarray] | None = None) -> float:
    values = []
    for index, (table, targets) in enumerate(zip(space.tables, space.targets)):
        pick = rows[index] if rows is not None else slice(None)
        values.extend(kendall_or_zero(scores[index][pick], table.accuracies[t][pick]) for t in targets)
    return float(np.mean(values))


def paired_interval(method_scores: Sequence[list[np.ndarray]], baseline_scores: list[np.ndarray], space: TableSpace,
                    samples: int = BOOTSTRAP_SAMPLES, seed: int = 0) -> dict:
    """The figure of ``method_scores`` (several seeds' scores, their figures averaged) less the
    baseline's, on bootstrap resamples of each table's rows (the same rows for both sides).

    Returns the observed difference, the 2.5% and 97.5% quantiles, and the share of resamples
    where the method is ahead.
    """
    rng = np.random.default_rng(seed)
    observed = float(np.mean([_pair_kendalls(s, space) for s in method_scores]) - _pair_kendalls(baseline_scores, space))
    differences = []
    for _ in range(samples):
        rows = [rng.integers(0, len(t), len(t)) for t in space.tables]
        method = np.mean([_pair_kendalls(s, space, rows) for s in method_scores])
        differences.append(method - _pair_kendalls(baseline_scores, space, rows))
    low, high = np.quantile(differences, [0.025, 0.975])
    return {"difference": observed, "low": float(low), "high": float(high),
            "ahead": float(np.mean(np.asarray(differences) > 0)), "samples": samples}


def label_free_candidates(space: TableSpace) -> dict[str, str]:
    """The baselines scored on a left-out space without its labels: name -> rank formula (``r(X)`` ranks
    exactly as ``X``). ``flops`` only where the space has it."""
    columns = [name for name in space.tables[0].proxies if all(name in t.proxies for t in space.tables)]
    found = {name: f"r({name})" for name in columns}
    found["lrsum-all"] = lrsum_all(space)
    return found


def _direction(left_out: TableSpace, training: Sequence[TableSpace], seeds: Sequence[int],
               settings: RankSearchSettings, samples: int, say: Callable[[str], None]) -> dict:
    start = time.perf_counter()
    # Which columns the left-out space has is not a label: formulas read only those, so none of them is
    # constant there for want of its inputs.
    columns = [name for name in STANDARD_PROXIES if all(name in t.proxies for t in left_out.tables)]
    left = prepare_spaces([left_out], None, random.Random(0))[0]  # every row, transformed columns computed once
    searched = []
    for seed in seeds:
        outcome = search_rank_formula(training, seed, settings, seeds=[lrsum_all(left_out)], columns=columns)
        formula, training_figures, _ = select_formula(outcome.hall_of_fame, training, settings.missing,
                                                      settings.objective)
        figure = left.figure(parse_formula(formula))
        searched.append({"seed": seed, "formula": formula, "training": training_figures, "figure": figure,
                         "evaluations": outcome.evaluations})
        say(f"  left out {left_out.name}, seed {seed}: {formula}  ->  {figure:+.3f}")
    single, _ = best_single(training, settings.objective, columns)
    greedy, _ = greedy_lrsum(training, settings.objective, columns)
    chosen = {"best-single": f"r({single})", "greedy-lrsum": greedy}
    baselines = label_free_candidates(left_out)
    figures = {name: left.figure(parse_formula(text)) for name, text in {**baselines, **chosen}.items()}
    method_scores = [_scores(s["formula"], left_out) for s in searched]
    paired = {}
    for name in SPACE_BASELINES:
        if name in baselines:
            baseline = _scores(baselines[name], left_out)
            paired[name] = paired_interval(method_scores, baseline, left_out, samples)
            paired[name]["seeds_ahead"] = sum(s["figure"] > figures[name] for s in searched)
    return {"left_out": left_out.name, "training": [s.name for s in training], "searched": searched,
            "searched_mean": float(np.mean([s["figure"] for s in searched])),
            "searched_sd": float(np.std([s["figure"] for s in searched], ddof=1)) if len(searched) > 1 else 0.0,
            "chosen_on_training": chosen, "baselines": baselines, "figures": figures, "paired": paired,
            "seconds": time.perf_counter() - start}


def run_space_protocol(spaces: Sequence[TableSpace], out: str | Path,
                       seeds: Sequence[int] = tuple(range(DEFAULT_SEEDS)),
                       settings: RankSearchSettings = RankSearchSettings(), samples: int = BOOTSTRAP_SAMPLES,
                       say: Callable[[str], None] = print) -> dict:
    """Leave each of ``spaces`` out in turn (see the module's docstring); returns what ``protocol.json`` holds.

    Raises
    ------
    ConfigError
        Fewer than 3 spaces (two leave one training space: nothing to generalise over), or
        fewer than 1 seed.
    RunDirError
        ``out`` holds a protocol of other spaces or settings.
    """
    if len(spaces) < 3:
        raise ConfigError(f"the N-space protocol needs at least 3 labelled spaces, got {len(spaces)}")
    if len({s.name for s in spaces}) != len(spaces):
        raise ConfigError("a space is given twice")
    if not seeds:
        raise ConfigError("give at least one seed")
    settings.check()
    folder = make_directory(out)
    recorded = asdict(settings)
    if settings.missing == "neutral":  # absent when default, so protocols made before the setting still resume
        del recorded["missing"]
    spec = {"spaces": [s.name for s in spaces], "seeds": list(seeds), "settings": recorded,
            "samples": samples,
            "tables": {s.name: [{"name": t.name, "sha256": t.sha256, "rows": len(t), "targets": list(names)}
                                for t, names in zip(s.tables, s.targets)] for s in spaces}}
    record = previous_record(folder, resume=None)
    if record is not None:
        wanted, old = json_round(spec), record.get("spec") or {}
        differing = sorted(key for key in set(wanted) | set(old) if old.get(key) != wanted.get(key))
        check_recorded(folder / PROTOCOL, {"spaces, seeds or settings": differing or ["format"]}
                       if record.get("format") != PROTOCOL_FORMAT or differing else {}, "choose another --out")
    else:
        record = {"format": PROTOCOL_FORMAT, "spec": spec, "directions": {}}
    return run_cuts(folder, _LeftOutSpaces(spaces, seeds, settings, samples, say), record, say)


class _LeftOutSpaces(CutProtocol):
    """The N-space protocol as cuts: a cut is a left-out space, run inline; its direction is its figures."""

    def __init__(self, spaces: Sequence[TableSpace], seeds: Sequence[int], settings: RankSearchSettings,
                 samples: int, say: Callable[[str], None]) -> None:
        self.spaces, self.seeds, self.settings, self.samples, self.say = spaces, seeds, settings, samples, say

    def cuts(self, record: dict) -> list[str]:
        return [s.name for s in self.spaces]

    def done(self, record: dict, cut: str) -> bool:
        return cut in record["directions"]

    def run(self, record: dict, pending: list[str]):
        for index, left_out in enumerate(self.spaces):
            if left_out.name not in pending:
                continue
            training = [s for s in self.spaces if s is not left_out]
            self.say(f"[{index + 1}/{len(self.spaces)}] leaving out {left_out.name} ({len(left_out):,} rows); "
                     f"searching on {', '.join(s.name for s in training)}")
            yield left_out.name, _direction(left_out, training, self.seeds, self.settings, self.samples, self.say)

    def keep(self, record: dict, cut: str, outcome: dict) -> bool:
        record["directions"][cut] = outcome
        return True

    def summarise(self, record: dict) -> None:
        if all(self.done(record, cut) for cut in self.cuts(record)):  # the summary of every space, once there
            record["summary"] = summarise(record)

    def close(self, record: dict, finished: bool) -> None:
        """Nothing: this record says it is finished by its summary."""


def json_round(value):
    """``value`` as JSON would give it back (tuples as lists)."""
    return json.loads(json.dumps(value))


def summarise(record: dict) -> dict:
    """Per candidate (the searched configuration, the choices made on training spaces, each label-free
    baseline), its figure on each left-out space and the mean over those that have it."""
    directions = record["directions"]
    names = {"searched": None}
    for direction in directions.values():
        for name in direction["figures"]:
            names.setdefault(name, None)
    table = {}
    for name in names:
        per_space = {}
        for space, direction in directions.items():
            value = direction["searched_mean"] if name == "searched" else direction["figures"].get(name)
            if value is not None and not (isinstance(value, float) and math.isnan(value)):
                per_space[space] = value
        table[name] = {"per_space": per_space, "spaces": len(per_space),
                       "mean": float(np.mean(list(per_space.values()))) if per_space else math.nan}
    return table

