"""Seconds per architecture of every built-in proxy (the zoo, the published genomes, params/flops).

For the smallest and largest architecture (by parameters) of each space's shared benchmark
file, default statistics input (8 gaussian images, 100 classes), single-threaded as the
ranking runs them, the median of ``--repeats`` runs. A zoo proxy's time covers the network
build, the batch and its own passes; a genome proxy's covers reading the cached statistics
and evaluating the tree (the statistics themselves cost what ``bench_statistics.py``
reports, once per architecture and seed, shared by every genome). Usage:
python benchmarks/bench_zoo.py [--repeats 3] [--proxies snip,dss]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import machine, median_seconds, peak_rss_mb  # noqa: E402

from autoprox.data.benchmark import default_bench_path, load_benchmark  # noqa: E402
from autoprox.data.cache import StatisticsCache, StatsRequest  # noqa: E402
from autoprox.genome.tree import score_architecture  # noqa: E402
from autoprox.networks.statistics import InputSpec, torch_threads  # noqa: E402
from autoprox.proxies.zoo import ZOO  # noqa: E402
from autoprox.proxies.zoo_scores import raw_value  # noqa: E402
from autoprox.proxies.proxy import BUILTIN_PROXIES, resolve_proxy  # noqa: E402
from autoprox.proxies.scorers import ARCHITECTURE_PROXIES
from autoprox.spaces.architectures import count_params  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--proxies", default=",".join(BUILTIN_PROXIES), help="comma list (default: every built-in)")
    args = parser.parse_args()
    names = [n for n in args.proxies.split(",") if n and n != "tvt"]  # tvt without a teacher is tvt_l2
    spec = InputSpec()
    print(f"machine: {machine()}; median of {args.repeats} runs, single-threaded, batch {spec.batch_size}")
    columns = []
    rows: dict[str, list[str]] = {name: [] for name in names}
    with tempfile.TemporaryDirectory() as root:
        cache = StatisticsCache(root)
        for space in ("autoformer", "pit"):
            bench = load_benchmark(default_bench_path(space))
            order = sorted(bench.archs, key=count_params)
            for label, arch in (("smallest", order[0]), ("largest", order[-1])):
                columns.append(f"{space} {label} ({count_params(arch) / 1e6:.1f} M)")
                request = StatsRequest(arch, spec, 0, 100)
                cache.get(request)  # computed once, outside the timings
                for name in names:
                    proxy = resolve_proxy(name)
                    if proxy.kind == "zoo":
                        def job(name=name, arch=arch):
                            return raw_value(name, arch, spec, 0, 100)
                    elif proxy.kind == "genome":
                        def job(tree=proxy.genome, request=request):
                            with torch_threads(1):
                                return score_architecture(tree, cache.get(request))
                    else:
                        def job(name=name, arch=arch):
                            return ARCHITECTURE_PROXIES[name](arch)
                    median, _ = median_seconds(job, args.repeats)
                    rows[name].append(f"{median:.3f}" if median >= 0.001 else f"{median:.1e}")
                    print(f"  {space} {label} {name}: {median:.4f} s", file=sys.stderr, flush=True)
    print()
    print("| proxy | pass | " + " | ".join(columns) + " |")
    print("|---|---|" + "---|" * len(columns))
    for name in names:
        proxy = resolve_proxy(name)
        what = (ZOO[name].passes or "initialised weights") if proxy.kind == "zoo" else (
            "cached statistics" if proxy.kind == "genome" else "architecture")
        print(f"| {name} | {what} | " + " | ".join(rows[name]) + " |")
    print(f"\npeak memory {peak_rss_mb():.0f} MB")


if __name__ == "__main__":
    main()
