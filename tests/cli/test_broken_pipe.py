"""A closed output pipe (``autoprox ... | head``): a command whose product is its listing ends quietly with 0, as
Unix listings do; a search, whose product is its run directory, stops with 141 (128 + SIGPIPE), never 0, and keeps
what it computed so that ``--resume`` continues it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.commands import run_cli
from tests.conftest import REPO
from tests.search.test_table_search import write_table

PIT_TABLE = REPO / "autoprox" / "resources" / "proxy-tables" / "pit.csv"


def _closed(argv: list, closed: str) -> tuple[int, str]:
    """Run ``autoprox ARGV`` with its ``closed`` stream ("stdout" or "stderr") a pipe whose reader has gone (as
    ``| head`` leaves it), the other read to its end: the exit status and what the other stream said."""
    child = subprocess.Popen([sys.executable, "-m", "autoprox", *map(str, argv)], cwd=REPO, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    getattr(child, closed).close()
    other = (child.stderr if closed == "stdout" else child.stdout).read()
    return child.wait(timeout=300), other


def _best(run: Path) -> dict:
    return {k: v for k, v in json.loads((run / "best.json").read_text()).items() if k != "run"}


def test_a_table_search_whose_progress_pipe_closes_stops_with_141_and_resumes_to_the_same_proxy(tmp_path, capsys):
    """``search ... 2>&1 | head`` ended with exit 0 and a run directory holding config.json alone."""
    table, _, _ = write_table(tmp_path / "t.csv")
    argv = ["search", "--bench", table, "--targets", "val_acc", "--iterations", "3"]
    status, out = _closed([*argv, "--out", tmp_path / "cut"], "stderr")
    assert status == 141 and out == ""
    assert (tmp_path / "cut" / "config.json").is_file() and not (tmp_path / "cut" / "best.json").exists()
    code, _, err = run_cli(capsys, "search", "--resume", "--out", tmp_path / "cut", "--quiet")
    assert code == 0, err
    code, _, err = run_cli(capsys, *argv, "--out", tmp_path / "whole", "--quiet")
    assert code == 0, err
    assert _best(tmp_path / "cut") == _best(tmp_path / "whole")


def test_a_search_whose_summary_pipe_closes_says_so_on_stderr_with_141(tmp_path):
    table, _, _ = write_table(tmp_path / "t.csv")
    status, err = _closed(["search", "--bench", table, "--targets", "val_acc", "--iterations", "2",
                           "--out", tmp_path / "run"], "stdout")
    lines = [line for line in err.splitlines() if line.startswith("autoprox:")]
    assert status == 141 and "Traceback" not in err and "Exception ignored" not in err, err
    assert lines == [f"autoprox: stopped: the pipe its output went to was closed (exit 141); what it computed is "
                     f"kept: continue with autoprox search --resume --out {tmp_path / 'run'}"], err


def test_a_listing_piped_into_head_ends_quietly_with_0(tmp_path):
    status, err = _closed(["rank", "--proxy", "all", "--bench", PIT_TABLE], "stdout")
    assert status == 0 and err == "", err


def test_the_listings_are_the_commands_whose_modules_say_so():
    """LISTINGS is read from the command modules (``LISTING = True``), not kept beside COMMANDS: rank, show and
    spaces print their product; a search, whose product is its run directory, is not one."""
    from autoprox.cli.main import COMMANDS, LISTINGS

    assert LISTINGS == {"rank", "show", "spaces"}
    assert all(getattr(COMMANDS[name], "LISTING", False) is (name in LISTINGS) for name in COMMANDS)
