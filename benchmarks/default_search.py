"""The README's first command, timed: the default search on AutoFormer with the statistics not cached.

Each run starts with an empty statistics cache (so the two splits' statistics are computed, as on a
fresh clone) and a new run directory, runs ``autoprox search --space autoformer`` with its defaults,
and records the wall time, the CPU time and peak memory of the command and its workers, the load
average before and after, and when each phase ended (read from the progress lines on stderr as they
come): the search split's statistics, the counting, the evolution, and the final report (which waits
for the test split's statistics where the evolution ended before them). Prints one Markdown row per
run and the median, and writes them all to ``--json``.

Usage::

    python benchmarks/default_search.py --runs 3 --json /tmp/default-search.json
    python benchmarks/default_search.py --autoprox /path/to/clone/.venv/bin/autoprox --runs 1
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

#: The first stderr line of each phase after the first, in order: (phase that ends there, prefix).
#: With counted evaluation, its line (which comes first) says when both earlier phases ended: :data:`COUNTED`.
PHASE_ENDS = (
    ("search split statistics", "test split statistics:"),
    ("counting", "initial population"),
    ("evolution", "final report:"),
)
#: The counting's line, with its seconds.
COUNTED = re.compile(r"counted evaluation: statistics counted in ([0-9.]+) s")


def _clock(seconds: float) -> str:
    minutes, rest = divmod(int(round(seconds)), 60)
    return f"{minutes}:{rest:02d}"


def one_run(autoprox: str, work: Path, extra: list[str]) -> dict:
    """One default search into a new run directory under ``work``, with an empty cache there."""
    cache, out = work / "cache", work / "run"
    for path in (cache, out):
        shutil.rmtree(path, ignore_errors=True)
    argv = [autoprox, "search", "--space", "autoformer", "--out", str(out), "--cache-dir", str(cache), *extra]
    load_before = os.getloadavg()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    marks: dict[str, float] = {}
    last_line = ""
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as process:
        for line in process.stderr:
            now = time.perf_counter() - start
            for phase, prefix in PHASE_ENDS:
                if line.startswith(prefix) and phase not in marks:
                    marks[phase] = now
            counted = COUNTED.match(line)
            if counted and "counting" not in marks:  # counting comes first and says how long it took
                marks["search split statistics"] = now - float(counted.group(1))
                marks["counting"] = now
        printed = process.stdout.read()
        code = process.wait()
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if code != 0:
        raise SystemExit(f"autoprox search exited {code}: {' '.join(argv)}")
    last_line = printed.strip().splitlines()[-1]
    ends = [marks.get(p) for p in ("search split statistics", "counting", "evolution")]
    phases = {"search split statistics": ends[0], "counting": None, "evolution": None,
              "final report": None if ends[2] is None else wall - ends[2]}
    if ends[0] is not None and ends[1] is not None:
        phases["counting"] = ends[1] - ends[0]
    if ends[1] is not None and ends[2] is not None:
        phases["evolution"] = ends[2] - ends[1]
    return {
        "wall_s": round(wall, 1),
        "user_s": round(after.ru_utime - before.ru_utime, 1),
        "system_s": round(after.ru_stime - before.ru_stime, 1),
        "peak_rss_gb": round(after.ru_maxrss / 2**20, 2),  # the largest child (kilobytes on Linux)
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
        "phases_s": {k: None if v is None else round(v, 1) for k, v in phases.items()},
        "last_line": last_line,
    }


def row(label: str, run: dict) -> str:
    phases = " / ".join("-" if v is None else _clock(v) for v in run["phases_s"].values())
    return (f"| {label} | **{_clock(run['wall_s'])}** | {phases} | {run['user_s'] + run['system_s']:.0f} | "
            f"{run['peak_rss_gb']:.1f} | {run['load_before'][0]:.2f}, {run['load_after'][0]:.2f} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--autoprox", default=str(REPO / ".venv" / "bin" / "autoprox"),
                        help="the autoprox command to time (default: this clone's .venv)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--work", default=None, help="folder for the runs and their caches (default: a temporary one)")
    parser.add_argument("--json", default=None, help="write every run's record here")
    parser.add_argument("extra", nargs="*", help="more search options, after --")
    args = parser.parse_args(argv)
    work = Path(args.work or tempfile.mkdtemp(prefix="autoprox-default-search-"))
    runs = []
    print("| run | wall | search split statistics / counting / evolution / final report | CPU s | peak GB "
          "| load before, after |")
    print("|---|---|---|---|---|---|")
    for index in range(args.runs):
        runs.append(one_run(args.autoprox, work, args.extra))
        print(row(str(index + 1), runs[-1]), flush=True)
    median = statistics.median(r["wall_s"] for r in runs)
    print(f"median wall {_clock(median)} over {len(runs)} runs; last line: {runs[-1]['last_line']}")
    if args.json:
        Path(args.json).write_text(json.dumps({"command": "autoprox search --space autoformer", "runs": runs,
                                               "median_wall_s": median}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
