"""The ``ffx`` basis of a table search: hinges of each column's rank and minima of pairs, beside the plain columns."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest
from scipy.stats import kendalltau

from autoprox.core.errors import ConfigError, GenomeError
from autoprox.genome.rank_formula import transform_column
from autoprox.genome.weighted import (MAX_HINGED_COLUMNS, MAX_PAIRED_COLUMNS, WeightedFormula, basis_members,
                                      parse_weighted)
from autoprox.proxies.weighted_fit import WIDE_MEMBERS, ridge_loo
from autoprox.search.table_run import run_table_search
from autoprox.search.table_search import LabelledTable, TableSearchSettings, search_table
from tests.search.test_table_search import SMALL, write_table


def test_hinges_are_centred_piecewise_linear_functions_of_the_rank():
    values = np.array([10.0, 40.0, 20.0, 60.0, 30.0, 50.0])  # ranks 1, 4, 2, 6, 3, 5 of 6
    scaled = np.array([1, 4, 2, 6, 3, 5]) / 6
    for name, expected in (("over33", np.maximum(scaled - 1 / 3, 0)), ("over67", np.maximum(scaled - 2 / 3, 0)),
                           ("under33", np.maximum(1 / 3 - scaled, 0)), ("under67", np.maximum(2 / 3 - scaled, 0))):
        got = transform_column(name, values)
        assert np.allclose(got, expected - expected.mean(), atol=1e-12), name
        assert np.allclose(transform_column(name, values * 1e6), got), name  # unit-free
    with_gap = transform_column("over33", np.array([1.0, np.nan, 3.0, 2.0]))
    assert with_gap[1] == 0.0 and np.isclose(with_gap[np.isfinite([1.0, np.nan, 3.0, 2.0])].sum(), 0.0)


def test_the_ffx_basis_holds_each_columns_hinges_then_the_minima_of_pairs():
    members = [str(m) for m in basis_members(("a", "b", "c"), "ffx")]
    assert members[:4] == ["over33(a)", "over67(a)", "under33(a)", "under67(a)"]
    assert members[12:] == ["min(r(a), r(b))", "min(r(a), r(c))", "min(r(b), r(c))"]
    assert len(members) == 3 * 4 + 3 and basis_members(("a", "b", "c"), "linear") == ()
    wide = [f"p{i}" for i in range(MAX_PAIRED_COLUMNS + 1)]
    assert len(basis_members(wide, "ffx")) == 4 * len(wide)  # no pairs beyond MAX_PAIRED_COLUMNS
    assert basis_members([f"p{i}" for i in range(MAX_HINGED_COLUMNS + 1)], "ffx") == ()
    with pytest.raises(GenomeError, match="unknown basis 'splines'; known: linear, ffx"):
        basis_members(("a",), "splines")


def test_ridge_of_more_members_than_rows_below_wide_members_matches_a_direct_solution():
    """An ffx basis gives more members than labelled rows (143 members, 33 rows in a bag): the weights come from the
    rows' Gram matrix, the same as the members-by-members solve."""
    rng = np.random.default_rng(3)
    width = WIDE_MEMBERS // 2
    features, targets = rng.normal(size=(33, width)), rng.normal(size=33)
    model = ridge_loo(features, targets)
    scale = features.std(axis=0)
    standard = (features - features.mean(axis=0)) / scale
    direct = np.linalg.solve(standard.T @ standard + model.alpha * np.eye(width),
                             standard.T @ (targets - targets.mean()))
    assert np.allclose(model.weights, direct / scale, rtol=1e-8, atol=1e-12)
    assert ridge_loo(features, targets, alphas=(model.alpha, 1e9)).alpha == model.alpha  # the same LOO choice


def test_the_bagged_ridge_of_cached_fixed_blocks_fits_what_a_direct_ridge_fits():
    """The table search computes each subsample's fixed members (columns and ffx basis: their standardisation and
    rows' Gram eigendecomposition) once and adds a genome's terms by a low-rank update: on PiT's table (30 labelled
    rows, 12 columns, 114 fixed members) each subsample's fit, the bagged mean and the out-of-bag predictions are the
    direct ridge's of all members to float rounding, the same penalty chosen with the same leave-one-out error; a
    constant term weighs 0, and a block no wider than its rows (the linear basis) is fitted directly."""
    from autoprox.data.proxy_tables import read_proxy_table, table_space_files
    from autoprox.proxies.weighted_fit import BaggedRidge, fixed_blocks, subsamples
    from autoprox.search.table_search import WeightedFitness

    (path, targets), = table_space_files("pit")
    table = read_proxy_table(path)
    labels = np.full(len(table.ids), np.nan)
    rows = np.random.default_rng(5).permutation(len(table.ids))[:30]
    labels[rows] = table.accuracies[targets[0]][rows]
    data = LabelledTable.make(table.proxies, labels)
    bags = subsamples(30, 4, 2 / 3, np.random.default_rng(6))
    fitness = WeightedFitness(data, data.labelled, bags, basis_members(data.plain, "ffx"))
    genome = parse_weighted("weighted(mul(r(nwot), r(jacov)), min(r(params), r(snip)), neg(r(flops)))")
    terms, ranks = np.column_stack([fitness.terms(genome), np.full(30, 0.25)]), fitness.targets
    features = np.hstack([fitness.fixed, terms])
    assert fitness.fixed.shape == (30, 12 + 12 * 4 + 66)
    bagged = BaggedRidge(fitness.fixed, ranks, bags)
    assert bagged.blocks is not None
    direct = [ridge_loo(features[bag], ranks[bag]) for bag in bags]
    for got, expected in zip(bagged.ridges(terms), direct):
        assert got.alpha == expected.alpha and got.loo_error == pytest.approx(expected.loo_error, rel=1e-9)
        assert np.allclose(got.weights, expected.weights, rtol=1e-9, atol=1e-9 * np.abs(expected.weights).max())
        assert got.intercept == pytest.approx(expected.intercept, rel=1e-9) and got.weights[-1] == 0.0
    model, predictions = bagged.fit(terms)
    assert np.allclose(model.weights, np.mean([m.weights for m in direct], axis=0), rtol=1e-9, atol=1e-12)
    row = np.setdiff1d(np.arange(30), bags[0])[0]
    expected_row = np.mean([m.predict(features[row:row + 1])[0] for m, bag in zip(direct, bags) if row not in bag])
    assert predictions[row] == pytest.approx(expected_row, rel=1e-9)
    plain = fitness.fixed[:, :12]  # 12 columns on 20 rows: not wide
    assert fixed_blocks(plain[np.array(bags)], ranks[np.array(bags)]) is None
    narrow = BaggedRidge(plain, ranks, bags).fit(terms)[0]
    assert np.allclose(narrow.weights, np.mean([ridge_loo(np.hstack([plain, terms])[bag], ranks[bag]).weights
                                                for bag in bags], axis=0), rtol=1e-12, atol=1e-15)


