"""Algorithm 1 (:mod:`autoprox.search.evolution`) on a small proxy table: what it counts and reports."""

from __future__ import annotations

from collections import Counter

import numpy as np

from autoprox.search.table_search import LabelledTable, TableSearchSettings, evolve


def test_every_fresh_evaluation_is_counted_and_reported_once_in_its_iteration():
    """The first population and each step count a genome computed now (not read from the memo) and report it to
    the hook as made in its iteration: the counts, the hook's calls and the evaluator's own count agree."""
    rng = np.random.default_rng(3)
    columns = {name: rng.lognormal(size=40) for name in ("params", "flops", "nwot", "jacov")}
    labels = np.log(columns["nwot"]) + np.log(columns["params"]) * 0.5 + 0.1 * rng.normal(size=40)
    table = LabelledTable.make(columns, labels)
    reported: list = []
    logs: list = []
    settings = TableSearchSettings(population=6, iterations=5, inner_folds=2, bags=2, term_caps=(0, 2))
    evaluator, state = evolve(table, table.labelled, settings, seed=1,
                              on_evaluation=lambda record, iteration: reported.append((record.canonical, iteration)),
                              on_iteration=lambda _state, record: logs.append(record))
    per_iteration = Counter(iteration for _, iteration in reported)
    assert len({canonical for canonical, _ in reported}) == len(reported) == evaluator.evaluations == state.evaluations
    assert [record["evaluations"] for record in logs] == [per_iteration[i] for i in range(1, 6)]
    assert per_iteration[0] >= settings.population
