"""The issue-6 ablation table: test-split figures of finished runs beside the parameter count's.

For each run directory: its configuration, per-target Kendall on the test split, the
test JCM, the search-split fitness and the generalisation gap, and per target the paired
bootstrap difference of Kendall to the parameter count on the test split (mean +- std over
resamples of the test architectures). The proxy of each run was chosen on its search
split only. Usage: python benchmarks/ablation_table.py RUN_DIR [RUN_DIR ...] [--samples 1000]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from autoprox.core.correlation import correlate, paired_bootstrap
from autoprox.genome.tree import parse_genome
from autoprox.proxies.proxy import Proxy
from autoprox.search.context import RunContext
from autoprox.search.settings import SearchSettings


def describe_config(settings: SearchSettings) -> str:
    space = settings.genome_space
    parts = [space.kind, "+".join(a.replace("block_", "") for a in space.aggregations)]
    if space.arch_terminals:
        parts.append("arch terms")
    parts.append(f"cv{settings.cv_folds}" if settings.cv_folds else "single fold")
    if settings.evolution.parsimony:
        parts.append("parsimony")
    return ", ".join(parts)


def run_row(run: Path, samples: int) -> dict:
    best = json.loads((run / "best.json").read_text())
    context = RunContext.open(run)
    settings, targets, plan = context.settings, list(context.targets), context.plan
    proxy_scores = context.score(Proxy(best["genome"], parse_genome(best["genome"])), "test")
    param_scores = context.score(Proxy("params"), "test")
    row = {"run": str(run), "config": describe_config(settings), "genome": best["genome"],
           "finished": best.get("finished"), "iteration": best.get("iteration"),
           "search_jcm": best["search"].get("jcm"), "test_jcm": best["test"].get("jcm"),
           "params_test_jcm": best["params"]["test"].get("jcm"), "targets": {}}
    for target in targets:
        classes = plan.target_classes[target]
        accuracies = context.accuracies("test", [target])[target]
        row["targets"][target] = {
            "kendall": correlate(proxy_scores[classes], accuracies)["kendall"],
            "params": correlate(param_scores[classes], accuracies)["kendall"],
            "bootstrap": paired_bootstrap(proxy_scores[classes], param_scores[classes], accuracies, samples),
        }
    return row


def markdown(rows: list[dict]) -> str:
    targets = list(rows[0]["targets"])
    head = ("| configuration | " + " | ".join(f"{t}: tau (diff to params +- sd)" for t in targets)
            + " | test JCM | search JCM | gap |")
    lines = [head, "|" + "---|" * (len(targets) + 4)]
    params = rows[0]["targets"]
    lines.append("| *parameter count* | " + " | ".join(f"{params[t]['params']:.3f}" for t in targets)
                 + f" | {rows[0]['params_test_jcm']:.3f} | | |")
    for row in rows:
        cells = []
        for t in targets:
            figures = row["targets"][t]
            boot = figures["bootstrap"]
            cells.append(f"{figures['kendall']:.3f} ({boot['mean']:+.3f} +- {boot['std']:.3f})")
        gap = row["search_jcm"] - row["test_jcm"]
        unfinished = "" if row["finished"] else f" (stopped at {row['iteration']})"
        lines.append(f"| {row['config']}{unfinished} | " + " | ".join(cells)
                     + f" | {row['test_jcm']:.3f} | {row['search_jcm']:.3f} | {gap:+.3f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("runs", nargs="+")
    parser.add_argument("--samples", type=int, default=1000, help="bootstrap resamples")
    parser.add_argument("--json", help="also write the rows as JSON here")
    args = parser.parse_args()
    rows = []
    for run in args.runs:
        path = Path(run)
        if not (path / "best.json").is_file():
            print(f"skipping {run}: no best.json", file=sys.stderr)
            continue
        rows.append(run_row(path, args.samples))
    print(markdown(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    for row in rows:
        print(f"- {row['config']}: `{row['genome']}`")


if __name__ == "__main__":
    main()
