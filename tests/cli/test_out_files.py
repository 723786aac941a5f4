"""``--out`` of the commands that write a file or a folder where the user says: a file or folder autoprox did
not write is refused in one line, exit 2, and left as it is; running a command again over its own output works.

A tester's reproductions: ``score --bench mine.csv --out mine.csv`` replaced the input table; ``export``,
``report`` and ``curves`` replaced a run's ``best.json`` or a user's ``notes.txt``; ``vit-search`` and
``transfer`` wrote into a folder of the user's files; ``score --out DIR`` and ``--out ''`` were tracebacks.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from autoprox.core.errors import RunDirError
from tests.commands import PUBLISHED, one_error_line, run_cli
from tests.conftest import REPO

REFERENCE = REPO / "runs" / "pit-reference"
TABLE = REPO / "examples" / "timm_imagenet.csv"


@pytest.fixture
def run(tmp_path) -> Path:
    """A copy of the committed reference run (its best.json and log are all ``export`` and ``curves`` read)."""
    return Path(shutil.copytree(REFERENCE, tmp_path / "run"))


@pytest.fixture
def notes(tmp_path) -> Path:
    path = tmp_path / "notes.txt"
    path.write_text("my notes\n")
    return path


def refused(capsys, command: str, *argv) -> str:
    """The one error line of ``autoprox COMMAND ARGV``, which must exit 2 and print nothing on stdout."""
    code, out, err = run_cli(capsys, command, *argv)
    assert code == 2 and out == "", (code, out, err)
    return one_error_line(err)


def not_ours(path: Path, command: str, option: str = "--out") -> str:
    return (f"autoprox: error: {path} exists and was not written by `autoprox {command}`; choose another {option} "
            "(nothing was overwritten)")


def test_score_refuses_its_input_table_and_any_other_file_and_writes_its_own_again(capsys, tmp_path, notes):
    mine = tmp_path / "mine.csv"
    shutil.copy(TABLE, mine)
    for out in (mine, notes):
        assert refused(capsys, "score", "--proxy", "params", "--bench", mine, "--out", out) == not_ours(out, "score")
    assert mine.read_bytes() == TABLE.read_bytes() and notes.read_text() == "my notes\n"
    assert refused(capsys, "score", "--proxy", "params", "--bench", mine, "--out", tmp_path) == \
        f"autoprox: error: cannot write {tmp_path}: it is a directory; choose another --out"
    assert refused(capsys, "score", "--proxy", "params", "--bench", mine, "--out", "") == \
        "autoprox: error: --out is empty: give the file to write"
    out = tmp_path / "s.csv"
    for _ in range(2):  # the re-run workflow: a file score wrote is written again
        code, _, err = run_cli(capsys, "score", "--proxy", "params", "--bench", mine, "--out", out)
        assert code == 0, err
    lines = out.read_text().splitlines()
    assert lines[0] == "id,score" and len(lines) == 13


@pytest.mark.parametrize("command", ["score", "export", "report", "curves"])
def test_an_out_ending_in_a_slash_is_refused_not_written_as_a_file_named_as_the_folder(capsys, run, tmp_path, command):
    """``export RUN --out newdir/`` wrote a file named ``newdir``: the slash said a folder was meant."""
    given = f"{tmp_path / 'newdir'}/"
    argv = {"score": ["score", "--proxy", "params", "--bench", TABLE],
            "export": ["export", run], "report": ["report", run], "curves": ["curves", run]}[command]
    assert refused(capsys, *argv, "--out", given) == \
        f"autoprox: error: --out {given} names a folder (it ends in /): give the file to write in it"
    assert not (tmp_path / "newdir").exists()


def test_export_refuses_a_runs_best_json_and_a_users_file_and_writes_its_own_module_again(capsys, run, notes,
                                                                                           tmp_path):
    best = (run / "best.json").read_bytes()
    for out in (run / "best.json", notes):
        assert refused(capsys, "export", run, "--out", out, "--no-simplify") == not_ours(out, "export")
    assert (run / "best.json").read_bytes() == best and notes.read_text() == "my notes\n"
    assert refused(capsys, "export", PUBLISHED, "--out", tmp_path) == \
        f"autoprox: error: cannot write {tmp_path}: it is a directory; choose another --out"
    assert refused(capsys, "export", PUBLISHED, "--out", "") == "autoprox: error: --out is empty: give the file to write"
    out = tmp_path / "proxy.py"
    for _ in range(2):
        code, _, err = run_cli(capsys, "export", run, "--out", out, "--no-simplify")
        assert code == 0, err
    source = out.read_text()
    assert source.startswith("# Written by `autoprox export` (autoprox ") and "GENOME = " in source
    compile(source, str(out), "exec")
    older = tmp_path / "older.py"  # a module exported before the mark line: its docstring names autoprox
    older.write_text(source.split("\n", 1)[1])
    code, _, err = run_cli(capsys, "export", PUBLISHED, "--out", older, "--no-simplify")
    assert code == 0, err
    user = tmp_path / "user.py"  # a module of the user's that mentions autoprox is not one export wrote
    user.write_text('# my helper\n"""Calls a proxy exported by autoprox."""\n')
    assert refused(capsys, "export", PUBLISHED, "--out", user, "--no-simplify") == not_ours(user, "export")


def test_report_refuses_a_runs_best_json_and_a_users_file_before_rendering(capsys, run, notes, tmp_path):
    best = (run / "best.json").read_bytes()
    for out in (run / "best.json", notes):
        assert refused(capsys, "report", run, "--out", out, "--no-simplify") == not_ours(out, "report")
    assert (run / "best.json").read_bytes() == best and notes.read_text() == "my notes\n"
    assert refused(capsys, "report", run, "--out", "") == "autoprox: error: --out is empty: give the file to write"
    (run / "report.html").write_text("<html><body>my own page</body></html>\n")  # the default --out is checked too
    assert refused(capsys, "report", run, "--no-simplify") == not_ours(run / "report.html", "report")


def test_a_page_report_writes_is_recognised_and_so_is_one_written_before_the_generator_tag():
    from autoprox.reports.html.page import is_report_page, page

    written = page("t", "<p>body</p>").encode()
    assert is_report_page(written[:4096], written[-4096:])
    assert b'<meta name="generator" content="autoprox ' in written[:200]
    older = ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>t</title></head><body><main>'
             + "x" * 9000 + '<footer>written by autoprox 0.1.0 at 2025-01-01T00:00:00+00:00; a self-contained '
             'file: its figures are inline SVG and it loads nothing.</footer></main></body></html>\n').encode()
    assert is_report_page(older[:4096], older[-4096:])
    users = b"<!DOCTYPE html><html><head><title>autoprox notes</title></head><body>made by hand</body></html>"
    assert not is_report_page(users, users)


def test_curves_refuses_a_runs_best_json_and_a_users_csv_and_writes_its_own_files_again(capsys, run, notes,
                                                                                       tmp_path):
    from autoprox.reports.curves import is_curves_png

    best = (run / "best.json").read_bytes()
    assert refused(capsys, "curves", run, "--out", run / "best.json") == not_ours(run / "best.json", "curves")
    assert refused(capsys, "curves", run, "--out", tmp_path / "c.png", "--csv", notes) == \
        not_ours(notes, "curves", "--csv")
    users_png = tmp_path / "photo.png"  # a PNG of someone else's is not one curves drew
    shutil.copy(REPO / "docs" / "report-pit-reference.png", users_png)
    assert refused(capsys, "curves", run, "--out", users_png) == not_ours(users_png, "curves")
    assert (run / "best.json").read_bytes() == best and notes.read_text() == "my notes\n"
    assert not (tmp_path / "c.png").exists()
    assert refused(capsys, "curves", run, "--out", "") == "autoprox: error: --out is empty: give the file to write"
    for _ in range(2):
        code, _, err = run_cli(capsys, "curves", run, "--out", tmp_path / "c.png", "--csv")
        assert code == 0, err
    png = (tmp_path / "c.png").read_bytes()
    assert is_curves_png(png[:4096]) and (tmp_path / "c.csv").read_text().startswith("run,iteration,best_jcm,")


def test_curves_and_report_make_the_folders_out_names_and_say_in_one_line_when_one_is_a_file(capsys, run, notes,
                                                                                            tmp_path):
    """``--out`` (and ``--csv``) in folders that do not exist yet: they are made, as every atomic writer makes
    them (``score --out``, ``select --out``); a file on the way is one line, where it said only "File exists"."""
    png, csv = tmp_path / "new" / "deeper" / "c.png", tmp_path / "other" / "c.csv"
    code, _, err = run_cli(capsys, "curves", run, "--out", png, "--csv", csv)
    assert code == 0 and png.is_file() and csv.read_text().startswith("run,iteration,best_jcm,"), err
    page = tmp_path / "pages" / "few-labels.html"
    code, _, err = run_cli(capsys, "report", REPO / "runs" / "few-labels", "--out", page)
    assert code == 0 and b'<meta name="generator" content="autoprox ' in page.read_bytes()[:200], err
    for command, out, extra in (("curves", notes / "c.png", ()), ("report", notes / "r.html", ("--no-simplify",))):
        assert refused(capsys, command, run, "--out", out, *extra) == \
            f"autoprox: error: cannot write {out}: a folder above it is a file"
    assert notes.read_text() == "my notes\n"


def test_vit_search_refuses_a_folder_of_the_users_files_and_takes_up_its_own(capsys, tmp_path):
    from autoprox.apps.vitsearch import CONFIG as VIT_CONFIG, check_vit_search_out

    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "top.csv").write_text("my ranking\n")
    (folder / "scores.jsonl").write_text('{"mine": 1}\n')
    argv = ("--space", "pit", "--proxy", REFERENCE / "best.json", "--samples", "2", "--out", folder)
    assert refused(capsys, "vit-search", *argv) == (
        f"autoprox: error: {folder} is not empty and holds no ViT search ({VIT_CONFIG}); its files are left as "
        "they are: choose another --out")
    assert (folder / "top.csv").read_text() == "my ranking\n" and (folder / "scores.jsonl").read_text() == '{"mine": 1}\n'
    only = tmp_path / "only"
    only.mkdir()
    (only / "important.txt").write_text("keep")
    assert "is not empty and holds no ViT search" in refused(capsys, "vit-search", *argv[:-1], only)
    assert sorted(p.name for p in only.iterdir()) == ["important.txt"]
    own = tmp_path / "own"  # a search of its own (its record, scores so far): resumed, not refused
    own.mkdir()
    (own / VIT_CONFIG).write_text(json.dumps({"identity": {}}))
    (own / "scores.jsonl").write_text("")
    check_vit_search_out(own)
    check_vit_search_out(tmp_path / "new")
    with pytest.raises(RunDirError, match="is a file, not a directory"):
        check_vit_search_out(only / "important.txt")


def test_vit_search_on_bench_refuses_a_picks_json_of_the_users(capsys, tmp_path, af_small_file):
    folder = tmp_path / "picks"
    folder.mkdir()
    (folder / "picks.json").write_text('{"mine": true}\n')
    assert refused(capsys, "vit-search", "--on-bench", af_small_file, "--proxy", "params", "--out", folder) == \
        not_ours(folder / "picks.json", "vit-search")
    assert (folder / "picks.json").read_text() == '{"mine": true}\n'


def test_transfer_refuses_a_folder_of_the_users_files_before_any_work(capsys, tmp_path):
    folder = tmp_path / "study"
    folder.mkdir()
    (folder / "mine.txt").write_text("mine")
    assert refused(capsys, "transfer", "--out", folder, "--space", "pit", "--iterations", "1") == (
        f"autoprox: error: {folder} is not empty and holds no transfer study (transfer.json); its files are left "
        "as they are: choose another --out")
    assert sorted(p.name for p in folder.iterdir()) == ["mine.txt"]
    assert "is a file, not a directory" in refused(capsys, "transfer", "--out", folder / "mine.txt", "--space", "pit",
                                                   "--iterations", "1")


@pytest.mark.parametrize("command, module, writer", [
    ("curves", "autoprox.reports.curves", "atomic_open"),
    ("report", "autoprox.core.atomic", "atomic_write_text"),
])
def test_a_full_disk_is_said_once_by_every_writer(capsys, run, tmp_path, monkeypatch, command, module, writer):
    """A full disk is a DiskFullError of its own; a writer's ``except OSError`` wrapped it again ("cannot write X:
    cannot write X: no space left on device")."""
    from autoprox.core.errors import DiskFullError

    out = tmp_path / ("c.png" if command == "curves" else "r.html")

    def full(path, *args, **kwargs):
        raise DiskFullError(f"cannot write {path}: no space left on device after 0 bytes")

    monkeypatch.setattr(f"{module}.{writer}", full)
    extra = ("--no-simplify",) if command == "report" else ()
    line = refused(capsys, command, run, "--out", out, *extra)
    assert line == f"autoprox: error: cannot write {out}: no space left on device after 0 bytes"
    assert not out.exists()


