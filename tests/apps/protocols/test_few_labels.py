"""The sample-efficiency protocol (``evaluate --few-labels``) and its baselines (issue 41)."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from scipy.stats import rankdata

from autoprox.apps.protocols.few_labels import (
    FEW_LABEL_METHODS,
    column_rank_matrix,
    draw_rows,
    ridge_on_ranks,
    run_few_labels,
    summarise,
)
from autoprox.core.errors import RunDirError
from autoprox.data.proxy_tables import read_proxy_table
from tests.commands import one_error_line, run_cli


def write_table(path, rows=80, seed=0):
    """A table whose val_acc follows nwot (noisy), with params unrelated and a column of noise."""
    rng = np.random.default_rng(seed)
    nwot = rng.normal(size=rows)
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "val_acc", "params", "flops", "nwot", "noise"])
        for i in range(rows):
            writer.writerow([f"a{i}", 50 + 10 * nwot[i] + rng.normal(), rng.lognormal(), rng.lognormal(), nwot[i],
                             rng.normal()])
    return path


def test_ridge_on_ranks_is_the_outside_checks_ridge():
    rng = np.random.default_rng(0)
    features, targets = rng.random((25, 3)), rng.random(25)
    predict = ridge_on_ranks(features, targets, alphas=(1.0,))
    centred = features - features.mean(axis=0)
    weights = np.linalg.solve(centred.T @ centred + np.eye(3), centred.T @ (targets - targets.mean()))
    assert np.allclose(predict(features), centred @ weights)


def test_column_ranks_put_an_empty_cell_in_the_middle():
    matrix = column_rank_matrix({"a": np.array([3.0, np.nan, 1.0, 2.0]), "b": np.array([1.0, 2.0, 3.0, 4.0])})
    assert np.allclose(matrix[:, 0], [1.0, 0.5, 1 / 3, 2 / 3])


def test_a_draw_is_seeded_by_table_k_and_draw():
    labelled = np.arange(100)
    assert np.array_equal(draw_rows(labelled, 20, 0, "t", 1), draw_rows(labelled, 20, 0, "t", 1))
    assert not np.array_equal(draw_rows(labelled, 20, 0, "t", 1), draw_rows(labelled, 20, 0, "u", 1))
    assert len(set(draw_rows(labelled, 20, 0, "t", 1))) == 20


def test_baselines_find_the_informative_column(tmp_path):
    table = read_proxy_table(write_table(tmp_path / "t.csv"))
    truth = table.accuracies["val_acc"]
    labels = np.full(len(truth), np.nan)
    labels[:20] = truth[:20]
    for name in ("best-column", "ridge", "forest"):
        scores = FEW_LABEL_METHODS[name].fit(table.proxies, labels, 0)
        assert np.corrcoef(rankdata(scores[20:]), rankdata(truth[20:]))[0, 1] > 0.7, name


def test_the_protocol_records_means_differences_and_resumes(tmp_path):
    table = read_proxy_table(write_table(tmp_path / "t.csv"))
    out = tmp_path / "p"
    lines = []
    record = run_few_labels([(table, "val_acc")], [10, 60], 3, out, methods=["size", "ridge", "best-column"],
                            say=lines.append)
    entry = record["results"]["t"]["10"]
    assert len(entry["draws"]) == 3 and entry["mean"]["ridge"] > entry["mean"]["size"]
    assert "skipped" in record["results"]["t"]["60"] and any("k=60 skipped" in line for line in lines)
    with pytest.raises(Exception, match="already holds"):
        run_few_labels([(table, "val_acc")], [10, 60], 3, out, methods=["size", "ridge", "best-column"])
    again = run_few_labels([(table, "val_acc")], [10, 60], 3, out, methods=["size", "ridge", "best-column"],
                           resume=True, say=lines.append)
    assert again["results"] == record["results"]
    assert json.loads((out / "few_labels.json").read_text())["summary"]["10"]["tables"] == 1


def test_a_cell_interrupted_between_draws_keeps_its_finished_draws_and_the_resume_computes_only_the_rest(
        tmp_path, monkeypatch):
    """Ctrl-C inside a (table, k) cell: the draws finished are in the record, and the resume runs the others alone,
    to the figures of a run that was never interrupted."""
    from autoprox.apps.protocols import few_labels

    table = read_proxy_table(write_table(tmp_path / "t.csv"))
    options = dict(methods=["size", "ridge"], say=lambda line: None)
    whole = run_few_labels([(table, "val_acc")], [10], 4, tmp_path / "whole", **options)
    real, computed = few_labels._one_draw, []

    def draw_then_ctrl_c(*args):
        if args[5] == 2 and not computed.count("interrupted"):
            computed.append("interrupted")
            raise KeyboardInterrupt
        computed.append(args[5])
        return real(*args)

    monkeypatch.setattr(few_labels, "_one_draw", draw_then_ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        run_few_labels([(table, "val_acc")], [10], 4, tmp_path / "cut", **options)
    kept = json.loads((tmp_path / "cut" / "few_labels.json").read_text())
    assert kept["results"] == {} and kept["partial"] == {"t k=10": whole["results"]["t"]["10"]["draws"][:2]}
    lines = []
    again = run_few_labels([(table, "val_acc")], [10], 4, tmp_path / "cut", resume=True, **(options | {"say": lines.append}))
    assert computed == [0, 1, "interrupted", 2, 3]
    assert "resuming t k=10 at draw 3 of 4" in lines
    assert again["results"] == whole["results"] and "partial" not in again


def test_a_resume_with_more_repeats_extends_each_cell_to_the_figures_of_that_many_draws(tmp_path):
    """``--repeats`` larger on ``--resume`` extends a finished protocol by the new draws (the help said so, and the
    resume refused it as 'another protocol (repeats)'); none given keeps the recorded number; fewer is refused."""
    table = read_proxy_table(write_table(tmp_path / "t.csv"))
    options = dict(methods=["size", "ridge"], say=lambda line: None)
    whole = run_few_labels([(table, "val_acc")], [10, 20], 4, tmp_path / "whole", **options)
    run_few_labels([(table, "val_acc")], [10, 20], 2, tmp_path / "p", **options)
    lines = []
    kept = run_few_labels([(table, "val_acc")], [10, 20], None, tmp_path / "p", resume=True,
                          **(options | {"say": lines.append}))
    assert kept["spec"]["repeats"] == 2 and len(kept["results"]["t"]["10"]["draws"]) == 2
    assert not any("extended" in line for line in lines)
    extended = run_few_labels([(table, "val_acc")], [10, 20], 4, tmp_path / "p", resume=True,
                              **(options | {"say": lines.append}))
    assert "few labels: 2 draws per table and k recorded, extended to 4" in lines
    assert "resuming t k=10 at draw 3 of 4" in lines
    assert extended["spec"] == whole["spec"]
    for k in ("10", "20"):
        got, want = extended["results"]["t"][k], whole["results"]["t"][k]
        assert len(got["draws"]) == 4
        for method in ("size", "ridge"):
            assert got["mean"][method] == pytest.approx(want["mean"][method], abs=1e-12)
    on_disk = json.loads((tmp_path / "p" / "few_labels.json").read_text())
    assert on_disk["spec"]["repeats"] == 4 and "partial" not in on_disk
    with pytest.raises(RunDirError, match=r"other protocol options \(repeats\)"):
        run_few_labels([(table, "val_acc")], [10, 20], 3, tmp_path / "p", resume=True, **options)


def test_a_resume_of_a_record_nested_too_deeply_is_one_line(tmp_path):
    """Without ``--repeats`` the resume reads the recorded number first: a record nested 100,000 deep (a hand edit)
    is the one line the record's own reading gives, not a RecursionError traceback from that first look."""
    table = read_proxy_table(write_table(tmp_path / "t.csv"))
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "few_labels.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(RunDirError, match=r"few_labels.json: not a few-label protocol record \(nested too deeply"):
        run_few_labels([(table, "val_acc")], [10], None, tmp_path / "p", methods=["size"], resume=True,
                       say=lambda line: None)


def test_summarise_pairs_the_engine_with_each_method():
    draws = [{"engine": 0.5, "ridge": 0.4}, {"engine": 0.6, "ridge": 0.6}, {"engine": 0.7, "ridge": 0.5}]
    summary = summarise(draws)
    assert summary["difference"]["ridge"]["mean"] == pytest.approx(0.1)
    assert summary["difference"]["ridge"]["ahead"] == 2


@pytest.mark.slow
def test_cli_few_labels_runs_the_engine(tmp_path, capsys):
    path = write_table(tmp_path / "t.csv", rows=60)
    code, out, err = run_cli(capsys, "evaluate", "--few-labels", "15", "--repeats", "2", "--bench", path,
                             "--methods", "size,ridge,engine", "--out", tmp_path / "p", "--workers", "1")
    assert code == 0, err
    assert "engine-ridge" in out and "k=15 over 1 table:" in out
    record = json.loads((tmp_path / "p" / "few_labels.json").read_text())
    assert set(record["results"]["t"]["15"]["mean"]) == {"size", "ridge", "engine"}


def test_cli_few_labels_prints_the_table_and_refuses_bad_input(tmp_path, capsys):
    path = write_table(tmp_path / "t.csv", rows=60)
    code, out, err = run_cli(capsys, "evaluate", "--few-labels", "15", "--repeats", "2", "--bench", path,
                             "--methods", "size,ridge,forest", "--out", tmp_path / "p", "--workers", "1")
    assert code == 0, err
    assert "k=15 over 1 table:" in out and "forest" in out
    code, out, err = run_cli(capsys, "evaluate", "--few-labels", "3", "--bench", path, "--out", tmp_path / "q")
    assert code == 2 and "at least 5" in one_error_line(err)
    code, out, err = run_cli(capsys, "evaluate", "--few-labels", "10", "--bench", path, "--methods", "magic",
                             "--out", tmp_path / "r")
    assert code == 2 and "magic" in one_error_line(err)


def test_the_report_draws_mean_kendall_against_k_one_panel_per_table(tmp_path, capsys):
    table = read_proxy_table(write_table(tmp_path / "t.csv"))
    run_few_labels([(table, "val_acc")], [10, 20], 2, tmp_path / "p", methods=["size", "ridge"], say=lambda _: None)
    code, out, err = run_cli(capsys, "report", tmp_path / "p", "--out", tmp_path / "r.html")
    assert code == 0, err
    page = (tmp_path / "r.html").read_text()
    assert page.count("<svg") == 1 and "figure-few-labels" in page and "labelled rows k" in page
    assert '<h2 id="table-t">' in page


@pytest.mark.parametrize("options, said", [
    (("--few-labels", "10", "--repeats", "0"), "--repeats must be at least 1, got 0"),
    (("--few-labels", "5", "--repeats", "1"), "the engine's search needs at least 10 labelled rows"),
])
def test_few_labels_refuses_zero_repeats_and_a_k_the_engine_cannot_search_before_writing(options, said, tmp_path,
                                                                                          capsys):
    """``--repeats 0`` ran 10 repeats; k=5 with the engine failed in the first draw, after the record was written."""
    path = write_table(tmp_path / "t.csv", rows=40)
    code, out, err = run_cli(capsys, "evaluate", *options, "--bench", path, "--out", tmp_path / "p")
    assert code == 2 and said in one_error_line(err)
    assert not (tmp_path / "p").exists()


def test_evaluate_refuses_a_negative_bootstrap_before_reading_anything(capsys):
    code, out, err = run_cli(capsys, "evaluate", "--leave-space-out", "--bootstrap", "-1", "--space", "pit",
                             "--space", "autoformer", "--out", "/nonexistent/never")
    assert code == 2 and "--bootstrap must be at least 0" in one_error_line(err)


def test_few_labels_on_a_constant_target_names_file_and_column_and_writes_nothing(tmp_path, capsys):
    """It said ``table: target 'target' has the same value ...`` and wrote few_labels.json with no results."""
    path = tmp_path / "const.csv"
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "score", "params", "flops", "nwot"])
        writer.writerows([[f"a{i}", 5, i, 30 - i, i % 7] for i in range(30)])
    code, out, err = run_cli(capsys, "evaluate", "--few-labels", "10", "--repeats", "1", "--bench", path,
                             "--out", tmp_path / "p")
    assert code == 2
    line = one_error_line(err)
    assert str(path) in line and "target 'score'" in line and "constant value" in line
    assert not (tmp_path / "p").exists()


