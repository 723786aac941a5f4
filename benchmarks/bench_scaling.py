"""Fitness time and memory against the number of architectures, on a SYNTHETIC benchmark.

For each size of ``--sizes`` (default 60,250,500): the first N architectures of one
SYNTHETIC AutoFormer benchmark (``benchmarks/synthetic_bench.py``: sampled architectures,
synthetic accuracies, for speed only), their statistics (batch 8, seed 0, float16) built
into ``--cache-dir`` (under /tmp: about 24 MB per architecture, 12 GB at 500) with
``--workers`` processes, then held memory-mapped, and the median seconds per valid genome
evaluation over ``--genomes`` random template genomes (4 targets, one thread). Prints one
table row per size: seconds per evaluation, per architecture, load time, private and
file-backed resident memory. Delete the cache directory afterwards (``--clean``).

Usage: python benchmarks/bench_scaling.py --cache-dir /tmp/autoprox-synthetic-cache --sizes 60,250,500 --clean
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import machine  # noqa: E402
from synthetic_bench import BANNER, TARGETS, synthetic_benchmark  # noqa: E402

from autoprox.data.cache import StatisticsCache, StatsPlan, build_cache, load_statistics  # noqa: E402
from autoprox.genome.template import random_template
from autoprox.networks.statistics import InputSpec, torch_threads  # noqa: E402
from autoprox.search.fitness import FitnessEvaluator  # noqa: E402


def resident_mb() -> tuple[float, float]:
    """(private, file-backed) resident memory of this process, in MB."""
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
    return int(fields["RssAnon"].split()[0]) / 1024, int(fields["RssFile"].split()[0]) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="60,250,500")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--genomes", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cache-dir", required=True, help="a statistics cache of its own, under /tmp")
    parser.add_argument("--clean", action="store_true", help="delete --cache-dir at the end")
    args = parser.parse_args()
    root = Path(args.cache_dir).resolve()
    if not str(root).startswith("/tmp/"):
        sys.exit("bench_scaling: the SYNTHETIC statistics cache goes under /tmp")
    sizes = [int(s) for s in args.sizes.split(",")]
    bench = synthetic_benchmark(max(sizes), args.seed)
    plan = StatsPlan(InputSpec(), (0,), {t: 100 for t in TARGETS})
    cache = StatisticsCache(root)
    print(f"{BANNER}\nmachine: {machine()}")
    print("| architectures | s per evaluation (median) | ms per architecture | load s | private MB | file MB |")
    print("|---|---|---|---|---|---|")
    try:
        for size in sizes:
            archs = list(bench.archs[:size])
            build_cache(cache, plan.requests(archs), workers=args.workers)
            start = time.perf_counter()
            stats = load_statistics(cache, plan, archs, mapped=True)
            load = time.perf_counter() - start
            accuracies = {t: bench.accuracies[t][:size] for t in TARGETS}
            evaluator = FitnessEvaluator.from_statistics(stats, accuracies, TARGETS, plan.target_classes)
            rng, times = random.Random(0), []
            with torch_threads(1):
                while len(times) < args.genomes:
                    tree = random_template(rng)
                    start = time.perf_counter()
                    record = evaluator.evaluate(tree)
                    if record.valid:
                        times.append(time.perf_counter() - start)
            median = statistics.median(times)
            private, mapped = resident_mb()
            print(f"| {size} (SYNTHETIC) | {median:.3f} | {1000 * median / size:.2f} | {load:.1f} | "
                  f"{private:.0f} | {mapped:.0f} |", flush=True)
            del stats, evaluator
    finally:
        if args.clean:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
