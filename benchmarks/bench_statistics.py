"""Seconds per architecture to compute the eight statistics, and cache megabytes per entry.

For the smallest and largest architecture (by parameters) of each space's shared
benchmark file, batch 8 and 16, single-threaded (as the engine computes them), the
median of ``--repeats`` runs. Usage: python benchmarks/bench_statistics.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import machine, median_seconds  # noqa: E402

from autoprox.data.benchmark import default_bench_path, load_benchmark  # noqa: E402
from autoprox.data.cache import StatisticsCache, StatsRequest  # noqa: E402
from autoprox.networks.statistics import InputSpec, compute_statistics  # noqa: E402
from autoprox.spaces.architectures import count_params  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"machine: {machine()}")
    print("| space | arch | params | batch | s/arch (median) | runs | cache MB (float16) | cache MB (float32) |")
    print("|---|---|---|---|---|---|---|---|")
    for space in ("autoformer", "pit"):
        bench = load_benchmark(default_bench_path(space))
        order = sorted(bench.archs, key=count_params)
        for label, arch in (("smallest", order[0]), ("largest", order[-1])):
            for batch in (8, 16):
                spec = InputSpec("gaussian", batch)
                median, times = median_seconds(lambda: compute_statistics(arch, spec, 0, 100), args.repeats)
                sizes = []
                for precision in ("float16", "float32"):
                    with tempfile.TemporaryDirectory() as root:
                        cache = StatisticsCache(root, precision)
                        request = StatsRequest(arch, spec, 0, 100)
                        cache.save(request, compute_statistics(arch, spec, 0, 100))
                        sizes.append(cache.size_bytes(request) / 1e6)
                runs = ", ".join(f"{t:.2f}" for t in times)
                print(f"| {space} | {label} | {count_params(arch):,} | {batch} | {median:.2f} | {runs} "
                      f"| {sizes[0]:.1f} | {sizes[1]:.1f} |", flush=True)


if __name__ == "__main__":
    main()