def test_a_draw_of_equal_labels_is_refused_before_anything_is_written(tmp_path, capsys):
    """It failed in that draw, after the cells before it had run and been written."""
    path = tmp_path / "mostly.csv"
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "score", "params", "flops", "nwot"])
        writer.writerows([[f"a{i}", 7 if i < 3 else 5, i, 30 - i, i % 7] for i in range(30)])
    table = read_proxy_table(path)
    labelled = np.arange(30)
    first = next((k, draw) for k in (5, 10) for draw in range(20)
                 if np.all(table.accuracies["score"][draw_rows(labelled, k, 0, table.name, draw)] == 5))
    code, out, err = run_cli(capsys, "evaluate", "--few-labels", "5,10", "--repeats", "20", "--bench", path,
                             "--methods", "size,ridge", "--out", tmp_path / "p")
    assert code == 2 and out == ""
    line = one_error_line(err)
    assert f"the {first[0]} labelled rows of draw {first[1]} all have score = 5" in line and "--protocol-seed" in line
    assert not (tmp_path / "p").exists()


def test_few_labels_keeps_out_of_a_user_folder_and_of_a_file(tmp_path, capsys):
    """A folder holding important.txt was written into; an --out that is a file was a FileExistsError traceback."""
    path = write_table(tmp_path / "t.csv", rows=40)
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "important.txt").write_text("keep")
    (tmp_path / "user.json").write_text("{}")
    for out, said in ((folder, "is not empty and holds no few_labels.json"), (tmp_path / "user.json", "is a file")):
        code, _, err = run_cli(capsys, "evaluate", "--few-labels", "10", "--repeats", "1", "--bench", path,
                               "--methods", "size", "--out", out)
        assert code == 2 and said in one_error_line(err)
    assert sorted(p.name for p in folder.iterdir()) == ["important.txt"]
    assert (tmp_path / "user.json").read_text() == "{}"
    code, _, err = run_cli(capsys, "evaluate", "--few-labels", "10", "--repeats", "1", "--bench", path,
                           "--methods", "size", "--out", tmp_path / "p")
    assert code == 0, err
    code, _, err = run_cli(capsys, "evaluate", "--few-labels", "10", "--repeats", "1", "--bench", path,
                           "--methods", "size", "--out", tmp_path / "p", "--resume")
    assert code == 0, err  # its own record goes on