def test_a_formula_with_a_basis_round_trips_and_an_earlier_record_reads_without_one():
    basis = basis_members(("a", "b"), "ffx")
    terms = parse_weighted("weighted(mul(r(a), r(b)))").terms
    formula = WeightedFormula(("a", "b"), terms, tuple(np.linspace(-1, 1, 2 + len(basis) + 1)), 0.1, basis=basis)
    data = json.loads(json.dumps(formula.to_json()))
    assert data["basis"][0] == "over33(a)" and WeightedFormula.from_json(data) == formula
    plain = WeightedFormula(("a", "b"), (), (0.5, -0.5))
    assert "basis" not in plain.to_json() and WeightedFormula.from_json(plain.to_json()) == plain
    with pytest.raises(GenomeError, match="of 2 columns, 9 basis members and 1 terms needs 12 weights, got 3"):
        WeightedFormula(("a", "b"), terms, (1.0, 2.0, 3.0), basis=basis)
    with pytest.raises(GenomeError, match="'basis' is a list of rank formulas"):
        WeightedFormula.from_json({**data, "basis": "over33(a)"})


def test_settings_default_to_ffx_and_a_recorded_configuration_without_a_basis_reads_linear():
    assert TableSearchSettings().basis == "ffx"
    recorded = TableSearchSettings().to_json()
    assert TableSearchSettings.from_json(recorded).basis == "ffx"
    del recorded["basis"]
    assert TableSearchSettings.from_json(recorded).basis == "linear"
    with pytest.raises(ConfigError, match="unknown basis 'cubic'; known: linear, ffx"):
        TableSearchSettings(basis="cubic")


def test_the_ffx_basis_ranks_a_target_with_a_kink_better_than_the_linear_one(tmp_path):
    """A target flat over the lower two thirds of a column's rank and rising above: a piecewise-linear member
    follows it, a linear blend of ranks cannot (judged on the unlabelled rows)."""
    rng = np.random.default_rng(4)
    path, _, labelled = write_table(tmp_path / "t.csv", rows=120, labelled=50, seed=4)
    from autoprox.data.proxy_tables import read_proxy_table

    table = read_proxy_table(path)
    rank = np.argsort(np.argsort(table.proxies["nwot"])) / 120
    truth = np.maximum(rank - 2 / 3, 0) + 0.01 * rng.normal(size=120)
    mask = np.isin(np.arange(120), labelled)
    figures = {}
    for basis in ("linear", "ffx"):
        data = LabelledTable.make(table.proxies, np.where(mask, truth, np.nan))
        fit = search_table(data, TableSearchSettings(**{**SMALL.to_json(), "term_caps": (0,), "basis": basis}))
        assert len(fit.formula.basis) == (0 if basis == "linear" else 5 * 4 + 10)
        scores = fit.formula.score(data.columns)
        figures[basis] = kendalltau(scores[~mask], truth[~mask]).statistic
    assert figures["ffx"] > figures["linear"] + 0.05, figures


def test_a_table_runs_best_json_records_the_basis_and_its_export_gives_the_scores(tmp_path, capsys):
    from autoprox.reports.weighted_export import weighted_export_source

    path, _, _ = write_table(tmp_path / "t.csv")
    report = run_table_search(path, ["val_acc"], tmp_path / "run", SMALL, quiet=True)
    best = json.loads((tmp_path / "run" / "best.json").read_text())
    assert best["formula"]["basis"][:2] == ["over33(params)", "over67(params)"]
    assert json.loads((tmp_path / "run" / "config.json").read_text())["settings"]["basis"] == "ffx"
    formula = WeightedFormula.from_json(best["formula"])
    (tmp_path / "exported.py").write_text(weighted_export_source(formula))
    spec = importlib.util.spec_from_file_location("exported_ffx", tmp_path / "exported.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    from autoprox.data.proxy_tables import read_proxy_table

    columns = read_proxy_table(path).proxies
    assert np.allclose(module.score({n: list(v) for n, v in columns.items()}), formula.score(columns), atol=1e-12)
    assert report["formula"] == best["formula"]
    from autoprox.reports.table_run import show_table_run

    assert "fitness: out-of-bag R2 of the ridge fit over the columns, the ffx basis and the genome's terms" in \
        show_table_run(tmp_path / "run")
