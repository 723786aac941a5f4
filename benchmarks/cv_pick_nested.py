"""``cv-pick`` with the searched proxy searched again on each inner training part (nested cross-validation).

``benchmarks/cv_pick_optimism.py`` measured that ``cv-pick``'s inner folds judge the run's searched proxy on
architectures it was evolved on, while the blend and the coarse descriptor are fitted again on each inner
training part. This script scores every candidate alike: for each fold run of a finished protocol and each of
the selection's own inner folds of its search part (``search_part_folds``: 5 folds of the 50 labelled ViTs,
seeded by the run's split seed), it runs the fold's search again with the same settings on the inner training
part alone (``split_indices``: those 40 ViTs), into a scratch folder (resumable), and takes that search's best
proxy as the ``best`` part on the inner test fold. Every other part is fitted as ``cv-pick`` fits it. The
candidate with the best mean inner Kendall per target is chosen (ties to the earlier, as ``cv-pick``); its
figure on the fold's test part is the candidate's, fitted or searched on the whole search part, as
``cv_pick_optimism.py`` recorded it (``runs/few-labels/vit-k50/cv-pick-optimism-SPACE.json``). It prints the
rule's KD-3 over the folds beside ``cv-pick``'s and ridge's (``fits.json``), with the paired difference to ridge
(bootstrap and corrected intervals, as ``few_labels_vit.py``).

Set before it ran (2026-12-06): ``cv-pick-coarse``'s candidates, the five inner folds of the selection, both
spaces' 20 folds of ``runs/few-labels/vit-k50/``; its figures are reported whatever they give. It is a
measurement: no default changes by it.

Usage (the fold runs unpacked from the protocol's archive as ``cv_pick_optimism.py`` does; 100 inner searches a
space, about 40 s each here, two at a time)::

    python benchmarks/cv_pick_nested.py runs/few-labels/vit-k50/pit-gene-arch-cv-pick-coarse --scratch DIR \\
        --json OUT.json --workers 2
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from joblib import Parallel, delayed  # noqa: E402

from autoprox.apps.protocols.jobs import search_job  # noqa: E402
from autoprox.apps.protocols.summary import t_interval  # noqa: E402
from autoprox.apps.selection import (SearchPartScores, inner_fold_kendalls, inner_mean, search_part_folds,  # noqa: E402
                                     select_best)
from autoprox.core.correlation import correlate  # noqa: E402
from autoprox.proxies.ensemble import quantile  # noqa: E402
from autoprox.search.context import RunContext  # noqa: E402
from cv_pick_optimism import CANDIDATES, unpacked  # noqa: E402
from few_labels_vit import bootstrap_interval  # noqa: E402


def inner_jobs(folder: Path, record: dict, scratch: Path) -> list[tuple]:
    """(settings JSON, benchmark path, inner run folder) of every inner search of every fold."""
    jobs = []
    for fold in record["folds"]:
        run = folder / fold["run"]
        context = RunContext.open(run)
        search = context.indices("search")
        for k, test in enumerate(search_part_folds(context)):
            train = [search[i] for i in range(len(search)) if i not in set(test)]
            settings = replace(context.settings, split_indices=tuple(train), workers=1)
            jobs.append((settings.to_json(), str(context.bench.source), str(scratch / fold["run"] / f"inner-{k}")))
    return jobs


def nested_choice(run: Path, inner_root: Path) -> dict:
    """Per target: each candidate's mean inner Kendall with ``best`` from the inner searches, and the choice."""
    context = RunContext.open(run)
    scores = SearchPartScores(run, context)
    folds = search_part_folds(context)
    inner_best = []
    for k in range(len(folds)):
        proxy = select_best(inner_root / f"inner-{k}")
        inner_best.append(context.score(proxy, "search", workers=1))
    table, chosen = {}, {}
    for target in context.targets:
        classes = context.plan.target_classes[target]
        given = {"best": [values[classes] for values in inner_best]}
        means = {candidate: inner_mean(inner_fold_kendalls(scores, candidate, target, folds, given))
                 for candidate in CANDIDATES}
        table[target] = means
        chosen[target] = max(CANDIDATES, key=lambda c: means[c])
    return {"inner": table, "chosen": chosen}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("protocol")
    parser.add_argument("--scratch", required=True, help="where the fold runs are unpacked and the inner searches run")
    parser.add_argument("--json", default=None)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--first", type=int, default=None, help="only the first N folds (a trial; not a figure)")
    args = parser.parse_args(argv)
    scratch = Path(args.scratch)
    scratch.mkdir(parents=True, exist_ok=True)
    protocol = Path(args.protocol)
    copy = scratch / protocol.name
    folder = copy if (copy / "protocol.json").is_file() else unpacked(protocol, scratch)
    record = json.loads((folder / "protocol.json").read_text())
    if args.first is not None:
        record["folds"] = record["folds"][:args.first]
    space = record["space"]
    inner_root = scratch / f"inner-{space}"
    jobs = inner_jobs(folder, record, inner_root)
    print(f"{space}: {len(jobs)} inner searches", flush=True)
    done = Parallel(n_jobs=args.workers, verbose=10)(delayed(search_job)(*job) for job in jobs)
    assert all(d["finished"] for d in done)
    optimism = json.loads((REPO / "runs" / "few-labels" / "vit-k50" / f"cv-pick-optimism-{space}.json").read_text())
    by_run = {f["run"]: f for f in optimism["folds"]}
    fits = next(e for e in json.loads((REPO / "runs" / "few-labels" / "vit-k50" / "fits.json").read_text())
                if e["space"] == space and e["folds"] == 20
                and e["protocol"].endswith(protocol.name))
    folds, nested_kd3 = [], []
    for fold in record["folds"]:
        choice = nested_choice(folder / fold["run"], inner_root / fold["run"])
        test = by_run[fold["run"]]["test"]
        figures = {t: test[choice["chosen"][t]][t] for t in record["targets"]}
        folds.append({"run": fold["run"], **choice, "test": figures})
        nested_kd3.append(float(np.mean(list(figures.values()))))
        print(f"  {fold['run']}: chose {choice['chosen']}, test KD-3 {nested_kd3[-1]:.3f}", flush=True)
    nested_kd3 = np.asarray(nested_kd3)
    ridge = np.asarray(fits["per_fold_kd3"]["ridge"][:len(folds)])
    pick = np.asarray(fits["per_fold_kd3"]["proxy"][:len(folds)])
    diff = nested_kd3 - ridge
    corrected = t_interval(diff, inflation=1.0)
    targets = record["targets"]
    pairs = len(folds) * len(targets)
    counts = {c: sum(f["chosen"][t] == c for f in folds for t in targets) for c in CANDIDATES}
    summary = {"kd3": float(nested_kd3.mean()), "cv_pick_kd3": float(pick.mean()), "ridge_kd3": float(ridge.mean()),
               "per_target": {t: float(np.mean([f["test"][t] for f in folds])) for t in targets},
               "minus_ridge": {"mean": float(diff.mean()), "interval": bootstrap_interval(diff),
                               "corrected": [corrected["low"], corrected["high"]], "ahead": int((diff > 0).sum())},
               "minus_cv_pick": float((nested_kd3 - pick).mean()), "chosen": counts}
    print(f"{space}, {len(folds)} folds: nested cv-pick-coarse KD-3 {summary['kd3']:.3f} (per target "
          + ", ".join(f"{t} {v:.3f}" for t, v in summary["per_target"].items())
          + f"); cv-pick-coarse {summary['cv_pick_kd3']:.3f}; ridge {summary['ridge_kd3']:.3f}")
    m = summary["minus_ridge"]
    print(f"  minus ridge {m['mean']:+.3f} bootstrap [{m['interval'][0]:+.3f}, {m['interval'][1]:+.3f}] corrected "
          f"[{m['corrected'][0]:+.3f}, {m['corrected'][1]:+.3f}], ahead on {m['ahead']}/{len(folds)}; chosen "
          + ", ".join(f"{c} {n}/{pairs}" for c, n in counts.items()))
    if args.json:
        given = protocol.resolve()
        name = str(given.relative_to(REPO)) if given.is_relative_to(REPO) else str(given)
        Path(args.json).write_text(json.dumps({"protocol": name, "space": space, "inner_folds": len(
            search_part_folds(RunContext.open(folder / record["folds"][0]["run"]))), "folds": folds,
            "summary": summary}, separators=(",", ":")) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
