"""Evolution curves: PNG and CSV from log.jsonl, overlay of runs, parameter-count reference, errors."""

from __future__ import annotations

import csv
import json
import math
import shutil
import struct
from pathlib import Path

import pytest

from autoprox.cli.main import main
from autoprox.reports.curves import DEFAULT_WINDOW, load_curves, rolling_rate
from autoprox.search.rundir import RunDirectory
from tests.conftest import REPO, SEARCHED_EVOLUTION, SMALL_EVOLUTION

pytestmark = pytest.mark.slow

#: The iterations of the two runs the tests read: conftest's searched_run (seed1) and finished_run (seed2).
FIRST, SECOND = SEARCHED_EVOLUTION.iterations, SMALL_EVOLUTION.iterations
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def runs(searched_run, finished_run, tmp_path_factory):
    """Two searches of other seeds and lengths on the 16 small AutoFormer architectures: copies (named as the
    curves name them) of the session's two runs, which other files read too."""
    folder = tmp_path_factory.mktemp("runs")
    shutil.copytree(searched_run[0], folder / "seed1")
    shutil.copytree(finished_run, folder / "seed2")
    return folder / "seed1", folder / "seed2"


def run_cli(capsys, *argv):
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _csv_rows(path) -> list[dict]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def _png_size(path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC
    return struct.unpack(">II", data[16:24])


def test_curves_png_and_csv_hold_the_logged_numbers(runs, capsys, tmp_path):
    run, _ = runs
    out = tmp_path / "curves.png"
    code, text, err = run_cli(capsys, "curves", str(run), "--out", str(out), "--csv")
    assert code == 0, err
    width, height = _png_size(out)
    assert width > 500 and height > 500
    rows = _csv_rows(tmp_path / "curves.csv")
    log = RunDirectory(run).log()
    assert [int(r["iteration"]) for r in rows] == [r["iteration"] for r in log] == list(range(1, FIRST + 1))
    best = json.loads((run / "best.json").read_text())
    for row, record in zip(rows, log):
        assert float(row["best_jcm"]) == record["best_jcm"] and float(row["mean_jcm"]) == record["mean_jcm"]
        for target, tau in record["best_kendall"].items():
            assert float(row[f"kendall_{target}"]) == tau
        assert int(row["accepted"]) == int(record["accepted"]) and int(row["attempts"]) == record["attempts"]
        assert float(row["params_jcm"]) == best["params"]["search"]["jcm"]
    window = log[-DEFAULT_WINDOW:]
    expected = sum(r["accepted"] for r in window) / sum(r["attempts"] for r in window)
    assert float(rows[-1]["acceptance_rate"]) == pytest.approx(expected)
    assert "wrote" in text


def test_rolling_acceptance_rate():
    assert rolling_rate([True, False, False, True], [2, 4, 4, 1], window=2) == [0.5, 1 / 6, 0.0, 1 / 5]
    assert math.isnan(rolling_rate([False], [0], window=3)[0])


def test_parameter_count_reference_is_computed_when_best_json_is_missing(runs, tmp_path):
    run, _ = runs
    going = tmp_path / "going"
    shutil.copytree(run, going)
    expected = json.loads((going / "best.json").read_text())["params"]["search"]["jcm"]
    (going / "best.json").unlink()
    with open(going / "log.jsonl", "a") as handle:
        handle.write(f'{{"iteration": {FIRST + 1}, "best_jc')  # a run in progress: torn last line
    curves = load_curves(going)
    assert curves.iterations == list(range(1, FIRST + 1))
    assert curves.params_note == "computed from the benchmark"
    assert curves.params_jcm == pytest.approx(expected, abs=1e-12)


def test_several_runs_are_overlaid(runs, capsys, tmp_path):
    out = tmp_path / "both.png"
    code, _, err = run_cli(capsys, "curves", *map(str, runs), "--out", str(out), "--csv", str(tmp_path / "n.csv"))
    assert code == 0, err
    _png_size(out)
    rows = _csv_rows(tmp_path / "n.csv")
    assert [r["run"] for r in rows] == ["seed1"] * FIRST + ["seed2"] * SECOND
    single = tmp_path / "single.png"
    run_cli(capsys, "curves", str(runs[0]), "--out", str(single))
    assert out.read_bytes() != single.read_bytes()


def test_curves_errors_are_one_line(runs, capsys, tmp_path):
    code, _, err = run_cli(capsys, "curves", str(tmp_path), "--out", str(tmp_path / "c.png"))
    assert code == 2 and "not a run directory" in err and len(err.strip().splitlines()) == 1
    blocker = tmp_path / "file"
    blocker.write_text("")
    code, _, err = run_cli(capsys, "curves", str(runs[0]), "--out", str(blocker / "c.png"))
    assert code == 2 and err.startswith("autoprox: error: cannot write") and len(err.strip().splitlines()) == 1
    empty = tmp_path / "empty"
    shutil.copytree(runs[0], empty)
    (empty / "log.jsonl").write_text("")
    code, _, err = run_cli(capsys, "curves", str(empty), "--out", str(tmp_path / "e.png"))
    assert code == 2 and "no iteration" in err


def test_curves_out_a_link_writes_its_target_and_a_loop_of_links_is_refused(capsys, tmp_path):
    """``--out LINK`` used to replace the link by a regular file, and a loop of links was "wrote", exit 0.
    The committed reference run is enough: its log and best.json hold every plotted number."""
    run = str(REPO / "runs" / "pit-reference")
    target = tmp_path / "real.png"
    link = tmp_path / "curves.png"
    link.symlink_to(target)
    for _ in range(2):  # a link to nothing yet, then a link to the PNG curves drew the first time
        code, text, err = run_cli(capsys, "curves", run, "--out", str(link))
        assert code == 0, err
        assert link.is_symlink() and target.read_bytes()[:8] == PNG_MAGIC
    target.write_bytes(b"old")  # a link to a file curves did not write: refused, the file left as it is
    code, text, err = run_cli(capsys, "curves", run, "--out", str(link))
    assert code == 2 and "was not written by `autoprox curves`" in err and target.read_bytes() == b"old"
    (tmp_path / "loopA").symlink_to(tmp_path / "loopB")
    (tmp_path / "loopB").symlink_to(tmp_path / "loopA")
    for argv in (["--out", str(tmp_path / "loopA")], ["--out", str(tmp_path / "c.png"), "--csv", str(tmp_path / "loopA")]):
        code, text, err = run_cli(capsys, "curves", run, *argv)
        assert code == 2 and text == "" and len(err.strip().splitlines()) == 1, err
        assert "it goes through a loop of symbolic links; choose another " + ("--out" if argv[1].endswith("loopA") else "--csv") in err
        assert (tmp_path / "loopA").is_symlink() and not (tmp_path / "c.png").exists()


def test_curves_of_a_table_run_label_its_fitness_and_claim_no_reference(tmp_path, capsys, runs):
    from autoprox.reports.curves import draw, is_curves_png
    from autoprox.search.table_run import run_table_search
    from tests.search.test_table_search import SMALL, write_table

    path, _, _ = write_table(tmp_path / "t.csv", rows=40, labelled=30, seed=5)
    run_table_search(path, ["val_acc"], tmp_path / "run", SMALL, quiet=True)
    out = tmp_path / "c.png"
    code, text, err = run_cli(capsys, "curves", str(tmp_path / "run"), "--out", str(out), "--csv")
    assert code == 0 and err == "", err
    assert is_curves_png(out.read_bytes()[:4096])
    rows = _csv_rows(tmp_path / "c.csv")
    assert list(rows[0]) == ["run", "iteration", "best_oob_r2", "mean_oob_r2", "kendall_val_acc", "accepted",
                             "attempts", "acceptance_rate"]
    log = [json.loads(line) for line in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    assert [float(r["best_oob_r2"]) for r in rows] == [r["best_jcm"] for r in log]
    code, _, err = run_cli(capsys, "curves", str(tmp_path / "run"), "--out", str(out), "--csv")
    assert code == 0, err  # its own files are recognised and rewritten
    figure = draw([load_curves(tmp_path / "run")])
    words = " ".join([a.get_ylabel() + " " + a.get_title() for a in figure.axes]
                     + [t.get_text() for a in figure.axes if a.get_legend() for t in a.get_legend().get_texts()])
    assert "out-of-bag R2" in words and "out-of-bag Kendall" in words
    assert "JCM" not in words and "parameter count" not in words and "search split" not in words
    code, _, err = run_cli(capsys, "curves", str(tmp_path / "run"), str(runs[0]), "--out", str(tmp_path / "m.png"))
    assert code == 2 and "their curves do not share axes" in err and not (tmp_path / "m.png").exists()


def test_curves_refuses_an_out_not_named_for_what_it_writes(capsys, tmp_path):
    """``--out c5.txt`` wrote a PNG named .txt, ``--csv n.png`` numbers named .png."""
    from tests.commands import one_error_line, run_cli

    run = str(REPO / "runs" / "pit-reference")
    code, _, err = run_cli(capsys, "curves", run, "--out", tmp_path / "c5.txt")
    assert code == 2 and "its name ends in .png" in one_error_line(err) and not (tmp_path / "c5.txt").exists()
    code, _, err = run_cli(capsys, "curves", run, "--out", tmp_path / "c.png", "--csv", tmp_path / "n.png")
    assert code == 2 and "its name ends in .csv" in one_error_line(err) and not (tmp_path / "c.png").exists()
