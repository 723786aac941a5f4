"""A run whose files were edited by hand (a value of the wrong type, a key removed) is read as far as it can be,
or refused in one line naming the file; never a traceback (a second adversarial pass of 2026-12-07 found show,
report, curves and select ending in AttributeError, KeyError and TypeError)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autoprox.cli.main import main


def _edit(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def _no_genome(best: dict) -> None:
    del best["genome"]


def _wrong_types(best: dict) -> None:
    best.update(genome=5, search="x", targets=7)


@pytest.mark.parametrize("change", [_no_genome, _wrong_types])
def test_show_reads_a_run_whose_best_json_lost_its_genome(run_copy, capsys, change):
    _edit(run_copy / "best.json", change)
    assert main(["show", str(run_copy), "--no-simplify"]) == 0
    out, err = capsys.readouterr()
    assert "hall of fame" in out
    assert f"{run_copy / 'best.json'}: no 'genome' string; shown without it" in err


@pytest.mark.parametrize("change, says", [(_no_genome, "no 'genome' string"),
                                          (_wrong_types, "'targets' is not a list of target names")])
@pytest.mark.parametrize("selection", ["best", "cv-pick"])
def test_select_names_a_best_json_without_a_genome(run_copy, tmp_path, capsys, change, says, selection):
    _edit(run_copy / "best.json", change)
    out = tmp_path / "chosen.json"
    assert main(["select", str(run_copy), "--selection", selection, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"autoprox: error: {run_copy / 'best.json'}: {says}"
    assert not out.exists()


def _settings_of_wrong_types(config: dict) -> None:
    config["settings"].update(targets=5, weights=[1])


def test_curves_draw_a_run_whose_recorded_targets_are_not_a_list(run_copy, tmp_path, capsys):
    _edit(run_copy / "config.json", _settings_of_wrong_types)
    png = tmp_path / "curves.png"
    assert main(["curves", str(run_copy), "--out", str(png), "--csv"]) == 0
    header = (tmp_path / "curves.csv").read_text().splitlines()[0]
    assert "c100_kd" in header  # the targets the log names
    capsys.readouterr()


def test_report_writes_a_run_whose_recorded_settings_are_of_the_wrong_types(run_copy, tmp_path, capsys):
    _edit(run_copy / "config.json", _settings_of_wrong_types)
    _edit(run_copy / "best.json", _wrong_types)
    page = tmp_path / "report.html"
    assert main(["report", str(run_copy), "--out", str(page), "--no-simplify"]) == 0
    assert "<html" in page.read_text()
    capsys.readouterr()



def test_resume_names_a_bad_log_line_before_any_statistics(af_tiny_file, session_cache, tmp_path, capsys):
    """``search --resume`` of a counted-evaluation run counted its statistics (computing those missing) before it
    named a broken log line."""
    run = tmp_path / "run"
    assert main(["search", "--bench", str(af_tiny_file), "--evaluation", "counted", "--iterations", "2",
                 "--population", "2", "--batch-size", "2", "--workers", "1", "--search-fraction", "0.75",
                 "--cache-dir", str(session_cache.root), "--out", str(run), "--quiet"]) == 0
    log = run / "log.jsonl"
    lines = log.read_text().splitlines()
    log.write_text("\n".join([lines[0], "garbage", *lines[1:]]) + "\n")
    cache = tmp_path / "fresh-cache"
    capsys.readouterr()
    assert main(["search", "--resume", "--out", str(run), "--iterations", "3", "--cache-dir", str(cache),
                 "--quiet"]) == 2
    assert capsys.readouterr().err.strip() == f"autoprox: error: {log}: line 2 is not valid JSON (Expecting value)"
    assert not cache.exists() or not any(p.is_file() for p in cache.rglob("*"))


@pytest.mark.parametrize("params", ["x", 5, [1, 2]])
def test_show_reads_a_run_whose_best_json_params_are_not_an_object(run_copy, capsys, params):
    """``best.json``'s parameter-count figures edited to a string, a number or a list ended ``show`` in
    ``AttributeError: 'str' object has no attribute 'get'`` (its verdict line read them); the verdict is left out."""
    _edit(run_copy / "best.json", lambda best: best.update(params=params))
    assert main(["show", str(run_copy), "--no-simplify"]) == 0
    out, err = capsys.readouterr()
    assert "hall of fame" in out and "against the parameter count's" not in out and "Traceback" not in err
