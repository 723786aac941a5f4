"""A multi-space fitness evaluation against the single-space ones, per architecture.

Times valid random template genomes on cached statistics of the search splits (60 AutoFormer,
60 PiT architectures; --search-fraction 0.6, split seed 0) through the multi-space evaluator
(:class:`autoprox.search.multispace.MultiFitnessEvaluator`): the whole evaluation, and inside
it each space's own single-space evaluator (the one a single-space search uses), genome by
genome, so that the machine's load weighs on both alike. Reports the median seconds per genome
and per architecture, and the ratio of the multi-space time per architecture to the
single-space evaluations' (what merging the per-space Kendalls into one record adds).
The caches must be warm (``autoprox cache build --space autoformer`` and ``--space pit``).

Usage: python benchmarks/bench_multispace.py [--genomes 30] [--evaluation counted|exact]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import machine  # noqa: E402

from autoprox.data.benchmark import default_bench_path  # noqa: E402
from autoprox.genome.space import GenomeSpace
from autoprox.search.evolution import random_genome  # noqa: E402
from autoprox.search.multispace import MultiRunContext  # noqa: E402
from autoprox.search.settings import SearchSettings  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--genomes", type=int, default=30, help="valid random genomes to time")
    parser.add_argument("--evaluation", choices=("counted", "exact"), default="counted")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    settings = SearchSettings(bench=(str(default_bench_path("autoformer")), str(default_bench_path("pit"))),
                              evaluation=args.evaluation)
    context = MultiRunContext.from_settings(settings)
    multi = context.fitness_evaluator(None, quiet=True)[0]
    multi.prepare()
    sizes = {p.bench.space: len(p.split.search) for p in context.parts}
    rng = random.Random(args.seed)
    times = {"multi": [], **{space: [] for space in sizes}}
    space = GenomeSpace()
    while len(times["multi"]) < args.genomes:
        tree = random_genome(rng, space)
        before = {name: e.seconds for name, e in multi.evaluators.items()}
        start = time.perf_counter()
        record = multi.evaluate(tree)
        elapsed = time.perf_counter() - start
        if record.valid:
            times["multi"].append(elapsed)
            for name, evaluator in multi.evaluators.items():
                times[name].append(evaluator.seconds - before[name])
    total = sum(sizes.values())
    ratios = [(m / total) / (sum(times[s][i] for s in sizes) / total) for i, m in enumerate(times["multi"])]
    print(f"machine: {machine()}")
    print(f"{args.genomes} valid random template genomes, evaluation {args.evaluation}, "
          f"search splits {', '.join(f'{s} {n}' for s, n in sizes.items())}")
    for name, values in times.items():
        archs = total if name == "multi" else sizes[name]
        print(f"  {name:<11} median {statistics.median(values):.4f} s per genome, "
              f"{statistics.median(values) / archs * 1e3:.3f} ms per architecture")
    print(f"  multi-space time per architecture / the two single-space evaluations' per architecture: "
          f"median {statistics.median(ratios):.3f}")
    multi.close()


if __name__ == "__main__":
    main()