def test_few_labels_shows_the_progress_of_its_draws_unless_quiet(tmp_path, capsys):
    path = write_table(tmp_path / "t.csv", rows=40)
    code, _, err = run_cli(capsys, "evaluate", "--few-labels", "10", "--repeats", "3", "--bench", path,
                           "--methods", "size,ridge", "--out", tmp_path / "p")
    assert code == 0, err
    assert "t k=10 draws [" in err and "3/3" in err
    code, _, err = run_cli(capsys, "evaluate", "--few-labels", "10", "--repeats", "3", "--bench", path,
                           "--methods", "size,ridge", "--out", tmp_path / "q", "--quiet")
    assert code == 0, err
    assert "draws [" not in err


def test_few_labels_refuses_an_option_it_does_not_read_before_writing(tmp_path, capsys):
    """``--iterations 1`` and ``--iterations 80`` gave the same figures, ``--batch-size`` was accepted: none is read."""
    path = write_table(tmp_path / "t.csv", rows=40)
    for option in (("--iterations", "1"), ("--batch-size", "4"), ("--population", "8"), ("--seed", "3")):
        code, out, err = run_cli(capsys, "evaluate", "--few-labels", "10", "--repeats", "1", "--bench", path,
                                 *option, "--methods", "size", "--out", tmp_path / "p")
        line = one_error_line(err)
        assert code == 2 and f"{option[0]} does not apply to the few-label protocol" in line and "--methods" in line
    assert not (tmp_path / "p").exists()


