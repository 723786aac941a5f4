"""How long a table search takes from the command line: ``autoprox search --bench T.csv`` on a table with K
labelled rows, then ``autoprox score`` of its proxy, each as a user runs it (a new process, its start included).

For each table (packaged ones by default: the NAS-Bench-201 CIFAR-10 table, 9,445 rows; FlexiBERT, 500; PiT, 100,
each on its first target) K rows keep their label (a seeded draw) and the others are blanked; each run writes a
new run directory. Prints one Markdown row per table with every run's wall time and the median, the load average
before and after, and writes them to ``--json``.

Usage::

    python benchmarks/table_search.py --labels 50 --runs 3 --json /tmp/table-search.json
    python benchmarks/table_search.py --tables mine.csv other.csv.gz --labels 50 --runs 5
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
PACKAGED = REPO / "autoprox" / "resources" / "proxy-tables"
DEFAULT_TABLES = ("nb201-cifar10.csv.gz", "flexibert-glue.csv.gz", "pit.csv")


def partial_table(source: Path, labels: int, seed: int, out: Path) -> tuple[Path, str]:
    """``source`` with its first accuracy column kept on ``labels`` rows only (the rest blank), written to ``out``."""
    opener = gzip.open if source.suffix == ".gz" else open
    with opener(source, "rt", encoding="utf-8", newline="") as handle:
        rows = list(csv.reader(handle))
    header, body = rows[0], rows[1:]
    keep = set(np.random.default_rng(seed).permutation(len(body))[:labels].tolist())
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    for index, row in enumerate(body):
        writer.writerow([row[0], row[1] if index in keep else "", *row[2:]])
    out.write_text(buffer.getvalue())
    return out, header[1]


def timed(command: list[str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed: {done.stderr.strip().splitlines()[-1:]}")
    return time.perf_counter() - start


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", nargs="*", default=None, help="proxy tables (default: three packaged ones)")
    parser.add_argument("--labels", type=int, default=50)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--autoprox", default=str(REPO / ".venv" / "bin" / "autoprox"))
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    tables = [Path(t) for t in args.tables] if args.tables else [PACKAGED / name for name in DEFAULT_TABLES]
    results = []
    print("| table | rows | search runs (s) | search median (s) | score median (s) | load before, after |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as scratch:
        for table in tables:
            load_before = os.getloadavg()[0]
            searches, scores = [], []
            for run in range(args.runs):
                partial, target = partial_table(table, args.labels, run, Path(scratch) / f"{table.stem}-{run}.csv")
                out = Path(scratch) / f"run-{table.stem}-{run}"
                searches.append(timed([args.autoprox, "search", "--bench", str(partial), "--targets", target,
                                       "--out", str(out), "--quiet"]))
                scores.append(timed([args.autoprox, "score", "--proxy", str(out / "best.json"), "--bench",
                                     str(partial), "--out", str(Path(scratch) / "scores.csv")]))
            rows = sum(1 for _ in (gzip.open if table.suffix == ".gz" else open)(table, "rt")) - 1
            record = {"table": table.name, "rows": rows, "labels": args.labels, "search_seconds": searches,
                      "search_median": statistics.median(searches), "score_median": statistics.median(scores),
                      "load": [load_before, os.getloadavg()[0]]}
            results.append(record)
            print(f"| {table.name} | {rows:,} | {', '.join(f'{s:.1f}' for s in searches)} | "
                  f"{record['search_median']:.1f} | {record['score_median']:.1f} | "
                  f"{record['load'][0]:.2f}, {record['load'][1]:.2f} |", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": os.uname().machine, "cores": os.cpu_count(),
                                               "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
