"""The command line loads torch only where a command computes with it: ``autoprox --help``, every command's
``--help`` and a table search and score (``search --bench T.csv``, ``score --proxy R/best.json``) run without
it, as a user's outside check runs them once per table (torch's import alone costs about a second); the help
runs without SciPy's statistics too (half a second more), and all of these without SymPy (a quarter of a second),
which only the commands that build a SymPy formula import (``show``, ``export``, ``report``, ``search --report``)."""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import numpy as np

#: A fresh interpreter running the real entry point: every ``--help``, then a one-iteration table search of the
#: table ``argv[1]`` into ``argv[2]`` and the score of every row into ``argv[3]``; it prints the heavy modules
#: loaded after the help, then after the search and score.
CHILD = r"""
import contextlib, io, json, sys
from autoprox.cli.main import COMMANDS, main

def heavy():
    return sorted(name for name in ("torch", "timm", "sympy", "scipy.stats") if name in sys.modules)

table, out, scores = sys.argv[1:4]
for argv in (["--help"], *([name, "--help"] for name in COMMANDS)):
    with contextlib.redirect_stdout(io.StringIO()) as text:
        try:
            main(argv)
        except SystemExit as exc:
            assert exc.code == 0 and "usage: autoprox" in text.getvalue(), (argv, exc.code)
after_help = heavy()
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    assert main(["search", "--bench", table, "--targets", "val_acc", "--out", out, "--iterations", "1",
                 "--quiet"]) == 0
    assert main(["score", "--proxy", out + "/best.json", "--bench", table, "--out", scores]) == 0
print(json.dumps([after_help, heavy()]))
"""


def _table(path, rows: int = 30, labelled: int = 20) -> None:
    """``id,val_acc,params,flops,nwot``: the first ``labelled`` rows labelled, each column the label plus noise."""
    rng = np.random.default_rng(0)
    base = rng.normal(size=rows)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "val_acc", "params", "flops", "nwot"])
        for i in range(rows):
            writer.writerow([f"a{i}", repr(70 + float(base[i])) if i < labelled else "",
                             *(repr(float(base[i] + rng.normal())) for _ in range(3))])


def test_help_and_a_table_search_and_score_import_neither_torch_nor_sympy(tmp_path):
    table, out, scores = tmp_path / "mine.csv", tmp_path / "run", tmp_path / "scores.csv"
    _table(table)
    child = subprocess.run([sys.executable, "-c", CHILD, str(table), str(out), str(scores)], capture_output=True,
                           text=True, timeout=300)
    assert child.returncode == 0, child.stderr[-3000:]
    after_help, after_table = json.loads(child.stdout.splitlines()[-1])
    assert not {"torch", "timm", "scipy.stats", "sympy"} & set(after_help), after_help  # the table search needs SciPy's
    assert not {"torch", "timm", "sympy"} & set(after_table), after_table
    with open(scores, newline="", encoding="utf-8") as handle:
        assert [row["id"] for row in csv.DictReader(handle)] == [f"a{i}" for i in range(30)]