def write_two_targets(path, rows=40):
    rng = np.random.default_rng(1)
    nwot = rng.normal(size=rows)
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "val_acc", "test_acc", "params", "flops", "nwot"])
        writer.writerows([[f"a{i}", 50 + nwot[i] + rng.normal(), 50 - nwot[i] + rng.normal(), rng.lognormal(),
                           rng.lognormal(), nwot[i]] for i in range(rows)])
    return path


def test_few_labels_runs_every_target_of_a_table_as_its_own_entry(tmp_path, capsys):
    """``--targets a,b`` ran only the first target."""
    path = write_two_targets(tmp_path / "t.csv")
    code, out, err = run_cli(capsys, "evaluate", "--few-labels", "10", "--repeats", "2", "--bench", path,
                             "--targets", "val_acc,test_acc", "--methods", "size,best-column", "--out", tmp_path / "p")
    assert code == 0, err
    record = json.loads((tmp_path / "p" / "few_labels.json").read_text())
    assert list(record["results"]) == ["t/val_acc", "t/test_acc"]
    assert [t["target"] for t in record["spec"]["tables"]] == ["val_acc", "test_acc"]
    assert record["results"]["t/val_acc"]["10"]["mean"] != record["results"]["t/test_acc"]["10"]["mean"]
    assert "t/test_acc" in out and "k=10 over 1 table, 2 (table, target) pairs:" in out
    one = run_few_labels([(read_proxy_table(path), "test_acc")], [10], 2, tmp_path / "q",
                         methods=["size", "best-column"], say=lambda _: None)
    assert one["results"]["t"]["10"]["draws"] == record["results"]["t/test_acc"]["10"]["draws"]  # the same draws


