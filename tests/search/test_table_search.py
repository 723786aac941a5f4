"""The table search (``search --bench TABLE.csv``) on partial labels, ``score``, and their refusals (issue 41)."""

from __future__ import annotations

import csv
from dataclasses import replace
import json

import numpy as np
import pytest
from scipy.stats import kendalltau

from autoprox.genome.weighted import WeightedFormula, WeightedGenome, parse_weighted
from autoprox.proxies.weighted_fit import ridge_loo
from autoprox.search.rundir import RunDirectory
from autoprox.search.table_run import run_table_search
from autoprox.search.table_search import LabelledTable, TableSearchSettings, search_table
from tests.commands import one_error_line, run_cli

COLUMNS = ("params", "flops", "nwot", "jacov", "snip")


def write_table(path, rows: int = 90, labelled: int = 40, seed: int = 0, labels=None):
    """A proxy table whose target is a nonlinear function of the columns' ranks (a product term carries half of
    it), labelled on ``labelled`` rows (the others' cells empty)."""
    rng = np.random.default_rng(seed)
    values = {name: rng.lognormal(size=rows) for name in COLUMNS}
    ranks = {name: np.argsort(np.argsort(v)) / rows - 0.5 for name, v in values.items()}
    target = ranks["nwot"] + 2.0 * ranks["params"] * ranks["jacov"] + 0.05 * rng.normal(size=rows)
    if labels is not None:
        target = labels
    keep = set(rng.permutation(rows)[:labelled].tolist())
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "val_acc", *COLUMNS])
        for i in range(rows):
            label = repr(float(target[i])) if i in keep else ""
            writer.writerow([f"arch-{i}", label, *(repr(float(values[c][i])) for c in COLUMNS)])
    return path, target, sorted(keep)


SMALL = TableSearchSettings(population=8, iterations=6, inner_folds=2, bags=3, term_caps=(0, 2))


def test_ridge_loo_matches_a_direct_solution():
    rng = np.random.default_rng(1)
    features, targets = rng.normal(size=(30, 4)), rng.normal(size=30)
    model = ridge_loo(features, targets, alphas=(0.5,))
    scale = features.std(axis=0)
    standard = (features - features.mean(axis=0)) / scale
    direct = np.linalg.solve(standard.T @ standard + 0.5 * np.eye(4), standard.T @ (targets - targets.mean()))
    assert np.allclose(model.weights, direct / scale, atol=1e-10)
    assert np.allclose(model.predict(features).mean(), targets.mean(), atol=1e-10)


def test_ridge_loo_of_more_members_than_rows_matches_a_direct_solution():
    """A table of 2,000 columns spent minutes in each ridge solving its members-by-members system; above
    WIDE_MEMBERS the weights come from the SVD the penalty was chosen with: the same weights."""
    from autoprox.proxies.weighted_fit import WIDE_MEMBERS

    rng = np.random.default_rng(2)
    width = WIDE_MEMBERS * 4
    features, targets = rng.normal(size=(25, width)), rng.normal(size=25)
    model = ridge_loo(features, targets, alphas=(0.5,))
    scale = features.std(axis=0)
    standard = (features - features.mean(axis=0)) / scale
    direct = np.linalg.solve(standard.T @ standard + 0.5 * np.eye(width), standard.T @ (targets - targets.mean()))
    assert np.allclose(model.weights, direct / scale, rtol=1e-8, atol=1e-12)


def test_a_formula_of_many_members_is_shortened_to_its_largest_weights_and_a_short_one_is_whole():
    """The closing line of a search of 2,001 columns printed all 2,001 weighted members."""
    wide = WeightedFormula(tuple(f"p{i}" for i in range(40)), (), tuple((i - 20) / 10 for i in range(40)))
    shown, left_out = wide.shortened(most=5)
    assert shown.endswith(" ...") and shown.count("*r(") == 5 and left_out == 39 - 5  # p20's weight is 0
    assert shown == "-2*r(p0) -1.9*r(p1) -1.8*r(p2) +1.8*r(p38) +1.9*r(p39) ..."
    short = WeightedFormula(("params", "nwot"), (), (0.5, -0.25))
    assert short.shortened() == (str(short), 0)


