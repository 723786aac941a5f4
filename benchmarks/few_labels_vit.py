"""The statistics engine against fits of the zoo's columns with the same labels, on AutoFormer and PiT.

The committed outer-fold protocols (``runs/protocol/*/protocol.json``, ``autoprox evaluate --folds 5 --repeats
3``) ran a whole search of the per-block statistics on each fold's search part (80 labelled ViTs) and judged its
proxy on the fold's 20 others, per KD target. On exactly those folds this script fits, with the same 80 labels:

* ``ridge``: ridge on the ranks of every column of the packaged proxy table of the space (``params``, ``flops``
  and the zoo's proxies computed on the same networks), the penalty by leave-one-out;
* ``table-engine``: the table search (``search --bench TABLE.csv``: a weighted formula over the same columns);

and reads the protocol's own figures for the statistics engine (``proxy``) and its descriptor blend. It prints the
mean test Kendall per method and target over the folds, and the paired difference of the statistics engine to
each fit with a bootstrap interval over folds. It runs no network: a few seconds per fold for the table engine.

Usage::

    python benchmarks/few_labels_vit.py runs/protocol/autoformer-best-patience30-cv-pick \\
        runs/protocol/pit-best-cv-pick --json /tmp/few-labels-vit.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from scipy.stats import kendalltau, rankdata

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from autoprox.data.benchmark import default_bench_path, load_benchmark  # noqa: E402
from autoprox.data.proxy_tables import load_table_space  # noqa: E402
from autoprox.proxies.weighted_fit import ridge_loo  # noqa: E402
from autoprox.search.table_search import fit_table_proxy  # noqa: E402
from autoprox.spaces.architectures import arch_to_config  # noqa: E402

KD = ("c100_kd", "flower_kd", "chaoyang_kd")


def column_ranks(values: np.ndarray) -> np.ndarray:
    finite = np.isfinite(values)
    out = np.full(len(values), 0.5)
    out[finite] = rankdata(values[finite]) / finite.sum()
    return out


def aligned_table(space: str):
    """The packaged table of ``space`` with its rows in the benchmark's order."""
    table = load_table_space(space).tables[0]
    bench = load_benchmark(default_bench_path(space))
    order = {json.dumps(json.loads(ident), sort_keys=True): i for i, ident in enumerate(table.ids)}
    rows = [order[json.dumps(arch_to_config(arch), sort_keys=True)] for arch in bench.archs]
    return table.subset(rows)


def bootstrap_interval(values: np.ndarray, seed: int = 0, samples: int = 2000) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    means = [rng.choice(values, len(values)).mean() for _ in range(samples)]
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def one_protocol(path: Path, repeats: int | None = None) -> dict:
    record = json.loads((path / "protocol.json").read_text())
    if repeats is not None:
        record["folds"] = [f for f in record["folds"] if int(f["repeat"]) < repeats]
    space = record["space"]
    table = aligned_table(space)
    columns = table.proxies
    features = np.column_stack([column_ranks(v) for v in columns.values()])
    per = {m: {t: [] for t in KD} for m in ("proxy", "blend", "ridge", "table-engine")}
    for fold in record["folds"]:
        search, test = np.asarray(fold["search"]), np.asarray(fold["test"])
        kendall = fold["result"]["kendall"]
        for target in KD:
            truth = table.accuracies[target]
            per["proxy"][target].append(kendall["proxy"][target])
            per["blend"][target].append(kendall["blend"][target])
            model = ridge_loo(features[search], rankdata(truth[search]) / len(search))
            per["ridge"][target].append(kendalltau(model.predict(features[test]), truth[test]).statistic)
            labels = np.full(len(truth), np.nan)
            labels[search] = truth[search]
            scores = fit_table_proxy(columns, labels, seed=int(fold["repeat"]) * 10 + int(fold["fold"]))
            per["table-engine"][target].append(kendalltau(scores[test], truth[test]).statistic)
    summary = {"protocol": str(path), "space": space, "folds": len(record["folds"]), "labelled": len(search),
               "mean": {m: {t: float(np.mean(v)) for t, v in d.items()} for m, d in per.items()},
               "kd3": {m: float(np.mean([np.mean(v) for v in d.values()])) for m, d in per.items()}}
    proxy = np.mean([per["proxy"][t] for t in KD], axis=0)
    summary["difference"] = {}
    for method in ("ridge", "table-engine", "blend"):
        other = np.mean([per[method][t] for t in KD], axis=0)
        diff = proxy - other
        summary["difference"][method] = {"mean": float(diff.mean()), "interval": bootstrap_interval(diff),
                                         "ahead": int((diff > 0).sum())}
    return summary


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("protocols", nargs="+")
    parser.add_argument("--repeats", type=int, default=None, help="only the folds of the first R repeats")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    results = [one_protocol(Path(p), args.repeats) for p in args.protocols]
    for r in results:
        print(f"{r['protocol']} ({r['space']}, {r['folds']} folds of {r['labelled']} labelled ViTs): KD-3 mean test "
              "Kendall " + ", ".join(f"{m} {v:+.3f}" for m, v in r["kd3"].items()))
        for method, d in r["difference"].items():
            print(f"  statistics engine - {method}: {d['mean']:+.3f} [{d['interval'][0]:+.3f}, {d['interval'][1]:+.3f}]"
                  f", ahead on {d['ahead']} of {r['folds']} folds")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
