"""The held-out check outside the project (issue #23): label-free proxies on timm ViTs never seen here.

Scores every proxy of :data:`PROXIES` on the models of ``examples/timm_imagenet_heldout.csv``
(49 timm ViTs with published ImageNet-1k top-1, fixed and committed before any proxy was
scored on them; the file's header gives the rule) exactly as ``autoprox rank --bench FILE``
does (the same statistics, score cache and scoring path, one gaussian batch of 8, seed 0),
then prints, per set of models, each proxy's Kendall tau-b and Spearman with ``imagenet_acc``
and its Kendall minus the parameter count's with a paired bootstrap over models: each
resample draws the models with replacement, and both proxies are correlated on the same draw.

Sets: ``heldout`` (the 49, the primary figures), ``union`` (those and the twelve of
``examples/timm_imagenet.csv``, scored as one table, as ``rank`` would score that file), and the
two kinds the held-out file names before scoring, read from the held-out scores (``tvt_l2``
normalises over the set it is given: over the 49 here): ``global`` (attention over all tokens
in every block) and ``staged`` (Swin, Swin-S3, SwinV2-CR, DaViT, MViTv2), without intervals.

Run ``autoprox rank`` first (docs/results-new-space.md gives the commands); the scores then come from
the caches in seconds. Usage::

    python benchmarks/heldout_timm.py [--samples 10000] [--seed 0] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
HELDOUT = REPO / "examples" / "timm_imagenet_heldout.csv"
TWELVE = REPO / "examples" / "timm_imagenet.csv"
#: The proxies the held-out file names, in its order; the first is the recommended label-free proxy.
#: ``runs/recommended/any-search-sum/best.json`` is the ``recommended:any/searched`` of the day the held-out
#: file was fixed (the sum over blocks on the statistics), ``runs/recommended/any-search-zoo/best.json`` (the
#: depth times SNIP) the one scored here after it; both by path, since ``recommended:any/searched`` now names the
#: N-space protocol's formula (docs/results-new-space.md).
PROXIES = ("recommended:any/joint", "runs/recommended/any-search-zoo/best.json",
           "runs/recommended/any-search-sum/best.json", "params",
           "flops", "nwot", "snip", "zico", "synflow", "grad_norm", "tvt_l2")
REFERENCE = "params"
#: Model-name prefixes of the second kind (attention over windows, channels or pooled keys and values).
STAGED = ("timm:swin", "timm:davit", "timm:mvitv2")
TARGET = "imagenet"


def union_file(directory: Path) -> Path:
    """The twelve and the held-out models as one CSV table in ``directory`` (the held-out file's rows last)."""
    rows = []
    for path in (TWELVE, HELDOUT):
        lines = [line for line in path.read_text().splitlines() if line and not line.startswith("#")]
        rows += lines[1:] if rows else lines
    out = directory / "timm_imagenet_union.csv"
    out.write_text("\n".join(rows) + "\n")
    return out


def scores_on(bench_file: Path, names: tuple[str, ...]) -> tuple[list[str], np.ndarray, dict[str, np.ndarray]]:
    """Model names, accuracies and each proxy's scores on ``bench_file``, by ``autoprox rank``'s own path."""
    from autoprox.cli.main import build_parser
    from autoprox.cli.options import evaluation_context
    from autoprox.cli.rank import ensemble_scores
    from autoprox.data.benchmark import load_benchmark
    from autoprox.proxies.ensemble import EnsembleProxy
    from autoprox.proxies.proxy import resolve_proxy

    bench = load_benchmark(str(bench_file))
    models = [arch.model for arch in bench.archs]
    result = {}
    for name in names:
        args = build_parser().parse_args(["rank", "--proxy", name, "--bench", str(bench_file), "--workers", "1"])
        context = evaluation_context(args, None, all_targets=True, part="all", bench=bench)
        proxy = resolve_proxy(name)
        if isinstance(proxy, EnsembleProxy):
            scores, _ = ensemble_scores(proxy, context, "all", None, 1, None)
            result[name] = np.asarray(scores[TARGET], dtype=np.float64)
        else:
            scores = context.score(proxy, "all", workers=1)
            result[name] = np.asarray(scores[context.plan.target_classes[TARGET]], dtype=np.float64)
    return models, np.asarray(bench.accuracies[TARGET], dtype=np.float64), result


def tau(x: np.ndarray, y: np.ndarray) -> float:
    """Kendall tau-b (NaN when a side is constant)."""
    from autoprox.core.correlation import kendall

    return kendall(x, y)


def bootstrap(scores: dict[str, np.ndarray], accuracy: np.ndarray, samples: int, seed: int) -> dict[str, dict]:
    """Per proxy: Kendall(proxy) - Kendall(params) on the same resamples of the models; the observed
    difference, the 2.5 and 97.5 percentiles and the share of resamples where the proxy is ahead."""
    rng = np.random.default_rng(seed)
    n = len(accuracy)
    differences: dict[str, list[float]] = {name: [] for name in scores}
    for _ in range(samples):
        pick = rng.integers(0, n, n)
        reference = tau(scores[REFERENCE][pick], accuracy[pick])
        for name, values in scores.items():
            value = tau(values[pick], accuracy[pick])
            if not (np.isnan(value) or np.isnan(reference)):
                differences[name].append(value - reference)
    out = {}
    for name, values in differences.items():
        array = np.asarray(values)
        observed = tau(scores[name], accuracy) - tau(scores[REFERENCE], accuracy)
        out[name] = {"difference": observed, "low": float(np.percentile(array, 2.5)),
                     "high": float(np.percentile(array, 97.5)), "ahead": float((array > 0).mean()),
                     "samples": len(array)}
    return out


def figures(models: list[str], accuracy: np.ndarray, scores: dict[str, np.ndarray], keep: np.ndarray,
            samples: int, seed: int) -> dict:
    """Kendall, Spearman and n of each proxy on the models ``keep`` selects, and the bootstrap when ``samples``."""
    from autoprox.core.correlation import correlate

    chosen = {name: values[keep] for name, values in scores.items()}
    rows = {name: {k: correlate(values, accuracy[keep])[k] for k in ("kendall", "spearman", "n")}
            for name, values in chosen.items()}
    if samples:
        for name, interval in bootstrap(chosen, accuracy[keep], samples, seed).items():
            rows[name]["minus_params"] = interval
    return {"models": [m for m, k in zip(models, keep) if k], "proxies": rows}


def markdown(label: str, table: dict) -> str:
    """One set's table."""
    lines = [f"{label} ({len(table['models'])} models)", "",
             "| proxy | Kendall | Spearman | n | Kendall - params [95% bootstrap] | resamples ahead |",
             "|---|---|---|---|---|---|"]
    for name, row in table["proxies"].items():
        interval = row.get("minus_params")
        text = ahead = ""
        if interval and name != REFERENCE:
            if interval["low"] == interval["high"] == interval["difference"] == 0:
                text = "0: ranks as `params` on every resample"
            else:
                text = f"{interval['difference']:+.3f} [{interval['low']:+.3f}, {interval['high']:+.3f}]"
                ahead = f"{interval['ahead']:.0%}"
        lines.append(f"| `{name}` | {row['kendall']:.3f} | {row['spearman']:.3f} | {row['n']} | {text} | {ahead} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=10000, help="bootstrap resamples (default 10000)")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    parser.add_argument("--json", type=Path, help="also write the figures and every model's scores here")
    args = parser.parse_args(argv)
    models, accuracy, scores = scores_on(HELDOUT, PROXIES)
    with tempfile.TemporaryDirectory() as directory:
        union = scores_on(union_file(Path(directory)), PROXIES)
    staged = np.array([m.startswith(STAGED) for m in models])
    every = np.ones(len(models), bool)
    sets = {
        "heldout": figures(models, accuracy, scores, every, args.samples, args.seed),
        "union": figures(*union, np.ones(len(union[0]), bool), args.samples, args.seed),
        "global": figures(models, accuracy, scores, ~staged, 0, args.seed),
        "staged": figures(models, accuracy, scores, staged, 0, args.seed),
    }
    for label, table in sets.items():
        print(markdown(label, table) + "\n")
    if args.json:
        record = {"sets": sets, "samples": args.samples, "seed": args.seed, "accuracy": dict(zip(models, accuracy.tolist())),
                  "scores": {name: dict(zip(models, values.tolist())) for name, values in scores.items()}}
        args.json.write_text(json.dumps(record, indent=1, default=float) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