def test_weighted_genome_text_round_trips_and_is_canonical():
    genome = parse_weighted("weighted(mul(r(nwot), r(jacov)), min(r(snip), r(params)))")
    assert str(parse_weighted(str(genome))) == str(genome)
    assert genome.canonical == parse_weighted("weighted(min(r(snip), r(params)), mul(r(nwot), r(jacov)))").canonical
    assert len(parse_weighted("weighted()")) == 0


def test_search_learns_from_labelled_rows_only_and_scores_every_row(tmp_path):
    path, target, labelled = write_table(tmp_path / "t.csv")
    from autoprox.data.proxy_tables import read_proxy_table

    table = read_proxy_table(path)
    data = LabelledTable.make(table.proxies, table.accuracies["val_acc"], "val_acc")
    assert sorted(data.labelled.tolist()) == labelled
    fit = search_table(data, SMALL)
    scores = fit.formula.score(table.proxies)
    assert scores.shape == (90,) and np.isfinite(scores).all()
    # The same search on a table whose unlabelled rows carry labels that would mislead it: the same proxy.
    wrong = np.where(np.isnan(table.accuracies["val_acc"]), -1.0, table.accuracies["val_acc"])
    other = LabelledTable.make(table.proxies, np.where(np.isin(np.arange(90), labelled), wrong, np.nan), "val_acc")
    assert np.allclose(search_table(other, SMALL).formula.score(table.proxies), scores)
    unlabelled = np.setdiff1d(np.arange(90), labelled)
    assert kendalltau(scores[unlabelled], target[unlabelled]).statistic > 0.4
    # Members are kept on the 40 labelled rows alone (on all 90 a large table's search held it thousands of times),
    # and a member read on labelled rows is the formula's value there.
    assert data.members and all(values.shape == (40,) for values in data.members.values())
    node = fit.formula.members[-1]
    from autoprox.genome.rank_formula import RankFormula

    whole = np.nan_to_num(RankFormula(node).score(table.proxies, missing="neutral"), nan=0.0)
    assert np.allclose(data.member(node, np.array(labelled)), whole[labelled])
    with pytest.raises(ValueError, match="unlabelled row"):
        data.member(node, unlabelled[:2])


