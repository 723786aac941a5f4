"""Values a command cannot use are refused before any work, in one line with exit 2 (an adversarial pass of
2026-12-06 found each accepted, or failing with a traceback)."""

from __future__ import annotations

import pytest

from autoprox.cli.main import main
from tests.conftest import REPO

REFERENCE = REPO / "runs" / "pit-reference"


def _refused(capsys, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    return capsys.readouterr().err


@pytest.mark.parametrize("argv, says", [
    (["show", str(REFERENCE), "--timeout", "-1"], "--timeout: expected a number in [0, inf]"),
    (["export", str(REFERENCE), "--out", "x.py", "--timeout", "-0.5"], "--timeout: expected a number in [0, inf]"),
    (["export", str(REFERENCE), "--out", "x.py", "--rank", "0"], "--rank: expected at least 1, got 0"),
    (["spaces", "pit", "--classes", "0"], "--classes: expected at least 1, got 0"),
    (["vit-search", "--space", "pit", "--samples", "0"], "--samples: expected at least 1, got 0"),
    (["vit-search", "--space", "pit", "--top", "-2"], "--top: expected at least 1, got -2"),
    (["vit-search", "--space", "pit", "--classes", "-1"], "--classes: expected at least 1, got -1"),
    # counts a typo makes huge: each ran for days (--workers beyond joblib's limit: a traceback after writing)
    (["evaluate", "--few-labels", "20", "--repeats", "10000000", "--bench", "t.csv", "--out", "p"],
     "--repeats: expected at most 1,000, got 10,000,000"),
    (["search", "--bench", "t.csv", "--targets", "val_acc", "--iterations", "10000000", "--out", "r"],
     "--iterations: expected at most 1,000,000, got 10,000,000"),
    (["evaluate", "--few-labels", "20", "--bench", "t.csv", "--workers", "100000000", "--out", "p"],
     "--workers: expected at most 1,024, got 100,000,000"),
    (["evaluate", "--space", "pit", "--fold-workers", "5000", "--out", "p"],
     "--fold-workers: expected at most 1,024, got 5,000"),
    (["evaluate", "--space", "pit", "--bags", "1001", "--out", "p"], "--bags: expected at most 1,000, got 1,001"),
    (["evaluate", "--leave-space-out", "--rank-formulas", "--space", "nb201", "--space", "pit", "--seeds", "5000",
      "--out", "p"], "--seeds: expected at most 1,000, got 5,000"),
    (["evaluate", "--leave-space-out", "--space", "autoformer", "--space", "pit", "--bootstrap", "10000000",
      "--out", "p"], "--bootstrap: expected at most 1,000,000, got 10,000,000"),
    # a population a typo makes huge: its initial population alone ran for hours (second pass, 2026-12-07)
    (["search", "--space", "pit", "--population", "1000000000", "--out", "r"],
     "--population: expected at most 100,000, got 1,000,000,000"),
    # an empty path was read as "the default": each wrote into runs/... of the current folder
    (["search", "--space", "pit", "--out", ""], "--out: an empty path"),
    (["evaluate", "--space", "pit", "--out", " "], "--out: an empty path"),
    (["transfer", "--space", "pit", "--out", ""], "--out: an empty path"),
    (["vit-search", "--space", "pit", "--out", ""], "--out: an empty path"),
    (["rank", "--proxy", "params", "--space", "pit", "--cache-dir", ""], "--cache-dir: an empty path"),
])
def test_a_value_out_of_range_is_a_usage_error(capsys, tmp_path, monkeypatch, argv, says):
    monkeypatch.chdir(tmp_path)
    assert says in _refused(capsys, argv)
    assert list(tmp_path.iterdir()) == []


def test_a_file_given_as_a_run_directory_is_named(capsys, tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("mine\n")
    assert main(["select", str(notes), "--selection", "best", "--out", str(tmp_path / "s.json")]) == 2
    assert f"{notes} is a file, not a run directory" in capsys.readouterr().err
    assert notes.read_text() == "mine\n" and not (tmp_path / "s.json").exists()


def test_vit_search_refuses_a_target_no_proxy_uses(capsys, tmp_path):
    out = tmp_path / "vit"
    assert main(["vit-search", "--space", "pit", "--proxy", str(REFERENCE / "best.json"), "--samples", "2",
                 "--target", "nope", "--out", str(out)]) == 2
    assert "--target nope chooses the members of a per-target ensemble file" in capsys.readouterr().err
    assert not out.exists()


def test_score_offers_none_of_rank_s_figure_options(capsys):
    with pytest.raises(SystemExit):
        main(["score", "--help"])
    text = capsys.readouterr().out
    assert "--out" in text and "--proxy" in text
    for option in ("--json", "--seeds", "--format", "--split", "--search-fraction"):
        assert option not in text, option
    assert "prints the ranking table" not in " ".join(text.split())


def test_a_run_directory_stands_for_its_best_proxy_as_export_reads_it(capsys, tmp_path):
    import json

    assert main(["rank", "--proxy", str(REFERENCE), "--space", "pit", "--json"]) == 0
    by_folder = json.loads(capsys.readouterr().out)
    assert main(["rank", "--proxy", str(REFERENCE / "best.json"), "--space", "pit", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == by_folder and by_folder["c100_kd"]["n"] == 40  # the run's test part
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["rank", "--proxy", str(empty), "--space", "pit"]) == 2
    assert f"--proxy {empty}: a folder without best.json" in capsys.readouterr().err


def test_a_count_at_its_bound_is_taken(capsys, tmp_path):
    """The bounds refuse typos, not large runs: the largest value of each is accepted (up to the check that
    follows it, here the table's labelled rows)."""
    from tests.apps.protocols.test_few_labels import write_table

    table = write_table(tmp_path / "t.csv", rows=20)
    assert main(["evaluate", "--few-labels", "20", "--repeats", "1000", "--bench", str(table), "--workers", "1024",
                 "--out", str(tmp_path / "p")]) == 2
    assert "no table has enough labelled rows" in capsys.readouterr().err
    assert not (tmp_path / "p").exists()


@pytest.mark.parametrize("argv, says", [
    # sizes a typo makes huge: a minibatch of 10^8 images was built before any check, failing deep in torch
    (["search", "--space", "pit", "--batch-size", "100000000", "--out", "r"],
     "--batch-size: expected at most 1,024, got 100,000,000"),
    (["rank", "--proxy", "snip", "--space", "pit", "--batch-size", "5000"], "--batch-size: expected at most 1,024, got 5,000"),
    (["vit-search", "--space", "pit", "--top", "10000000000"], "--top: expected at most 1,000,000, got 10,000,000,000"),
    (["show", str(REFERENCE), "--top", "100000000000000000000"],
     "--top: expected at most 10,000, got 100,000,000,000,000,000,000"),
    (["curves", str(REFERENCE), "--out", "c.png", "--window", "100000000000"],
     "--window: expected at most 1,000,000, got 100,000,000,000"),
])
def test_a_size_past_its_bound_is_a_usage_error(capsys, tmp_path, monkeypatch, argv, says):
    monkeypatch.chdir(tmp_path)
    err = _refused(capsys, argv)
    assert says in err and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


def test_a_run_proxy_ranked_on_another_space_ranks_every_architecture(finished_run, pit_bench, session_cache,
                                                                       tmp_path, capsys):
    """The run's recorded split numbers its own space's architectures: ranked on another space's benchmark of
    the same size it used to pick that benchmark's 'test' architectures by the run's indices."""
    import json

    from autoprox.data.benchmark import write_benchmark_jsonl
    from autoprox.spaces.architectures import count_params

    config = json.loads((finished_run / "config.json").read_text())
    size = len(config["split"]["search"]) + len(config["split"]["test"])
    order = sorted(range(len(pit_bench)), key=lambda i: count_params(pit_bench.archs[i]))
    pit = tmp_path / "pit.jsonl"
    write_benchmark_jsonl(pit_bench.subset(sorted(order[:size])), pit)
    assert main(["rank", "--proxy", str(finished_run), "--bench", str(pit), "--batch-size", "2", "--workers", "1",
                 "--cache-dir", str(session_cache.root), "--targets", "c100_kd", "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["c100_kd"]["n"] == size
    assert f"split: all, every architecture of pit: the search of {finished_run / 'best.json'} was on autoformer" in err


def test_a_refused_transfer_study_leaves_no_folder(capsys, tmp_path):
    """Refused after its folder was made, the empty folder used to stay behind (evaluate removes its own)."""
    out = tmp_path / "study"
    assert main(["transfer", "--space", "pit", "--targets", "c100_kd", "--out", str(out)]) == 2
    assert "give at least two targets, got 1" in capsys.readouterr().err
    assert not out.exists()


def test_select_names_an_empty_out(capsys, tmp_path):
    """``select RUN --out ''`` said ". already exists" (Path("") is the current folder)."""
    assert main(["select", str(REFERENCE), "--out", ""]) == 2
    assert capsys.readouterr().err.strip() == "autoprox: error: --out is empty: give the file to write"
