"""Per target: the joint proxy, the per-target proxy and the transferred proxy, beside the bar.

Usage: python benchmarks/target_table.py SPACE [--joint RUN] [--samples 1000]

For each target of SPACE, on the 40 test architectures no search saw:
- the joint proxy (``--joint``, default ``runs/SPACE-best``) and its Kendall with the target;
- the per-target proxy (``runs/per-target/SPACE-TARGET``), searched on that target alone;
- the transferred proxy (``runs/transfer/SPACE``), searched on every target but that one;
- the parameter count, and the best coarse descriptor (parameter count, depth, width,
  multiply-accumulates) as the bar; the paired bootstrap difference to the parameter count.

Which proxy serves a target (joint or per-target) is chosen on the search split only: the
per-target one when its search-split Kendall is higher than the joint one's. The test
columns then say whether that choice holds on unseen architectures.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from autoprox.core.correlation import correlate, paired_bootstrap
from autoprox.data.benchmark import Benchmark
from autoprox.genome.tree import parse_genome
from autoprox.proxies.figures import beyond_size
from autoprox.proxies.proxy import Proxy
from autoprox.search.context import RunContext


def _load(run: Path) -> tuple[dict, RunContext]:
    best = json.loads((run / "best.json").read_text())
    return best, RunContext.open(run)


def test_figures(genome: str, context: RunContext, bench: Benchmark, target: str, samples: int) -> dict:
    """Kendall of ``genome`` with ``target`` on the test split, the bar, and the bootstrap difference to params."""
    if context.bench.sha256 != bench.sha256:
        raise SystemExit(f"{context.settings.bench} is not the joint run's benchmark {bench.source}")
    archs = context.archs("test")
    classes = context.plan.target_classes[target]
    scores = context.score(Proxy(genome, parse_genome(genome)), "test")[classes]
    params = context.score(Proxy("params"), "test")[classes]
    accuracies = context.accuracies("test", [target])[target]
    beyond = beyond_size(scores, archs, {target: accuracies}, [target])[target]
    return {
        "kendall": beyond["kendall"],
        "params": correlate(params, accuracies)["kendall"],
        "bar": beyond["bar"],
        "beats_bar": beyond["beats_bar"],
        "bootstrap": paired_bootstrap(scores, params, accuracies, samples),
    }


def _cell(figures: dict) -> str:
    boot = figures["bootstrap"]
    return f"{figures['kendall']:.3f} ({boot['mean']:+.3f} +- {boot['std']:.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("space")
    parser.add_argument("--joint", default=None)
    parser.add_argument("--samples", type=int, default=1000)
    args = parser.parse_args()
    joint_run = Path(args.joint or f"runs/{args.space}-best")
    joint_best, joint_context = _load(joint_run)
    bench = joint_context.bench
    transfer_path = Path(f"runs/transfer/{args.space}/transfer.json")
    transfer = json.loads(transfer_path.read_text()) if transfer_path.exists() else {"folds": []}
    held_out = {fold["held_out"]: fold for fold in transfer["folds"]}

    print(f"joint proxy: {joint_run}; Kendall on the test split (paired bootstrap difference to the parameter "
          f"count +- sd); search = Kendall on the search split")
    print("| target | parameter count | bar: best coarse descriptor | joint: search / test | per-target: search / test "
          "| chosen on the search split | chosen beats the bar on test? | transferred (held out): test |")
    print("|---|---|---|---|---|---|---|---|")
    for target in joint_context.targets:
        joint = test_figures(joint_best["genome"], joint_context, bench, target, args.samples)
        joint_search = joint_best["search"]["targets"][target]["kendall"]
        per_run = Path(f"runs/per-target/{args.space}-{target}")
        per_cell, chosen, chosen_test = "not run", "joint", joint
        if (per_run / "best.json").exists():
            per_best, per_context = _load(per_run)
            per = test_figures(per_best["genome"], per_context, bench, target, args.samples)
            per_search = per_best["search"]["targets"][target]["kendall"]
            per_cell = f"{per_search:.3f} / {_cell(per)}"
            if per_search > joint_search:
                chosen, chosen_test = "per-target", per
        fold = held_out.get(target)
        transfer_cell = "not run"
        if fold is not None:
            transferred = test_figures(fold["genome"], joint_context, bench, target, args.samples)
            transfer_cell = _cell(transferred)
        bar = joint["bar"]
        print(f"| {target} | {joint['params']:.3f} | {bar['descriptor']} ({bar['kendall']:.3f}) "
              f"| {joint_search:.3f} / {_cell(joint)} | {per_cell} | {chosen} "
              f"| {'yes' if chosen_test['beats_bar'] else 'no'} ({chosen_test['kendall']:.3f}) | {transfer_cell} |")


if __name__ == "__main__":
    main()