def test_a_table_search_runs_its_ridge_fits_on_one_blas_thread_and_gives_the_threads_back(tmp_path):
    """Many small ridge fits on two BLAS threads cost 13 times their time on one on a busy 2-core machine: the inner
    cross-validation and the search hold NumPy's and SciPy's BLAS to one thread while they run, and restore it."""
    from threadpoolctl import threadpool_info, threadpool_limits

    from autoprox.data.proxy_tables import read_proxy_table
    from autoprox.search.table_search import choose_term_cap

    def blas_threads_now():
        return {info["filepath"]: info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"}

    path, _, _ = write_table(tmp_path / "t.csv")
    table = read_proxy_table(path)
    data = LabelledTable.make(table.proxies, table.accuracies["val_acc"], "val_acc")
    seen = []
    with threadpool_limits(limits=2, user_api="blas"):  # as on a 2-core machine, whatever this one has
        before = blas_threads_now()
        assert before and set(before.values()) == {2}
        choice = choose_term_cap(data, SMALL, progress=lambda *_: seen.append(blas_threads_now()))
        search_table(data, SMALL, on_iteration=lambda *_: seen.append(blas_threads_now()), choice=choice)
        assert blas_threads_now() == before
    assert len(seen) == 2 * SMALL.iterations + SMALL.iterations  # each inner fold's iterations, then the search's
    assert all(set(now.values()) == {1} and set(now) == set(before) for now in seen)


def test_with_many_labelled_rows_a_genome_is_fitted_on_bounded_subsamples_and_judged_on_every_row(tmp_path):
    """max_bag_rows bounds each subsample (a search of thousands of labelled rows fitted each genome on two thirds
    of them, an hour and more); below the bound the draws are those of before, so a search of up to 300 labelled
    rows is unchanged; the out-of-bag judgement still covers every row, and the proxy's weights are fitted on all
    of them. A recorded configuration without the bound reads as None, what the earlier version searched."""
    from autoprox.data.proxy_tables import read_proxy_table
    from autoprox.proxies.weighted_fit import subsamples
    from autoprox.search.table_search import WeightedFitness, _generator, basis_members

    unbounded = subsamples(300, 8, 2 / 3, _generator(5))
    assert [len(rows) for rows in unbounded] == [200] * 8
    assert all(np.array_equal(a, b) for a, b in zip(unbounded, subsamples(300, 8, 2 / 3, _generator(5), 200)))
    assert [len(rows) for rows in subsamples(3000, 8, 2 / 3, _generator(5), 200)] == [200] * 8
    assert TableSearchSettings().max_bag_rows == 200
    assert TableSearchSettings.from_json({"population": 20}).max_bag_rows is None
    assert TableSearchSettings.from_json(TableSearchSettings().to_json()) == TableSearchSettings()
    for bad in (2, 2.5, True, "200"):
        with pytest.raises(ValueError, match="max_bag_rows must be None or an integer of at least 3"):
            TableSearchSettings(max_bag_rows=bad)

    path, target, labelled = write_table(tmp_path / "t.csv", rows=90, labelled=90)
    table = read_proxy_table(path)
    data = LabelledTable.make(table.proxies, table.accuracies["val_acc"], "val_acc")
    settings = replace(SMALL, max_bag_rows=20)
    fit = search_table(data, settings)
    bags = subsamples(90, settings.bags, settings.bag_fraction, _generator(settings.seed), 20)
    assert [len(rows) for rows in fit.evaluator.bags] == [20] * settings.bags
    assert all(np.array_equal(a, b) for a, b in zip(fit.evaluator.bags, bags))
    judged = fit.evaluator.bagged.judge()
    assert np.isfinite(judged.kendall) and judged.kendall > 0.4  # out-of-bag predictions on the rows left out
    direct = WeightedFitness(data, data.labelled, bags, basis_members(data.plain, settings.basis))
    weights = direct.fitted(WeightedGenome()).weights  # fitted on all 90 labelled rows, not on a bag
    full = ridge_loo(direct.fixed, direct.targets)
    assert np.allclose(weights, full.weights)


def test_cli_search_then_score_gives_rank_order(tmp_path, capsys):
    path, target, labelled = write_table(tmp_path / "t.csv")
    code, out, err = run_cli(capsys, "search", "--bench", path, "--targets", "val_acc", "--out", tmp_path / "run",
                             "--iterations", "4", "--quiet")
    assert code == 0, err
    best = json.loads((tmp_path / "run" / "best.json").read_text())
    assert best["format"] == "autoprox-weighted-formula/1" and best["search"]["labelled_rows"] == 40
    for name in ("config.json", "log.jsonl", "evaluations.jsonl", "hall_of_fame.json", "checkpoint.json"):
        assert (tmp_path / "run" / name).is_file(), name
    code, out, err = run_cli(capsys, "score", "--proxy", tmp_path / "run" / "best.json", "--bench", path,
                             "--out", tmp_path / "s.csv")
    assert code == 0, err
    rows = list(csv.reader(open(tmp_path / "s.csv")))
    assert rows[0] == ["id", "score"] and [r[0] for r in rows[1:]] == [f"arch-{i}" for i in range(90)]
    scores = np.array([float(r[1]) for r in rows[1:]])
    formula = WeightedFormula.from_json(best["formula"])
    from autoprox.data.proxy_tables import read_proxy_table

    assert np.allclose(scores, formula.score(read_proxy_table(path).proxies))
    code, out, err = run_cli(capsys, "rank", "--proxy", tmp_path / "run" / "best.json", "--bench", path, "--json")
    assert code == 0, err
    ranked = json.loads(out)[path.stem]["val_acc"]["kendall"]
    assert ranked == pytest.approx(kendalltau(scores[labelled], target[labelled]).statistic, abs=1e-12)
    # the table it was fitted on: said to be in-sample, with the estimate for unseen rows; another table is not
    oob = best["search"]["out_of_bag_kendall"]
    assert f"in-sample: {tmp_path / 'run' / 'best.json'}: its weights were fitted on the labelled rows of this very " \
           f"table (t)" in err and f"out-of-bag Kendall ({oob:+.3f})" in err
    other = tmp_path / "other.csv"
    other.write_text(path.read_text().replace("arch-0,", "arch-zero,"))
    code, out, err = run_cli(capsys, "rank", "--proxy", tmp_path / "run" / "best.json", "--bench", other, "--json")
    assert code == 0 and "in-sample" not in err, err
    # Rows with no proxy value at all, one labelled (rank and score read it; only search refuses it) and two not:
    # scored at the formula's intercept they looked like average architectures. They get no score (an empty cell,
    # said on stderr) and rank leaves them out; the scored rows keep their order, which is still rank's.
    blank = tmp_path / "blank.csv"
    blank.write_text(path.read_text() + "empty-1,0.5,,,,,\nempty-2,,,,,,\nempty-3,,NA,,nan,,\n")
    code, out, err = run_cli(capsys, "score", "--proxy", tmp_path / "run" / "best.json", "--bench", blank,
                             "--out", tmp_path / "blank-scores.csv")
    assert code == 0, err
    written = list(csv.reader(open(tmp_path / "blank-scores.csv")))[1:]
    assert [r[0] for r in written] == [f"arch-{i}" for i in range(90)] + ["empty-1", "empty-2", "empty-3"]
    assert [r[1] for r in written[90:]] == ["", "", ""]
    assert np.allclose([float(r[1]) for r in written[:90]], scores)  # the other rows' scores are as before
    assert "3 of the 93 rows got no score" in err and "'empty-1', 'empty-2', 'empty-3'" in err and \
        "rank after every scored row" in err, err
    assert len([line for line in err.splitlines() if "got no score" in line]) == 1
    code, out, err = run_cli(capsys, "rank", "--proxy", tmp_path / "run" / "best.json", "--bench", blank, "--json")
    assert code == 0, err
    figures = json.loads(out)["blank"]["val_acc"]
    assert figures["n"] == len(labelled) and figures["kendall"] == pytest.approx(ranked, abs=1e-12)
    import autoprox

    with pytest.warns(UserWarning, match="3 of the 93 rows got no score"):
        rows = autoprox.score_rows(tmp_path / "run" / "best.json", blank)
    assert [i for i, _ in rows[90:]] == ["empty-1", "empty-2", "empty-3"]
    assert all(np.isnan(v) for _, v in rows[90:]) and np.allclose([v for _, v in rows[:90]], scores)


def test_a_table_search_says_where_it_wrote_its_proxy_once(tmp_path, capsys):
    """The progress log on stderr and the summary on stdout both said "written to RUN/best.json"; the inner folds'
    progress moved once a fold (an --iterations of thousands sat on one line with nothing shown)."""
    path, _, _ = write_table(tmp_path / "t.csv")
    code, out, err = run_cli(capsys, "search", "--bench", path, "--targets", "val_acc", "--out", tmp_path / "run",
                             "--iterations", "2")
    assert code == 0, err
    assert (out + err).count("written to") == 1 and "score every row with" in out
    # the inner cross-validation's progress counts its folds' iterations (4 folds of 2), not whole folds only
    assert "inner folds" in err and "8/8" in err and "fold 4/4" in err, err


def test_a_stopped_table_search_resumes_to_the_same_proxy(tmp_path):
    path, _, _ = write_table(tmp_path / "t.csv", seed=3)
    whole = run_table_search(path, ["val_acc"], tmp_path / "whole", SMALL, quiet=True)
    stopped = run_table_search(path, ["val_acc"], tmp_path / "cut", SMALL, quiet=True, stop_after=3)
    assert stopped["finished"] is False
    resumed = run_table_search(None, None, tmp_path / "cut", resume=True, quiet=True)
    assert resumed["formula"] == whole["formula"] and resumed["genome"] == whole["genome"]
    assert len((tmp_path / "cut" / "log.jsonl").read_text().splitlines()) == SMALL.iterations
    # best.json as a whole, its count of genomes evaluated included (a resume once counted only its own session's)
    assert {k: v for k, v in resumed.items() if k != "run"} == {k: v for k, v in whole.items() if k != "run"}
    assert resumed["evaluations"] == len((tmp_path / "cut" / "evaluations.jsonl").read_text().splitlines())


def test_a_target_the_columns_cannot_rank_is_warned_of_even_with_quiet_and_few_labels_are_said_optimistic(tmp_path,
                                                                                                           capsys):
    """A pure-noise target got no warning, and with 12 labelled rows the out-of-bag Kendall printed was not said to
    be optimistic. The warning's rule: the inner cross-validation's out-of-fold Kendall is not above chance
    (one-sided Kendall test, p >= 0.05); a target that is a column's rank plus small noise is not warned of."""
    from autoprox.data.proxy_tables import read_proxy_table

    rng = np.random.default_rng(101)
    noise, _, _ = write_table(tmp_path / "noise.csv", rows=40, labelled=12, seed=1, labels=rng.normal(size=40))
    nwot = read_proxy_table(noise).proxies["nwot"]
    ranked = np.argsort(np.argsort(nwot)) / 40 + 0.05 * rng.normal(size=40)
    signal, _, _ = write_table(tmp_path / "signal.csv", rows=40, labelled=12, seed=1, labels=ranked)
    errors = {}
    for name, path in (("noise", noise), ("signal", signal)):
        code, out, errors[name] = run_cli(capsys, "search", "--bench", path, "--targets", "val_acc", "--out",
                                          tmp_path / name, "--iterations", "3", "--quiet")
        assert code == 0, errors[name]
        assert "with fewer than 20 labelled rows the out-of-bag Kendall is optimistic; the out-of-fold Kendall of " \
               "the inner cross-validation, " in out
    assert errors["signal"] == ""
    assert errors["noise"].count("\n") == 1 and errors["noise"].startswith(
        "autoprox: warning: val_acc: the proxy ranks the labelled rows no better than chance: its out-of-fold Kendall "
        "of the inner cross-validation is ")
    assert "on 12 rows (one-sided Kendall test: p = " in errors["noise"] and ", not below 0.05)" in errors["noise"]
    with pytest.warns(UserWarning, match="no better than chance"):  # in Python
        run_table_search(noise, ["val_acc"], tmp_path / "python", SMALL, quiet=True)


@pytest.mark.parametrize("case, expected", [
    ("few", "has 9 labelled row(s); a search needs at least 10"),
    ("constant", "same value on every labelled row"),
    ("empty-row", "has no proxy value"),
])
def test_refusals(tmp_path, capsys, case, expected):
    labels = {"few": None, "constant": np.full(90, 70.0), "empty-row": None}[case]
    path, _, labelled = write_table(tmp_path / "t.csv", labelled=9 if case == "few" else 40, labels=labels)
    if case == "empty-row":
        rows = list(csv.reader(open(path)))
        row = rows[labelled[0] + 1]
        rows[labelled[0] + 1] = row[:2] + [""] * (len(row) - 2)
        with open(path, "w", newline="") as handle:
            csv.writer(handle).writerows(rows)
    code, out, err = run_cli(capsys, "search", "--bench", path, "--targets", "val_acc", "--out", tmp_path / "run")
    assert code == 2
    assert expected in one_error_line(err)
    if case == "empty-row":  # the row by its id, and the columns read, not its index alone
        assert f"labelled row {labelled[0] + 1} (id 'arch-{labelled[0]}') has no proxy value in the columns read " \
               f"({', '.join(COLUMNS)})" in err, err
    assert not (tmp_path / "run").exists()


def test_an_option_of_the_statistics_search_is_refused_on_a_table(tmp_path, capsys):
    path, _, _ = write_table(tmp_path / "t.csv")
    code, out, err = run_cli(capsys, "search", "--bench", path, "--out", tmp_path / "run", "--batch-size", "4")
    assert code == 2 and "does not apply to a proxy-table search" in one_error_line(err)


def test_rank_and_score_read_every_row_of_a_partially_labelled_table(tmp_path, capsys):
    path, target, labelled = write_table(tmp_path / "t.csv")
    code, out, err = run_cli(capsys, "score", "--proxy", "nwot", "--bench", path, "--out", tmp_path / "s.csv")
    assert code == 0, err
    rows = list(csv.reader(open(tmp_path / "s.csv")))[1:]
    assert len(rows) == 90 and all(r[1] for r in rows)


def test_the_linear_member_is_the_ridge_fit(tmp_path):
    path, _, _ = write_table(tmp_path / "t.csv")
    from autoprox.data.proxy_tables import read_proxy_table
    from autoprox.search.table_search import WeightedFitness

    table = read_proxy_table(path)
    data = LabelledTable.make(table.proxies, table.accuracies["val_acc"], "val_acc")
    formula = WeightedFitness(data, data.labelled, []).fitted(WeightedGenome())
    assert formula.terms == () and len(formula.weights) == len(COLUMNS)


def test_an_exported_weighted_formula_gives_the_in_process_scores(tmp_path, capsys):
    import importlib.util

    path, _, _ = write_table(tmp_path / "t.csv", seed=4)
    run_table_search(path, ["val_acc"], tmp_path / "run", SMALL, quiet=True)
    best = json.loads((tmp_path / "run" / "best.json").read_text())
    formula = WeightedFormula.from_json(best["formula"])
    formula = WeightedFormula(formula.plain, parse_weighted("weighted(mul(r(nwot), neg(r(jacov))), "
                                                             "max(sub(r(snip), r(flops)), r(params)))").terms,
                              formula.weights[:len(formula.plain)] + (0.7, -0.3), formula.intercept)
    best["formula"] = formula.to_json()
    (tmp_path / "run" / "best.json").write_text(json.dumps(best))
    code, out, err = run_cli(capsys, "export", tmp_path / "run", "--out", tmp_path / "proxy.py")
    assert code == 0, err
    spec = importlib.util.spec_from_file_location("exported_weighted", tmp_path / "proxy.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    from autoprox.data.proxy_tables import read_proxy_table

    table = read_proxy_table(path)
    columns = {name: list(values) for name, values in table.proxies.items()}
    columns["nwot"][3] = None  # an empty cell reads as no information in both
    for values in columns.values():  # and a row with nothing measured gets no score in both
        values[5] = None
    expected = formula.score({n: np.array([np.nan if v is None else v for v in vs]) for n, vs in columns.items()})
    assert np.isnan(expected[5]) and np.isfinite(np.delete(expected, 5)).all()
    assert np.allclose(module.score(columns), expected, rtol=1e-12, atol=1e-12, equal_nan=True)
    with pytest.raises(ValueError, match="none of the columns this proxy reads is given: params, flops"):
        module.score({"foo": [1.0, 2.0, 3.0]})  # it scored every row the intercept's constant


def test_python_api_gives_the_command_line_scores(tmp_path, capsys):
    import autoprox

    path, _, _ = write_table(tmp_path / "t.csv", seed=6)
    best = autoprox.search_table(path, "val_acc", out=tmp_path / "run", iterations=3)
    rows = autoprox.score_rows(tmp_path / "run" / "best.json", path)
    code, _, err = run_cli(capsys, "score", "--proxy", tmp_path / "run" / "best.json", "--bench", path,
                           "--out", tmp_path / "s.csv")
    assert code == 0, err
    written = [(r[0], float(r[1])) for r in list(csv.reader(open(tmp_path / "s.csv")))[1:]]
    assert [i for i, _ in rows] == [i for i, _ in written]
    assert np.allclose([v for _, v in rows], [v for _, v in written], rtol=1e-12)
    assert best["search"]["labelled_rows"] == 40


def test_show_report_and_curves_of_a_table_run(tmp_path, capsys):
    path, _, _ = write_table(tmp_path / "t.csv", seed=7)
    run_table_search(path, ["val_acc"], tmp_path / "run", SMALL, quiet=True)
    code, out, err = run_cli(capsys, "show", tmp_path / "run", "--top", "3")
    assert code == 0, err
    assert "table search of t.csv" in out and "(finished)" in out and out.count("weighted(") == 3
    code, out, err = run_cli(capsys, "report", tmp_path / "run", "--out", tmp_path / "r.html")
    assert code == 0, err
    page = (tmp_path / "r.html").read_text()
    assert "<svg" in page and "Hall of fame" in page and "weighted(" in page
    code, out, err = run_cli(capsys, "curves", tmp_path / "run", "--out", tmp_path / "c.png")
    assert code == 0, err
    assert (tmp_path / "c.png").stat().st_size > 1000


def test_a_table_resume_refuses_options_that_differ_and_its_hint_names_the_table(tmp_path, capsys, monkeypatch):
    """A resume of a finished table search computes and rewrites nothing (it rewrote best.json and printed the
    search's summary, as if it had run): one line says the run is finished and how to look at it and score with it,
    with or without --quiet, and autoprox.search_table(resume=True) returns best.json as it is."""
    import autoprox

    path, _, _ = write_table(tmp_path / "t.csv", rows=40, labelled=30, seed=8)
    run = tmp_path / "run"
    code, out, err = run_cli(capsys, "search", "--bench", path, "--targets", "val_acc", "--out", run,
                             "--iterations", "2", "--quiet")
    assert code == 0, err
    log = (run / "log.jsonl").read_text()
    for options, expected in [(("--seed", "3"), "these options differ: --seed 3 (the run has 0)"),
                              (("--iterations", "5"), "--iterations 5 (the run has 2; a table search is not extended"),
                              (("--targets", "params", "--seed", "0"), "--targets params (the run has val_acc)")]:
        code, out, err = run_cli(capsys, "search", "--resume", "--out", run, *options, "--quiet")
        assert code == 2 and expected in one_error_line(err) and out == ""
        assert (run / "log.jsonl").read_text() == log
    code, out, err = run_cli(capsys, "search", "--bench", path, "--resume")  # was a TypeError's traceback
    assert code == 2 and one_error_line(err) == "autoprox: error: --resume needs --out RUN_DIR" and out == ""
    best = run / "best.json"
    written, stamp = best.read_bytes(), best.stat().st_mtime_ns
    reads = []  # the command read best.json twice (once to know the run was finished, once in the resume)
    read_best = RunDirectory.best
    monkeypatch.setattr(RunDirectory, "best", lambda self: reads.append(self.path) or read_best(self))
    for quiet in (("--quiet",), ()):
        reads.clear()
        code, out, err = run_cli(capsys, "search", "--resume", "--out", run, "--seed", "0", "--iterations", "2",
                                 "--targets", "val_acc", *quiet)
        assert code == 0 and err == "", err
        assert reads == [run]
        assert out.count("\n") == 1 and out.startswith(f"{run} is a finished table search: --resume has nothing to "
                                                       f"continue, and nothing was rewritten; look at it with "
                                                       f"autoprox show {run}, score a table with autoprox score")
        assert f"--bench {path.resolve()} --out scores.csv" in out and "TABLE.csv" not in out
        assert best.read_bytes() == written and best.stat().st_mtime_ns == stamp
        assert (run / "log.jsonl").read_text() == log
    assert autoprox.search_table(None, out=run, resume=True) == json.loads(written)
    assert best.read_bytes() == written and best.stat().st_mtime_ns == stamp


def test_workers_is_refused_on_a_table_search(tmp_path, capsys):
    path, _, _ = write_table(tmp_path / "t.csv", rows=40, labelled=30)
    code, out, err = run_cli(capsys, "search", "--bench", path, "--out", tmp_path / "run", "--workers", "2")
    assert code == 2 and "--workers does not apply to a proxy-table search" in one_error_line(err)
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_ctrl_c_in_the_inner_cross_validation_says_truthfully_what_is_kept(tmp_path):
    import os
    import signal
    import subprocess
    import sys

    path, _, _ = write_table(tmp_path / "t.csv", rows=40, labelled=30, seed=9)
    env = dict(os.environ, PYTHONPATH=str(__import__("pathlib").Path(__file__).resolve().parents[2]))
    # a shell that runs the tests in the background (as CI may) ignores SIGINT, and children inherit that
    process = subprocess.Popen([sys.executable, "-m", "autoprox.cli", "search", "--bench", str(path), "--out",
                                str(tmp_path / "run"), "--iterations", "5000"], stderr=subprocess.PIPE, text=True,
                               env=env, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    seen = ""
    while "choosing the number of terms" not in seen:
        line = process.stderr.readline()
        assert line, seen
        seen += line
    process.send_signal(signal.SIGINT)
    err = seen + process.stderr.read()
    assert process.wait(timeout=60) == 130
    assert "only config.json is kept and the resume starts the search over" in err
    assert "what was computed is kept" not in err
    assert sorted(p.name for p in (tmp_path / "run").iterdir() if not p.name.startswith(".")) == ["config.json"]


def test_the_search_imports_nothing_once_it_has_said_it_started(tmp_path):
    """A Ctrl-C that lands inside an import can end CPython by SIGINT itself rather than by the search's exit 130
    (it did, in 11 of 40 tries, when scipy.stats was first imported inside the inner cross-validation): every module
    the search uses is imported before its first progress line."""
    import os
    import subprocess
    import sys

    path, _, _ = write_table(tmp_path / "t.csv", rows=40, labelled=30, seed=9)
    env = dict(os.environ, PYTHONPATH=str(__import__("pathlib").Path(__file__).resolve().parents[2]))
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "autoprox.cli", "search", "--bench", str(path),
                           "--out", str(tmp_path / "run"), "--iterations", "20"], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stderr.splitlines()
    started = next(i for i, line in enumerate(lines) if "choosing the number of terms" in line)
    assert sum("import time:" in line for line in lines[:started]) > 100  # the timing is on
    assert [line for line in lines[started:] if "import time:" in line] == []


def test_the_out_of_bag_kendall_is_nan_below_3_judged_rows_and_zero_for_constant_predictions():
    """The search's out-of-bag judgement: a Kendall over fewer than 3 rows left out is no figure (NaN, the genome
    invalid with its R^2), one of predictions that rank nothing is 0, and otherwise it is tau-b against the targets
    over the rows left out at least once."""
    from autoprox.proxies.weighted_fit import BaggedRidge, subsamples

    rng = np.random.default_rng(4)
    features, targets = rng.normal(size=(30, 2)), rng.permutation(30) / 30
    few = BaggedRidge(features[:4], targets[:4], [np.array([0, 1, 2])]).judge()
    assert np.isnan(few.kendall) and np.isnan(few.r2)
    constant = BaggedRidge(np.zeros((30, 2)), targets, [np.arange(15)]).judge()  # one bag: its intercept on every row
    assert constant.kendall == 0.0
    bags = subsamples(30, 3, 0.5, rng)
    model, predictions = BaggedRidge(features, targets, bags).fit()
    seen = np.isfinite(predictions)
    expected = kendalltau(predictions[seen], targets[seen]).statistic
    assert BaggedRidge(features, targets, bags).judge().kendall == pytest.approx(expected, abs=1e-15)
