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
