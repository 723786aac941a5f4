"""Counted against exact evaluation on a committed search's genomes: validity, reasons and JCM.

Replays the genomes of a run's ``evaluations.jsonl`` (recorded by the exact path) through a
:class:`~autoprox.search.fitness.FitnessEvaluator` with ``evaluation="counted"`` on the same
search architectures and reports: how many genomes the counted path scored (the others fell
back to the exact path), whether any genome's validity or invalid reason changed, and how far
the JCM of the valid ones moved (how many moved at all, by more than 0.001, the largest move).

Usage: python benchmarks/compare_counted.py [--run runs/autoformer-reference] [--limit N] [--kernels torch]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import machine, private_mb  # noqa: E402

from autoprox.data.cache import load_statistics  # noqa: E402
from autoprox.genome.tree import parse_genome  # noqa: E402
from autoprox.networks.statistics import torch_threads  # noqa: E402
from autoprox.search.context import RunContext  # noqa: E402
from autoprox.search.fitness import FitnessEvaluator, convert_record  # noqa: E402
from autoprox.spaces.descriptors import terminal_values  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--run", default="runs/autoformer-reference", help="a committed run directory")
    parser.add_argument("--limit", type=int, default=0, help="the first N genomes only (0: all)")
    parser.add_argument("--held", choices=("stored", "mapped"), default="mapped")
    args = parser.parse_args()
    context = RunContext.open(args.run)
    records = [json.loads(line) for line in (Path(args.run) / "evaluations.jsonl").read_text().splitlines()]
    if args.limit:
        records = records[: args.limit]
    archs = context.archs("search")
    stats = load_statistics(context.cache, context.plan, archs, mapped=args.held == "mapped")
    settings = context.settings
    evaluator = FitnessEvaluator.from_statistics(stats, context.accuracies("search"), context.targets, context.plan.target_classes,
                                                 settings.weights, terminals=[terminal_values(a) for a in archs],
                                                 kernels=settings.kernels, evaluation="counted")
    counting = evaluator.prepare()
    changed_validity, changed_reason, moved, moved_much, largest, movers = [], 0, 0, 0, 0.0, []
    start = time.perf_counter()
    with torch_threads(1):
        for recorded in records:
            record = evaluator.evaluate(parse_genome(recorded["genome"]))
            if record.valid != recorded["valid"]:
                changed_validity.append(recorded["genome"])
                continue
            if not record.valid:
                changed_reason += record.reason != recorded["reason"]
                continue
            recorded_jcm = convert_record(recorded)["jcm"]  # the plain JCM, in a run of either record layout
            delta = abs(record.jcm - recorded_jcm)
            movers.append((delta, recorded_jcm, record.jcm, recorded["genome"]))
            moved += delta > 0
            moved_much += delta > 1e-3
            largest = max(largest, delta) if not math.isnan(delta) else largest
    seconds = time.perf_counter() - start
    valid = sum(r["valid"] for r in records)
    print(f"machine: {machine()}")
    print(f"run {args.run}: {len(records)} genomes ({valid} valid), {len(archs)} search architectures, "
          f"kernels {settings.kernels}, statistics held {args.held}")
    print(f"counting: {counting:.1f} s; private memory {private_mb():.0f} MB")
    print(f"scored counted: {evaluator.path_counts['counted']}, by the exact path: {evaluator.path_counts['exact']}; "
          f"{seconds:.1f} s in all ({seconds / len(records):.3f} s per genome)")
    print(f"validity changed: {len(changed_validity)}; invalid reason changed: {changed_reason}")
    for genome in changed_validity[:10]:
        print(f"  {genome}")
    print(f"valid genomes whose JCM moved: {moved} (by more than 0.001: {moved_much}; at most {largest:.4f})")
    best_exact = max((r["jcm"] for r in records if r["valid"]), default=math.nan)
    best_counted = max((m[2] for m in movers), default=math.nan)
    print(f"best JCM: exact {best_exact:.4f}, counted {best_counted:.4f}")
    for delta, before, after, genome in sorted(movers, reverse=True)[:5]:
        print(f"  {before:+.4f} -> {after:+.4f}  {genome}")


if __name__ == "__main__":
    main()
