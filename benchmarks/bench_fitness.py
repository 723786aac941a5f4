"""One genome's fitness on cached statistics of the 60 AutoFormer search-split architectures.

Reports the median seconds per evaluation over valid random template genomes and the
published Auto-Prox genome (4 targets, single-threaded as the search runs it), the
time to compute the same statistics afresh (what the released reference code does
for every evaluation) and their ratio, and the resident memory of the loaded
statistics. The cache must be warm (``autoprox cache build --space autoformer``).
``--stream EVALUATIONS.jsonl`` replays the genomes a committed search evaluated, in its
order (children share branches with their parents, as in a search), instead of drawing
independent random templates;
``--kernels numpy`` evaluates with the NumPy kernel set (:data:`autoprox.primitives.KERNEL_SETS`);
``--evaluation counted`` once per distinct stored value (:mod:`autoprox.genome.counted`), the
exact path for the genomes it does not cover (the statistics are counted before the timing).

Usage: python benchmarks/bench_fitness.py [--genomes 30] [--kernels torch|numpy]
       [--evaluation exact|counted]
       [--stream runs/autoformer-reference/evaluations.jsonl]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import machine, peak_rss_mb, private_mb  # noqa: E402

from autoprox.data.benchmark import default_bench_path, load_benchmark, split_benchmark  # noqa: E402
from autoprox.data.cache import StatisticsCache, StatsPlan, load_statistics  # noqa: E402
from autoprox.search.evaluators import DEFAULT_EVALUATION, EVALUATIONS  # noqa: E402
from autoprox.genome.tree import parse_genome  # noqa: E402
from autoprox.genome.template import random_template
from autoprox.networks.statistics import InputSpec, compute_statistics, torch_threads  # noqa: E402
from autoprox.search.fitness import FitnessEvaluator  # noqa: E402
from autoprox.primitives import KERNEL_SETS  # noqa: E402

PUBLISHED = ("block_mean(to_mean_scalar(element_wise_sum(frobenius_norm(min_max_normalize(F2)), "
             "element_wise_sqrt(sigmoid(F4g)))))")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--genomes", type=int, default=30, help="valid random genomes to time")
    parser.add_argument("--fresh-archs", type=int, default=10, help="architectures timed for the fresh-statistics baseline")
    parser.add_argument("--held", choices=("stored", "mapped", "float32"), default="stored",
                        help="statistics held as stored (float16, decoded per read; the engine's default), "
                             "memory-mapped from the cache files, or as float32")
    parser.add_argument("--no-subtree-memo", action="store_true", help="turn off the scalar-subtree memo")
    parser.add_argument("--kernels", choices=tuple(KERNEL_SETS), default="torch",
                        help="the kernel set genomes are evaluated with (default torch)")
    parser.add_argument("--evaluation", choices=EVALUATIONS, default=DEFAULT_EVALUATION,
                        help="exact (default) or counted evaluation (autoprox.genome.counted)")
    parser.add_argument("--stream", help="an evaluations.jsonl whose genomes are replayed in order "
                                         "(--genomes then counts valid ones among them)")
    parser.add_argument("--archs", type=int, default=60, help="the first N search-split architectures")
    parser.add_argument("--verbose", action="store_true", help="print each valid genome's time")
    parser.add_argument("--profile", help="write a cProfile of the timed evaluations to this file")
    args = parser.parse_args()
    bench = load_benchmark(default_bench_path("autoformer"))
    split = split_benchmark(len(bench))
    targets = bench.default_targets()
    plan = StatsPlan(InputSpec(), (0,), {t: 100 for t in targets})
    archs = [bench.archs[i] for i in split.search][: args.archs]
    rss_before = peak_rss_mb()
    start = time.perf_counter()
    stats = load_statistics(StatisticsCache(), plan, archs, encoded=args.held != "float32",
                            mapped=args.held == "mapped")
    load_seconds = time.perf_counter() - start
    rss_after = peak_rss_mb()
    accuracies = {t: bench.accuracies[t][list(split.search)][: len(archs)] for t in targets}
    evaluator = FitnessEvaluator.from_statistics(stats, accuracies, targets, plan.target_classes,
                                                 subtree_memo=not args.no_subtree_memo,
                                                 kernels=args.kernels, evaluation=args.evaluation)
    counting_seconds = evaluator.prepare()
    rss_counted = peak_rss_mb()
    stream = ([json.loads(line)["genome"] for line in Path(args.stream).read_text().splitlines()]
              if args.stream else [])
    profiler = cProfile.Profile() if args.profile else None
    rng = random.Random(0)
    valid_times, invalid_times = [], []
    with torch_threads(1):
        trees = [parse_genome(g) for g in reversed(stream)] if stream else [parse_genome(PUBLISHED)]
        total_start, cpu_start = time.perf_counter(), time.process_time()
        while len(valid_times) < args.genomes and (trees or not stream):
            tree = trees.pop() if trees else random_template(rng)
            evaluator.memo.clear()
            if profiler:
                profiler.enable()
            t0 = time.perf_counter()
            record = evaluator.evaluate(tree)
            elapsed = time.perf_counter() - t0
            if profiler:
                profiler.disable()
            (valid_times if record.valid else invalid_times).append(elapsed)
            if args.verbose and record.valid:
                print(f"{elapsed:.3f} s  {record.genome}")
        total_seconds, cpu_seconds = time.perf_counter() - total_start, time.process_time() - cpu_start
        fresh = []
        for arch in archs[: args.fresh_archs]:
            t0 = time.perf_counter()
            compute_statistics(arch, plan.spec, 0, 100)
            fresh.append(time.perf_counter() - t0)
    if profiler:
        profiler.dump_stats(args.profile)
    fresh_total = statistics.mean(fresh) * len(archs)
    median = statistics.median(valid_times)
    print(f"machine: {machine()}")
    print(f"architectures: {len(archs)}, targets: {len(targets)}, batch {plan.spec.batch_size}, "
          f"held {args.held}, subtree memo {'off' if args.no_subtree_memo else 'on'}, "
          f"kernels {args.kernels}, "
          f"evaluation {args.evaluation}, "
          f"genomes {args.stream or 'random templates'}")
    print(f"loading cached statistics: {load_seconds:.1f} s, resident memory {rss_before:.0f} -> {rss_after:.0f} MB")
    if evaluator.counted is not None:
        counted_mb = sum(blocks.nbytes for blocks in evaluator.counted.values()) / 1e6
        print(f"counting the statistics: {counting_seconds:.1f} s, {counted_mb:.0f} MB of counts, "
              f"peak resident memory {rss_counted:.0f} MB; genomes scored counted {evaluator.path_counts['counted']}, "
              f"by the exact path {evaluator.path_counts['exact']} (valid and invalid)")
    print(f"private memory now: {private_mb():.0f} MB")
    print(f"valid genomes: median {median:.3f} s per evaluation (n={len(valid_times)}, "
          f"p90 {sorted(valid_times)[int(0.9 * len(valid_times))]:.3f} s, max {max(valid_times):.3f} s)")
    print(f"all {len(valid_times) + len(invalid_times)} evaluations: {total_seconds:.1f} s, "
          f"{total_seconds / len(valid_times):.3f} s per valid genome; process CPU {cpu_seconds:.1f} s, "
          f"{cpu_seconds / len(valid_times):.3f} s per valid genome")
    print(f"invalid genomes: median {statistics.median(invalid_times):.4f} s (n={len(invalid_times)})")
    print(f"fresh statistics for the same {len(archs)} architectures: {fresh_total:.1f} s "
          f"(mean {statistics.mean(fresh):.2f} s over {len(fresh)} timed)")
    print(f"ratio fresh / cached: {fresh_total / median:.0f}x")


if __name__ == "__main__":
    main()
