"""Per target: does a run's proxy beat the best coarse descriptor on the test split?

Usage: python benchmarks/beyond_size_table.py RUN_DIR [RUN_DIR ...]
Reads each run's best genome and recomputes the beyond-size report on its test split
(so older runs whose best.json predates the report are covered too).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from autoprox.genome.tree import parse_genome
from autoprox.proxies.proxy import Proxy
from autoprox.search.context import RunContext


def main() -> None:
    print("| run | target | proxy tau (test) | best coarse descriptor (tau) | beats it? | tau with params | partial tau given params |")
    print("|---|---|---|---|---|---|---|")
    for run in map(Path, sys.argv[1:]):
        best = json.loads((run / "best.json").read_text())
        context = RunContext.open(run)
        report = context.beyond_size(context.score(Proxy(best["genome"], parse_genome(best["genome"])), "test"), "test")
        for target, row in report.items():
            bar = row["bar"]
            print(f"| {run.name} | {target} | {row['kendall']:.3f} | {bar['descriptor']} ({bar['kendall']:.3f}) "
                  f"| {'yes' if row['beats_bar'] else 'no'} | {row['kendall_with_params']:.3f} "
                  f"| {row['partial_given_params']:.3f} |")


if __name__ == "__main__":
    main()
