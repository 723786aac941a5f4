"""Per target: does a run's proxy beat the best coarse descriptor on the test split?

Usage: python benchmarks/beyond_size_table.py RUN_DIR [RUN_DIR ...]
Reads each run's best genome and recomputes the beyond-size report on its test split
(so older runs whose best.json predates the report are covered too).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from autoprox.benchmark import load_benchmark, split_benchmark
from autoprox.cache import StatisticsCache
from autoprox.genome import parse_genome
from autoprox.proxies import Proxy
from autoprox.search import SearchSettings, beyond_size_of, stats_plan


def main() -> None:
    print("| run | target | proxy tau (test) | best coarse descriptor (tau) | beats it? | tau with params | partial tau given params |")
    print("|---|---|---|---|---|---|---|")
    for run in map(Path, sys.argv[1:]):
        config = json.loads((run / "config.json").read_text())
        best = json.loads((run / "best.json").read_text())
        settings = SearchSettings.from_json(config["settings"])
        bench = load_benchmark(settings.bench)
        split = split_benchmark(len(bench), settings.split_seed, settings.search_fraction)
        plan = stats_plan(settings, settings.targets)
        report = beyond_size_of(Proxy(best["genome"], parse_genome(best["genome"])), bench, split.test,
                                settings.targets, plan, StatisticsCache(settings.cache_dir, settings.cache_precision))
        for target, row in report.items():
            bar = row["bar"]
            print(f"| {run.name} | {target} | {row['kendall']:.3f} | {bar['descriptor']} ({bar['kendall']:.3f}) "
                  f"| {'yes' if row['beats_bar'] else 'no'} | {row['kendall_with_params']:.3f} "
                  f"| {row['partial_given_params']:.3f} |")


if __name__ == "__main__":
    main()
