"""One machine's local processes against a Dask ``LocalCluster`` of two workers, for a cache build
and for a short search, through the command line as a user runs them.

Each case runs ``autoprox`` in a subprocess and records its wall time and its CPU time (the
children's user + system, which includes the Dask workers it starts), with the machine's load
average before and after: on a shared machine the wall time measures the other jobs too.

* ``cache build``: the first ``--archs`` AutoFormer architectures of ViT-Bench-101 (a benchmark
  file cut to them, written under the temporary folder) into an empty temporary cache, with
  ``--workers 1``, ``--workers 2`` and ``--scheduler local:2``.
* ``search``: ``--iterations`` iterations on the full AutoFormer benchmark with the warm default
  cache, with ``--workers 1`` and ``--scheduler local:2`` (the statistics sharded on the workers).

Usage: python benchmarks/bench_cluster.py [--archs 16] [--iterations 20]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import machine  # noqa: E402

from autoprox.data.benchmark import default_bench_path, load_benchmark  # noqa: E402


def run_cli(arguments: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the command and everything it started) of ``autoprox ARGUMENTS``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "autoprox.cli", *arguments], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def cut_benchmark(count: int, folder: Path) -> Path:
    """The first ``count`` AutoFormer architectures of the released file, as a benchmark file of their own."""
    import torch

    source = default_bench_path("autoformer")
    bench = load_benchmark(source)
    data = torch.load(source, weights_only=True)  # the released format: a list of architecture records
    assert len(bench) >= count
    path = folder / "autoformer-first.pth"
    torch.save(list(data)[:count], path)
    return path


def case(label: str, arguments: list[str]) -> None:
    """Run one case once (a cache build needs an empty cache each time) and print its table row."""
    load_before = os.getloadavg()[0]
    wall, cpu = run_cli(arguments)
    print(f"| {label} | {wall:.1f} | {cpu:.1f} | {load_before:.1f} -> {os.getloadavg()[0]:.1f} |", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--archs", type=int, default=16, help="architectures of the cache build")
    parser.add_argument("--iterations", type=int, default=20, help="iterations of the search")
    args = parser.parse_args(argv)
    print(f"machine: {machine()}")
    print("| case | wall s | CPU s, all processes | load before -> after |")
    print("|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="autoprox-bench-cluster-") as folder:
        folder = Path(folder)
        bench = cut_benchmark(args.archs, folder)
        for label, parallel in (("workers 1", ["--workers", "1"]), ("workers 2", ["--workers", "2"]),
                                ("LocalCluster 2", ["--scheduler", "local:2"])):
            cache = folder / f"cache-{label.replace(' ', '-')}"
            case(f"cache build, {args.archs} architectures, {label}",
                 ["cache", "build", "--bench", str(bench), "--cache-dir", str(cache), *parallel])
        for label, parallel in (("workers 1", ["--workers", "1"]), ("LocalCluster 2", ["--scheduler", "local:2"])):
            out = folder / f"search-{label.replace(' ', '-')}"
            case(f"search, AutoFormer 60/40, {args.iterations} iterations, warm cache, {label}",
                 ["search", "--space", "autoformer", "--iterations", str(args.iterations), "--out", str(out),
                  *parallel])
    return 0


if __name__ == "__main__":
    sys.exit(main())