def test_report_serve_refuses_any_out_even_an_empty_one(capsys, run):
    for out in ("r.html", ""):
        assert refused(capsys, "report", run, "--serve", "--out", out) == \
            "autoprox: error: --serve serves the report and writes no file: leave out --out"


def test_report_refuses_a_port_without_serve(capsys, run, tmp_path):
    """``--port`` without ``--serve`` used to be ignored: a file was written and no server started."""
    out = tmp_path / "r.html"
    assert refused(capsys, "report", run, "--port", "8001", "--out", out) == \
        "autoprox: error: --port is the port of --serve, and this writes a file: give --serve too, or leave out --port"
    assert not out.exists()


def test_a_report_the_file_system_refuses_is_one_line(tmp_path, monkeypatch):
    """The few-label and table-search pages raised a raw OSError where the run report said one line: all three
    write through ``write_page``."""
    import errno
    import inspect

    from autoprox.core.errors import ReportError
    from autoprox.reports import table_run
    from autoprox.reports.html import protocol, report
    from autoprox.reports.html.page import write_page

    def refused_write(path, text):
        raise PermissionError(errno.EACCES, "Permission denied", str(path))

    monkeypatch.setattr("autoprox.core.atomic.atomic_write_text", refused_write)
    out = tmp_path / "report.html"
    with pytest.raises(ReportError, match=f"^cannot write {out}: Permission denied$"):
        write_page(out, "<html></html>")
    for writer in (report.write_report, protocol.write_few_labels_report, table_run.table_report_html):
        source = inspect.getsource(writer)
        assert "write_page(" in source and "atomic_write_text(" not in source, writer.__name__