def test_few_labels_on_a_packaged_space_takes_the_given_target(tmp_path, capsys):
    """``--space pit --targets flower_kd`` ran the space's first target, c100_kd."""
    code, out, err = run_cli(capsys, "evaluate", "--few-labels", "10", "--repeats", "1", "--space", "pit",
                             "--targets", "flower_kd", "--methods", "size", "--out", tmp_path / "p", "--quiet")
    assert code == 0, err
    record = json.loads((tmp_path / "p" / "few_labels.json").read_text())
    assert [t["target"] for t in record["spec"]["tables"]] == ["flower_kd"]
    code, out, err = run_cli(capsys, "evaluate", "--few-labels", "10", "--repeats", "1", "--space", "pit",
                             "--targets", "nope", "--methods", "size", "--out", tmp_path / "q")
    assert code == 2 and "nope" in one_error_line(err) and not (tmp_path / "q").exists()


def test_few_labels_with_no_k_a_table_allows_is_refused_naming_the_largest(tmp_path, capsys):
    """Every k was skipped (above 60 % of the labelled rows) and it exited 0 with an empty record."""
    path = write_table(tmp_path / "t.csv", rows=60)
    code, out, err = run_cli(capsys, "evaluate", "--few-labels", "50", "--repeats", "1", "--bench", path,
                             "--methods", "size", "--out", tmp_path / "p")
    line = one_error_line(err)
    assert code == 2 and "--few-labels 50" in line and "the largest k: t 36" in line
    assert not (tmp_path / "p").exists()


