"""How the default of the table search was chosen: candidate settings of :class:`TableSearchSettings` compared
on labelled proxy tables with few labels.

For each table of the folder (the flexibert table with its standard column names: the package's), each k and each
draw (seeded, the same for every candidate), k rows keep their label; every candidate searches a weighted formula
on them (:func:`autoprox.search.table_search.fit_table_proxy`) and is judged by Kendall tau-b on the other labelled
rows, beside ridge on the ranks of every column (the linear member alone) and the better of params and flops
judged on those rows (after the fact). Prints per candidate the mean over tables per k, and how many tables it
leads the size count and is at or above ridge on.

Usage::

    python benchmarks/table_default.py TABLE_DIR --ks 20,50,100 --draws 2 --json /tmp/table-default.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from joblib import Parallel, delayed
from scipy.stats import kendalltau, rankdata

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from autoprox.data.proxy_tables import read_proxy_table  # noqa: E402
from autoprox.proxies.weighted_fit import ridge_loo, usable_columns  # noqa: E402
from autoprox.search.table_search import TableSearchSettings, fit_table_proxy  # noqa: E402

#: The candidates compared (name -> settings other than the defaults). The first five are the linear basis's, as
#: they were compared before the ffx basis became the default.
CANDIDATES = {
    "best-1": {"basis": "linear", "average_top": 1},
    "top-5": {"basis": "linear", "average_top": 5},
    "top-5-margin": {"basis": "linear", "average_top": 5, "cap_margin": 0.01},
    "top-10": {"basis": "linear", "average_top": 10},
    "top-20": {"basis": "linear", "average_top": 20},
    "ffx": {"basis": "ffx"},
    "ffx-best-1": {"basis": "ffx", "average_top": 1},
    "ffx-ridge": {"basis": "ffx", "term_caps": (0,)},
}


def column_ranks(values: np.ndarray) -> np.ndarray:
    finite = np.isfinite(values)
    out = np.full(len(values), 0.5)
    out[finite] = rankdata(values[finite]) / finite.sum()
    return out


def one_table(path: Path, ks, draws: int, candidates: dict) -> list[dict]:
    table = read_proxy_table(path)
    target = table.targets[0]
    truth = table.accuracies[target]
    columns = {name: table.proxies[name] for name in usable_columns(table.proxies)}
    features = np.column_stack([column_ranks(v) for v in columns.values()])
    labelled = np.flatnonzero(np.isfinite(truth))
    out = []
    for k in ks:
        if k > 0.6 * len(labelled):
            continue
        for draw in range(draws):
            pick = np.random.default_rng(1000 + draw).permutation(labelled)[:k]
            mask = np.zeros(len(truth), dtype=bool)
            mask[pick] = True
            judged = ~mask & np.isfinite(truth)
            row = {"table": table.name, "k": k, "draw": draw}
            row["size"] = max(kendalltau(columns[c][judged], truth[judged], nan_policy="omit").statistic
                              for c in ("params", "flops") if c in columns)
            model = ridge_loo(features[mask], rankdata(truth[mask]) / k)
            row["ridge"] = kendalltau(model.predict(features[judged]), truth[judged]).statistic
            for name, settings in candidates.items():
                start = time.perf_counter()
                scores = fit_table_proxy(table.proxies, np.where(mask, truth, np.nan), seed=draw,
                                         settings=TableSearchSettings(**settings))
                row[name] = kendalltau(scores[judged], truth[judged]).statistic
                row[name + "_seconds"] = time.perf_counter() - start
            out.append(row)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder")
    parser.add_argument("--ks", default="20,50")
    parser.add_argument("--draws", type=int, default=2)
    parser.add_argument("--candidates", default=",".join(CANDIDATES))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    ks = [int(k) for k in args.ks.split(",")]
    candidates = {name: CANDIDATES[name] for name in args.candidates.split(",")}
    tables = sorted(Path(args.folder).glob("*.csv*"))
    rows = [r for part in Parallel(n_jobs=args.jobs)(delayed(one_table)(t, ks, args.draws, candidates)
                                                    for t in tables) for r in part]
    for k in ks:
        at_k = [r for r in rows if r["k"] == k]
        names = sorted({r["table"] for r in at_k})
        mean = {m: np.array([np.mean([r[m] for r in at_k if r["table"] == n]) for n in names])
                for m in ("size", "ridge", *candidates)}
        print(f"k={k}, {len(names)} tables, {args.draws} draws: size {mean['size'].mean():+.3f}, ridge "
              f"{mean['ridge'].mean():+.3f}")
        for name in candidates:
            seconds = np.median([r[name + "_seconds"] for r in at_k])
            print(f"  {name:<14} {mean[name].mean():+.3f}  ahead of size on {int((mean[name] > mean['size']).sum())}, "
                  f"at or above ridge on {int((mean[name] >= mean['ridge']).sum())}; median {seconds:.1f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
