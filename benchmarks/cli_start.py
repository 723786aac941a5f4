"""How long the command line takes where it needs no torch: ``autoprox --help``, and a table search and score
(``search --bench T.csv --targets Y --out R`` with K labelled rows, then ``score --proxy R/best.json``), each a
new process as a user runs it, for two checkouts interleaved (old then new, then new then old, ...), so that the
machine's load falls on both alike.

Each checkout is run as ``PYTHON -m autoprox`` with ``PYTHONPATH=CHECKOUT``; the table is the packaged
NAS-Bench-201 CIFAR-10 one unless ``--table`` names another, its first target kept on K rows (a seeded draw per
run, the same for both checkouts). Prints the medians and the ratio new / old.

Usage::

    python benchmarks/cli_start.py --old /path/to/main --new . --runs 5 --labels 50
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from table_search import DEFAULT_TABLES, PACKAGED, partial_table  # noqa: E402 - this folder's own module


def _timed(checkout: str, python: str, arguments: list[str], folder: str) -> float:
    """Seconds of ``PYTHON -m autoprox ARGUMENTS`` from ``checkout``, run in ``folder`` (``-m`` puts the working
    folder first on the path: run in a checkout, it would import that one)."""
    start = time.perf_counter()
    done = subprocess.run([python, "-m", "autoprox", *arguments], capture_output=True, text=True, cwd=folder,
                          env={**os.environ, "PYTHONPATH": str(Path(checkout).resolve())})
    if done.returncode != 0:
        raise SystemExit(f"{checkout}: autoprox {' '.join(arguments)} failed: {done.stderr.strip()[-500:]}")
    return time.perf_counter() - start


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", required=True, help="the checkout to compare against")
    parser.add_argument("--new", required=True)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--table", default=str(PACKAGED / DEFAULT_TABLES[0]))
    parser.add_argument("--labels", type=int, default=50)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    times: dict[tuple[str, str], list[float]] = {}
    print(f"load before: {os.getloadavg()[0]:.2f}", flush=True)
    with tempfile.TemporaryDirectory() as scratch:
        for run in range(args.runs):
            table, target = partial_table(Path(args.table), args.labels, run, Path(scratch) / f"table-{run}.csv")
            for name in ("old", "new") if run % 2 == 0 else ("new", "old"):
                checkout, out = getattr(args, name), Path(scratch) / f"run-{name}-{run}"
                steps = {"help": ["--help"],
                         "search": ["search", "--bench", str(table), "--targets", target, "--out", str(out), "--quiet"],
                         "score": ["score", "--proxy", str(out / "best.json"), "--bench", str(table), "--out",
                                   str(Path(scratch) / "scores.csv")]}
                for step, arguments in steps.items():
                    times.setdefault((name, step), []).append(_timed(checkout, args.python, arguments, scratch))
                print(f"run {run + 1} {name}: " + ", ".join(f"{step} {times[name, step][-1]:.2f} s" for step in steps)
                      + f" (load {os.getloadavg()[0]:.2f})", flush=True)
    print(f"load after: {os.getloadavg()[0]:.2f}")
    for step in ("help", "search", "score"):
        old, new = statistics.median(times["old", step]), statistics.median(times["new", step])
        print(f"{step}: median old {old:.2f} s, new {new:.2f} s, ratio {new / old:.2f}")
    old = statistics.median(a + b for a, b in zip(times["old", "search"], times["old", "score"]))
    new = statistics.median(a + b for a, b in zip(times["new", "search"], times["new", "score"]))
    print(f"search + score: median old {old:.2f} s, new {new:.2f} s, ratio {new / old:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