def test_fewer_than_five_draws_give_no_interval_and_the_count_says_tables_and_targets(tmp_path, capsys):
    """From 2 draws the "95 % bootstrap interval" was [min, max], often of zero width; one table with two targets
    was "2 tables"."""
    path = write_two_targets(tmp_path / "t.csv")
    code, out, err = run_cli(capsys, "evaluate", "--few-labels", "10", "--repeats", "2", "--bench", path,
                             "--targets", "val_acc,test_acc", "--methods", "size,ridge,engine", "--out", tmp_path / "p",
                             "--workers", "1", "--quiet")
    assert code == 0, err
    record = json.loads((tmp_path / "p" / "few_labels.json").read_text())
    assert record["results"]["t/val_acc"]["10"]["difference"]["ridge"]["interval"] is None
    assert "n/a (2 draws; needs --repeats 5+)" in out and "over 1 table, 2 (table, target) pairs" in out
    code, _, err = run_cli(capsys, "report", tmp_path / "p", "--out", tmp_path / "r.html")
    page = (tmp_path / "r.html").read_text()
    assert code == 0 and "Few-label protocol: 1 table, 2 (table, target) pairs" in page and "2 tables" not in page
    assert "n/a (2 draws" in page
    assert summarise([{"engine": 0.1 * i, "ridge": 0.0} for i in range(5)])["difference"]["ridge"]["interval"]


def test_methods_given_twice_or_empty_are_refused(tmp_path, capsys):
    """``--methods ridge,ridge`` gave two ridge columns; ``--methods ''`` meant every method."""
    table = read_proxy_table(write_table(tmp_path / "t.csv", rows=40))
    for methods, said in ((["ridge", "ridge"], "ridge is given twice"), ([], "an empty list")):
        with pytest.raises(Exception, match=f"--methods: {said}"):
            run_few_labels([(table, "val_acc")], [10], 2, tmp_path / "p", methods=methods)
    assert not (tmp_path / "p").exists()


def test_an_interrupted_protocol_says_the_command_that_goes_on(tmp_path, capsys):
    """Ctrl-C printed only "interrupted", without the command that resumes."""
    from autoprox.apps.protocols.few_labels import register_few_label_method

    def interrupt(columns, labels, seed):
        raise KeyboardInterrupt

    register_few_label_method("interrupting", interrupt, "raises KeyboardInterrupt")
    try:
        path = write_table(tmp_path / "t.csv", rows=40)
        code, _, err = run_cli(capsys, "evaluate", "--few-labels", "10", "--repeats", "2", "--bench", path,
                               "--methods", "size,interrupting", "--out", tmp_path / "p", "--workers", "1", "--quiet")
    finally:
        FEW_LABEL_METHODS.unregister("interrupting")
    assert code == 130
    assert (f"continue with: autoprox evaluate --few-labels 10 --bench {path} --methods size,interrupting "
            f"--repeats 2 --resume --out {tmp_path / 'p'}") in err


def test_a_method_that_ranks_nothing_scores_zero_not_nan(tmp_path):
    """A draw's figure is Kendall or 0 where undefined (:func:`autoprox.core.correlation.kendall_or_zero`): a
    constant score, or one finite on fewer than 3 judged rows, counts as chance in the means, never NaN."""
    from autoprox.apps.protocols.few_labels import register_few_label_method

    def constant(columns, labels, seed):
        return np.ones(len(labels))

    def two_rows(columns, labels, seed):
        scores = np.full(len(labels), np.nan)
        scores[np.flatnonzero(np.isnan(labels))[:2]] = [1.0, 2.0]
        return scores

    register_few_label_method("constant", constant, "one score for every row")
    register_few_label_method("two-rows", two_rows, "scores two unlabelled rows")
    try:
        table = read_proxy_table(write_table(tmp_path / "t.csv", rows=40))
        record = run_few_labels([(table, "val_acc")], [10], 2, tmp_path / "p",
                                methods=["size", "constant", "two-rows"], say=lambda _: None)
    finally:
        FEW_LABEL_METHODS.unregister("constant")
        FEW_LABEL_METHODS.unregister("two-rows")
    draws = record["results"]["t"]["10"]["draws"]
    assert [d["constant"] for d in draws] == [0.0, 0.0] and [d["two-rows"] for d in draws] == [0.0, 0.0]
    assert all(d["size"] != 0.0 for d in draws)
