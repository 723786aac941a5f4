"""How far ``cv-pick``'s inner cross-validation misjudges each candidate, on the folds of an outer-fold protocol.

``cv-pick`` (``autoprox/apps/selection.py``) chooses per target among candidates (the run's searched proxy
``best``, the descriptor ``blend``, their average, the ``coarse`` descriptor) by their mean Kendall over inner
folds of the run's search part. The blend and the coarse descriptor are fitted again on each inner training part;
the searched proxy is not searched again: it was evolved on every architecture of the search part, the inner test
folds included, so its inner figure is in-sample. This script measures that, without choosing anything: for each
fold of a finished protocol (``autoprox evaluate --space S --folds 2 ...``) and each candidate alone, the inner
mean Kendall the selection saw and the candidate's Kendall on the fold's test part (architectures no part of the
fold's search saw), then the mean over folds of each, their difference (the candidate's optimism: inner minus test)
and, beside them, the protocol's own figure for the selection's choice and the best candidate per fold and target
chosen after the fact (an upper bound no rule reaches), and how often the selection chose each candidate
(of the fold and target pairs).

Usage (a protocol of ``runs/few-labels/vit-k50/``; its fold runs are unpacked from its archive into a temporary
copy, the statistics are read from the cache, about 2:30 for PiT's 20 folds here)::

    python benchmarks/cv_pick_optimism.py runs/few-labels/vit-k50/pit-gene-arch-cv-pick-coarse --json OUT.json
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from scipy.stats import kendalltau

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from autoprox.apps.selection import CV_PICK_CANDIDATES, select_cv_pick  # noqa: E402
from autoprox.search.context import RunContext  # noqa: E402

#: The candidates judged alone: ``cv-pick-coarse``'s.
CANDIDATES = (*CV_PICK_CANDIDATES, "coarse")


def unpacked(protocol: Path, scratch: Path) -> Path:
    """``protocol`` with its fold runs: the folder itself where they are there, else a copy in ``scratch`` with its
    archive unpacked (``scripts/runs_archive.py unpack``)."""
    record = json.loads((protocol / "protocol.json").read_text())
    if all((protocol / fold["run"] / "best.json").is_file() for fold in record["folds"]):
        return protocol
    copy = scratch / protocol.name
    shutil.copytree(protocol, copy)
    subprocess.run([sys.executable, str(REPO / "scripts" / "runs_archive.py"), "unpack", str(copy)], check=True,
                   stdout=subprocess.DEVNULL)
    return copy


def fold_figures(run: Path, candidates=CANDIDATES) -> dict:
    """Per candidate and target of one fold run: the inner mean Kendall ``cv-pick`` saw and the test Kendall."""
    context = RunContext.open(run)
    archs = context.archs("test")
    figures = {"inner": {}, "test": {}}
    for candidate in candidates:
        alone = select_cv_pick(run, candidates=(candidate,), name=candidate)
        for target in context.targets:
            scores = alone.scores(archs, context.cache, context.plan, target=target)
            truth = context.accuracies("test", [target])[target]
            figures["test"].setdefault(candidate, {})[target] = float(kendalltau(scores, truth).statistic)
            figures["inner"].setdefault(candidate, {})[target] = float(alone.provenance["inner_kendall"][target][candidate])
    figures["chosen"] = select_cv_pick(run, candidates=candidates).provenance["chosen"]
    return figures


def summarise(record: dict, folds: list[dict]) -> dict:
    """Means over folds, per candidate and target, with KD-3 (the mean over targets)."""
    targets = record["targets"]

    def mean(values) -> dict:
        per = {t: float(np.mean([v[t] for v in values])) for t in targets}
        return {**per, "kd3": float(np.mean(list(per.values())))}

    summary = {}
    for candidate in folds[0]["test"]:
        inner = mean([f["inner"][candidate] for f in folds])
        test = mean([f["test"][candidate] for f in folds])
        summary[candidate] = {"inner": inner, "test": test,
                              "optimism": {k: inner[k] - test[k] for k in inner}}
    summary["selection (the protocol's)"] = {"test": mean([f["result"]["kendall"]["proxy"] for f in record["folds"]])}
    summary["best candidate after the fact"] = {"test": mean([{t: max(f["test"][c][t] for c in f["test"])
                                                               for t in targets} for f in folds])}
    for candidate in folds[0]["test"]:
        summary[candidate]["chosen"] = sum(f["chosen"][t] == candidate for f in folds for t in targets)
    return summary


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("protocol", help="a finished outer-fold protocol folder (its fold runs there or archived)")
    parser.add_argument("--json", default=None, help="write the per-fold figures and the summary here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        folder = unpacked(Path(args.protocol), Path(scratch))
        record = json.loads((folder / "protocol.json").read_text())
        folds = []
        for fold in record["folds"]:
            folds.append({"run": fold["run"], **fold_figures(folder / fold["run"])})
            kd3 = {c: np.mean(list(v.values())) for c, v in folds[-1]["test"].items()}
            print(f"  {fold['run']}: test KD-3 " + ", ".join(f"{c} {v:.3f}" for c, v in kd3.items()), flush=True)
    summary = summarise(record, folds)
    print(f"{record['space']}, {len(folds)} folds; mean Kendall (KD-3 and per target)")
    pairs = len(folds) * len(record["targets"])
    print(f"{'candidate':<30} {'inner':>7} {'test':>7} {'optimism':>9} {'chosen':>8}   per target (test)")
    for name, row in summary.items():
        inner = f"{row['inner']['kd3']:7.3f}" if "inner" in row else " " * 7
        optimism = f"{row['optimism']['kd3']:+9.3f}" if "optimism" in row else " " * 9
        chosen = f"{row['chosen']:>3}/{pairs:<4}" if "chosen" in row else " " * 8
        per = " ".join(f"{t} {row['test'][t]:.3f}" for t in record["targets"])
        print(f"{name:<30} {inner} {row['test']['kd3']:7.3f} {optimism} {chosen}   {per}")
    if args.json:
        given = Path(args.protocol).resolve()
        name = str(given.relative_to(REPO)) if given.is_relative_to(REPO) else str(given)
        Path(args.json).write_text(json.dumps({"protocol": name, "space": record["space"], "folds": folds,
                                               "summary": summary}, separators=(",", ":")) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
