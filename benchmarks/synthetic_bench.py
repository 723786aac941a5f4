"""SYNTHETIC benchmark for speed measurements only: never for results, never under runs/.

Writes a SYNTHETIC AutoFormer benchmark in the project's JSON Lines format: ``--archs``
architectures sampled from the space with ``random.Random(--seed)``, and for each of the
four default targets a synthetic accuracy, a seeded function of the architecture (a
saturating curve of the parameter count plus seeded noise). The numbers mean nothing
about real networks; they only give the search something to rank, so that time and
memory can be measured at 60, 250 and 500 architectures (``benchmarks/bench_scaling.py``).
The file name starts with ``SYNTHETIC-`` and it must lie under /tmp.

Usage: python benchmarks/synthetic_bench.py --archs 500 --seed 0 --out /tmp/autoprox-synthetic/SYNTHETIC-af500.jsonl
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from pathlib import Path

import numpy as np

from autoprox.data.benchmark import Benchmark, write_benchmark_jsonl
from autoprox.spaces.architectures import count_params, sample_arch

TARGETS = ("c100_kd", "flower_kd", "chaoyang_kd", "imagenet_super")
BANNER = "SYNTHETIC benchmark (speed measurements only; accuracies are a seeded synthetic function)"


def synthetic_accuracies(archs, seed: int) -> dict[str, np.ndarray]:
    """Per target: 60 + 25 * (1 - exp(-params / 8M)) + N(0, 1.5), each target its own noise seed."""
    millions = np.array([count_params(a) / 1e6 for a in archs])
    base = 60.0 + 25.0 * (1.0 - np.exp(-millions / 8.0))
    return {t: base + np.random.default_rng([seed, i]).normal(0.0, 1.5, len(archs)) for i, t in enumerate(TARGETS)}


def synthetic_benchmark(count: int, seed: int) -> Benchmark:
    """A SYNTHETIC AutoFormer benchmark of ``count`` sampled architectures (distinct)."""
    rng = random.Random(seed)
    archs, seen = [], set()
    while len(archs) < count:
        arch = sample_arch("autoformer", rng)
        if repr(arch) not in seen:
            seen.add(repr(arch))
            archs.append(arch)
    return Benchmark("autoformer", tuple(archs), synthetic_accuracies(archs, seed), source=BANNER)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--archs", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True, help="a SYNTHETIC-*.jsonl path under /tmp")
    args = parser.parse_args()
    out = Path(args.out).resolve()
    if not out.name.startswith("SYNTHETIC-") or out.suffix != ".jsonl":
        sys.exit("synthetic_bench: the output name must be SYNTHETIC-*.jsonl")
    if not str(out).startswith("/tmp/") or "runs" in out.parts:
        sys.exit("synthetic_bench: a SYNTHETIC benchmark is written under /tmp only (never under runs/)")
    out.parent.mkdir(parents=True, exist_ok=True)
    bench = synthetic_benchmark(args.archs, args.seed)
    write_benchmark_jsonl(bench, out)
    print(f"{BANNER}: {len(bench.archs)} AutoFormer architectures, seed {args.seed} -> {out}")
    if not math.isfinite(float(np.mean(bench.accuracies[TARGETS[0]]))):  # pragma: no cover
        sys.exit("synthetic_bench: non-finite accuracies")


if __name__ == "__main__":
    main()
