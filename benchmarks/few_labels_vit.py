"""The statistics engine against fits of the zoo's columns with the same labels, on AutoFormer and PiT.

An outer-fold protocol (``autoprox evaluate --space S --folds 2 --repeats 5``: each fold's search part holds
50 of the space's 100 labelled ViTs, its test part the other 50) runs a whole search of the per-block
statistics on each fold's search part and judges its proxy on the test part, per KD target. On exactly those
folds this script fits, with the same 50 labels:

* each few-label method of ``evaluate --few-labels`` (``FEW_LABEL_METHODS``: ``size``, ``best-column``,
  ``ridge``, ``forest``, ``engine``, the last the table search ``search --bench TABLE.csv``) on the columns of
  the packaged proxy table of the space (``params``, ``flops`` and the zoo's proxies computed on the same
  networks) together with the coarse descriptors of each architecture (depth, width, heads, MLP ratio, MACs),

and reads the protocol's own figures for the statistics engine (``proxy``) and its descriptor blend. It prints the
mean test Kendall per method and target over the folds, and the paired difference of the statistics engine to
each fit with two intervals over folds: a bootstrap of the folds' differences, which treats the folds as
independent, and the t-interval with Nadeau and Bengio's correction (``1/n`` replaced by ``1/n + n_test/n_search``),
the one ``evaluate``'s summaries give beside their plain interval: the folds of one space share its 100 ViTs, so
the first understates the spread. It runs no network: about 25 s a fold here (the forest and
the table engine, three targets).

Usage (the protocols of ``runs/few-labels/vit-k50/``; their trimmed ``protocol.json`` is enough; the protocols
of one space over the same folds share their fits; ``--repeats all,5`` summarises each protocol over all its
folds and over those of the first five repeats)::

    python benchmarks/few_labels_vit.py runs/few-labels/vit-k50/autoformer-gene-arch-cv-pick-coarse \\
        runs/few-labels/vit-k50/autoformer-gene-arch-cv-pick-ridge runs/few-labels/vit-k50/pit-gene-arch-cv-pick-coarse \\
        runs/few-labels/vit-k50/pit-gene-arch-cv-pick-ridge runs/few-labels/vit-k50/pit-gene-arch-cv-pick-wide \\
        --repeats all,5 --json FITS.json

``runs/few-labels/vit-k50/fits.json`` is that command's: the first four over all 20 folds (``"repeats": 10``) and
over the first ten (``"repeats": 5``), ``pit-gene-arch-cv-pick-wide`` over its ten. Each entry keeps the per-fold
KD-3 of every method.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from scipy.stats import kendalltau

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from autoprox.apps.protocols.few_labels import FEW_LABEL_METHODS  # noqa: E402
from autoprox.apps.protocols.summary import t_interval  # noqa: E402
from autoprox.data.benchmark import default_bench_path, load_benchmark  # noqa: E402
from autoprox.data.proxy_tables import load_table_space  # noqa: E402
from autoprox.spaces.architectures import arch_to_config  # noqa: E402
from autoprox.spaces.descriptors import descriptor_columns  # noqa: E402

KD = ("c100_kd", "flower_kd", "chaoyang_kd")
#: The few-label methods fitted on each fold's labelled part.
METHODS = ("size", "best-column", "ridge", "forest", "engine")


def aligned_table(space: str):
    """The packaged table of ``space`` with its rows in the benchmark's order, and its columns with the coarse
    descriptors added (``macs``, ``depth``, ``width``, ``heads``, ``mlp_ratio``; ``params`` is the table's)."""
    table = load_table_space(space).tables[0]
    bench = load_benchmark(default_bench_path(space))
    order = {json.dumps(json.loads(ident), sort_keys=True): i for i, ident in enumerate(table.ids)}
    rows = [order[json.dumps(arch_to_config(arch), sort_keys=True)] for arch in bench.archs]
    table = table.subset(rows)
    columns = dict(table.proxies)
    for name, values in descriptor_columns(bench.archs).items():
        columns.setdefault(name, values)
    return table, columns


def bootstrap_interval(values: np.ndarray, seed: int = 0, samples: int = 2000) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    means = [rng.choice(values, len(values)).mean() for _ in range(samples)]
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def one_protocol(path: Path, repeats: int | None = None, fitted: dict | None = None) -> dict:
    """The figures of one protocol. ``fitted`` keeps each fit's test Kendall by space, labelled rows and target,
    so that protocols over the same folds (a ``--reuse-searches`` re-selection and its searches) fit once."""
    fitted = {} if fitted is None else fitted
    record = json.loads((path / "protocol.json").read_text())
    if repeats is not None:
        record["folds"] = [f for f in record["folds"] if int(f["repeat"]) < repeats]
    space = record["space"]
    table, columns = aligned_table(space)
    methods = [m for m in METHODS if m in FEW_LABEL_METHODS]
    per = {m: {t: [] for t in KD} for m in ("proxy", "blend", *methods)}
    for fold in record["folds"]:
        search, test = np.asarray(fold["search"]), np.asarray(fold["test"])
        kendall = fold["result"]["kendall"]
        seed = int(fold["repeat"]) * 10 + int(fold["fold"])
        for target in KD:
            truth = table.accuracies[target]
            per["proxy"][target].append(kendall["proxy"][target])
            per["blend"][target].append(kendall["blend"][target])
            labels = np.full(len(truth), np.nan)
            labels[search] = truth[search]
            for method in methods:
                key = (space, tuple(search.tolist()), target, method, seed)
                if key not in fitted:
                    scores = FEW_LABEL_METHODS[method].fit(columns, labels, seed)
                    fitted[key] = float(kendalltau(scores[test], truth[test]).statistic)
                per[method][target].append(fitted[key])
        print(f"  {space} repeat {fold['repeat']} fold {fold['fold']}: " + ", ".join(
            f"{m} {np.mean([per[m][t][-1] for t in KD]):+.3f}" for m in per), flush=True)
    summary = {"protocol": str(path), "space": space, "folds": len(record["folds"]), "labelled": len(search),
               "mean": {m: {t: float(np.mean(v)) for t, v in d.items()} for m, d in per.items()},
               "kd3": {m: float(np.mean([np.mean(v) for v in d.values()])) for m, d in per.items()}}
    per_fold = {m: np.mean([d[t] for t in KD], axis=0) for m, d in per.items()}
    summary["repeats"] = 1 + max(int(f["repeat"]) for f in record["folds"])
    summary["per_fold_kd3"] = {m: [float(v) for v in values] for m, values in per_fold.items()}
    inflation = len(test) / len(search)
    summary["difference"] = {}
    for method in (*methods, "blend"):
        diff = per_fold["proxy"] - per_fold[method]
        corrected = t_interval(diff, inflation=inflation)
        summary["difference"][method] = {"mean": float(diff.mean()), "interval": bootstrap_interval(diff),
                                         "corrected": [corrected["low"], corrected["high"]],
                                         "sd": corrected["sd"], "ahead": int((diff > 0).sum())}
    return summary


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("protocols", nargs="+")
    parser.add_argument("--repeats", default="all",
                        help="comma-separated: the folds of the first R repeats, 'all' for every fold (default); "
                             "each protocol is summarised once per distinct set of folds")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    fitted: dict = {}
    counts = [None if r.strip() == "all" else int(r) for r in args.repeats.split(",")]
    results, seen = [], set()
    for count in counts:
        for path in args.protocols:
            summary = one_protocol(Path(path), count, fitted)
            if (path, summary["folds"]) not in seen:
                seen.add((path, summary["folds"]))
                results.append(summary)
    for r in results:
        print(f"{r['protocol']} ({r['space']}, {r['folds']} folds of {r['labelled']} labelled ViTs): KD-3 mean test "
              "Kendall " + ", ".join(f"{m} {v:+.3f}" for m, v in r["kd3"].items()))
        for method, d in r["difference"].items():
            print(f"  statistics engine - {method}: {d['mean']:+.3f} [{d['interval'][0]:+.3f}, {d['interval'][1]:+.3f}]"
                  f" (corrected [{d['corrected'][0]:+.3f}, {d['corrected'][1]:+.3f}], sd {d['sd']:.3f}), ahead on "
                  f"{d['ahead']} of {r['folds']} folds")
    if args.json:
        Path(args.json).write_text(json.dumps(results, separators=(",", ":")) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
