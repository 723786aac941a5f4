"""The evaluation protocol's figures: per-fold test Kendalls summarised, paired differences
with their intervals, and the printed table.

Pure functions of what ``protocol.json`` records for each finished fold (its test
indices, and per method its test scores and Kendall per target) and of the benchmark's
accuracies, so a resumed protocol and one run with any number of fold workers give the
same summary to the last digit.

Intervals of a paired difference (proxy minus baseline, one value per outer fold):

``ci``
    the t-interval over folds, mean +- t(0.975, n-1) sd / sqrt(n); it treats folds as
    independent, which they are not (their search parts overlap), so it is too narrow;
``corrected_ci``
    the same with Nadeau and Bengio's correction for overlapping training sets,
    sd * sqrt(1/n + n_test/n_search) in place of sd / sqrt(n) (Bouckaert and Frank 2004);
``bootstrap``
    a paired bootstrap over architectures: each fold's test part is resampled with
    replacement (one resample for every method and target, so differences stay
    paired), the difference averaged over folds, 2.5 and 97.5 percentiles. It holds
    each fold's chosen proxy fixed, so it measures the noise of the test
    architectures, not that of the search.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np

from autoprox.core.numbers import format_float
#: Method the baselines are compared with.
REFERENCE = "proxy"
#: Bootstrap resamples per summary (0: none).
BOOTSTRAP_SAMPLES = 1000
#: Most (resample x architecture x architecture) cells the vectorised Kendall holds at once.
_CHUNK_CELLS = 4_000_000


def kendall_batch(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Kendall tau-b of each row of ``x`` with the same row of ``y`` (both resamples x architectures).

    Architectures whose ``y`` is NaN are left out of their row; a row with fewer than 3
    left, a constant side, or a non-finite score gives NaN (as
    :func:`autoprox.core.correlation.correlate` does).
    """
    x = np.atleast_2d(np.asarray(x, dtype=np.float64))
    y = np.atleast_2d(np.asarray(y, dtype=np.float64))
    valid = ~np.isnan(y)
    pairs = valid[:, :, None] & valid[:, None, :]
    sx = np.sign(x[:, :, None] - x[:, None, :])
    sy = np.sign(np.where(valid, y, 0.0)[:, :, None] - np.where(valid, y, 0.0)[:, None, :])
    sx = np.where(pairs, sx, 0.0)
    sy = np.where(pairs, sy, 0.0)
    concordance = (sx * sy).sum(axis=(1, 2))
    tied_x, tied_y = (sx * sx).sum(axis=(1, 2)), (sy * sy).sum(axis=(1, 2))
    with np.errstate(invalid="ignore", divide="ignore"):
        tau = concordance / np.sqrt(tied_x * tied_y)
    bad = (valid.sum(axis=1) < 3) | (tied_x == 0) | (tied_y == 0) | ~np.all(np.isfinite(x) | ~valid, axis=1)
    tau[bad] = math.nan
    return tau


def t_interval(values: Sequence[float], level: float = 0.95, inflation: float | None = None) -> dict:
    """Mean, sd and the t-interval of the finite ``values``.

    ``inflation`` replaces the standard error's ``1/n`` by ``1/n + inflation`` (Nadeau and
    Bengio's correction, ``inflation = n_test / n_search``). NaN where fewer than 2 values.
    """
    from scipy import stats as sps  # on first use: --help imports this module

    finite = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=np.float64)
    n = len(finite)
    mean = float(finite.mean()) if n else math.nan
    sd = float(finite.std(ddof=1)) if n > 1 else math.nan
    if n < 2:
        return {"mean": mean, "sd": sd, "n": n, "low": math.nan, "high": math.nan}
    error = sd * math.sqrt(1.0 / n + (inflation or 0.0))
    half = float(sps.t.ppf(0.5 + level / 2, n - 1)) * error
    return {"mean": mean, "sd": sd, "n": n, "low": mean - half, "high": mean + half}


def _jcm(kendalls: Mapping[str, float], weights: Mapping[str, float]):
    """Weighted mean over targets (NaN when any target is NaN); works on floats and arrays alike."""
    total = sum(weights.get(t, 1.0) for t in kendalls)
    return sum(weights.get(t, 1.0) * np.asarray(k, dtype=np.float64) for t, k in kendalls.items()) / total


def fold_jcm(kendalls: Mapping[str, float], weights: Mapping[str, float]) -> float:
    """The JCM of one method on one fold from its per-target Kendalls (NaN when any is undefined)."""
    return float(_jcm({t: math.nan if k is None else k for t, k in kendalls.items()}, weights))


def _bootstrap(entries: Sequence[Mapping], accuracies: Mapping[str, np.ndarray], targets: Sequence[str],
               weights: Mapping[str, float], methods: Sequence[str], samples: int, seed: int) -> dict:
    """Per-resample Kendalls averaged over folds: ``{target or "jcm": {method: array(samples)}}`` of
    the fold-mean of each resample's difference to :data:`REFERENCE`."""
    rng = np.random.default_rng(seed)
    per_fold = []
    for entry in entries:
        test = np.asarray(entry["test"], dtype=np.int64)
        picks = rng.integers(0, len(test), size=(samples, len(test)))
        chunk = max(1, _CHUNK_CELLS // max(1, len(test) ** 2))
        taus = {}
        for method in methods:
            taus[method] = {}
            for target in targets:
                scores = np.asarray(entry["result"]["scores"][method][target], dtype=np.float64)
                acc = np.asarray(accuracies[target], dtype=np.float64)[test]
                taus[method][target] = np.concatenate([
                    kendall_batch(scores[picks[i:i + chunk]], acc[picks[i:i + chunk]])
                    for i in range(0, samples, chunk)])
        per_fold.append(taus)
    differences: dict[str, dict[str, np.ndarray]] = {t: {} for t in [*targets, "jcm"]}
    for method in methods:
        if method == REFERENCE:
            continue
        for target in targets:
            stacked = np.stack([f[REFERENCE][target] - f[method][target] for f in per_fold])
            differences[target][method] = _nanmean_rows(stacked)
        stacked = np.stack([_jcm(f[REFERENCE], weights) - _jcm(f[method], weights) for f in per_fold])
        differences["jcm"][method] = _nanmean_rows(stacked)
    return differences


def _nanmean_rows(stacked: np.ndarray) -> np.ndarray:
    """Mean over folds (axis 0) of the defined values; NaN where no fold is defined."""
    defined = ~np.isnan(stacked)
    count = defined.sum(axis=0)
    total = np.where(defined, stacked, 0.0).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1), math.nan)


def _percentiles(values: np.ndarray) -> dict:
    finite = values[np.isfinite(values)]
    if not len(finite):
        return {"low": math.nan, "high": math.nan, "samples": 0}
    low, high = np.percentile(finite, [2.5, 97.5])
    return {"low": float(low), "high": float(high), "samples": len(finite)}


def _row(values: Mapping[str, list[float]], methods: Sequence[str], inflation: float,
         bootstrap: Mapping[str, np.ndarray] | None) -> dict:
    """One target's (or the JCM's) figures: per-method test stats and paired differences."""
    row = {"test": {}, "difference": {}}
    for method in methods:
        stats = t_interval(values[method])
        row["test"][method] = {"mean": stats["mean"], "sd": stats["sd"], "n": stats["n"]}
    reference = values[REFERENCE]
    for method in methods:
        if method == REFERENCE:
            continue
        paired = [a - b if a is not None and b is not None else math.nan for a, b in zip(reference, values[method])]
        plain, corrected = t_interval(paired), t_interval(paired, inflation=inflation)
        finite = [d for d in paired if math.isfinite(d)]
        row["difference"][method] = {
            "mean": plain["mean"], "sd": plain["sd"], "n": plain["n"],
            "ci": [plain["low"], plain["high"]],
            "corrected_ci": [corrected["low"], corrected["high"]],
            "ahead": sum(d > 0 for d in finite),
            "bootstrap": _percentiles(bootstrap[method]) if bootstrap is not None else None,
        }
    return row


def summarise(entries: Sequence[Mapping], accuracies: Mapping[str, np.ndarray], targets: Sequence[str],
              weights: Mapping[str, float], methods: Sequence[str], samples: int = BOOTSTRAP_SAMPLES,
              seed: int = 0, size: int | None = None) -> dict:
    """The protocol's summary over the finished fold ``entries`` (in fold order).

    Per target and for the JCM: mean and sd over folds of each method's test Kendall, and
    for each baseline the paired difference :data:`REFERENCE` minus it, with its intervals
    (see the module docstring). ``size`` is the benchmark's size (for the corrected
    interval's test/search ratio). A fold where the proxy was invalid on its test part
    counts as undefined (left out, and counted in ``invalid_folds``).
    """
    entries = list(entries)
    summary = {"folds": len(entries), "reference": REFERENCE, "methods": list(methods),
               "invalid_folds": sum(1 for e in entries if e["result"].get("invalid")),
               "bootstrap": {"samples": samples, "seed": seed}, "targets": {}, "jcm": None}
    if not entries:
        return summary
    size = size or (len(entries[0]["test"]) + len(entries[0]["search"]))
    test_share = float(np.mean([len(e["test"]) for e in entries]))
    inflation = test_share / (size - test_share)
    bootstrap = _bootstrap(entries, accuracies, targets, weights, methods, samples, seed) if samples else None
    for target in targets:
        values = {m: [_float(e["result"]["kendall"][m][target]) for e in entries] for m in methods}
        summary["targets"][target] = _row(values, methods, inflation, bootstrap[target] if bootstrap else None)
    values = {m: [_float(e["result"]["jcm"][m]) for e in entries] for m in methods}
    summary["jcm"] = _row(values, methods, inflation, bootstrap["jcm"] if bootstrap else None)
    return summary


def _float(value) -> float:
    return math.nan if value is None else float(value)


# ------------------------------------------------------------------------ the table

def _num(value) -> str:
    return f"{format_float(value):>6}"  # as wide as "+0.123", so that columns of intervals line up


def _undefined(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _mean_sd(stats: Mapping) -> str:
    sd = stats.get("sd")  # undefined over one fold: the mean alone, not "+- nan"
    return _num(stats.get("mean")) + ("" if _undefined(sd) else f" +- {sd:.3f}")


def _difference(stats: Mapping) -> str:
    low, high = stats["ci"]
    interval = "" if _undefined(low) or _undefined(high) else f" [{_num(low)},{_num(high)}]"
    return f"{_num(stats['mean'])}{interval} {stats['ahead']}/{stats['n']}"


def format_protocol(protocol: Mapping) -> str:
    """Plain-text tables of a protocol: test Kendall mean +- sd per method, and the paired differences."""
    summary, spec = protocol.get("summary") or {}, protocol["protocol"]
    methods = summary.get("methods") or [REFERENCE, *protocol.get("baselines", [])]
    baselines = [m for m in methods if m != REFERENCE]
    done = sum(1 for f in protocol["folds"] if f.get("result"))
    lines = [(f"evaluation protocol: {protocol.get('space', '?')}, {spec['folds']} folds x {spec['repeats']} "
              f"repeat(s), protocol seed {spec['seed']}; {done} of {len(protocol['folds'])} folds finished"),
             ("test Kendall over the outer folds, mean +- sd (proxy: the search's chosen proxy; params, coarse, "
              "blend: descriptor baselines chosen on each fold's search part)")]
    rows = [(t, row) for t, row in summary.get("targets", {}).items()]
    if summary.get("jcm"):
        rows.append(("JCM", summary["jcm"]))
    if not rows:  # no fold finished: no table with headers only
        lines[1:] = ["no fold has finished yet: no figures"]
        return "\n".join(lines) + "\n"
    if done < 2:
        lines.append("one fold finished: the sd and the intervals need two; the means are that fold's figures")
    lines.append(f"{'target':<16}" + "".join(f"{m:>18}" for m in methods))
    for name, row in rows:
        lines.append(f"{name:<16}" + "".join(f"{_mean_sd(row['test'][m]):>18}" for m in methods))
    lines.append("proxy - baseline per fold: mean [95% t-interval over folds] folds ahead "
                 "(corrected and bootstrap intervals in protocol.json)")
    lines.append(f"{'target':<16}" + "".join(f"{'- ' + m:>30}" for m in baselines))
    for name, row in rows:
        lines.append(f"{name:<16}" + "".join(f"{_difference(row['difference'][m]):>30}" for m in baselines))
    if summary.get("invalid_folds"):
        lines.append(f"the proxy was invalid on the test part of {summary['invalid_folds']} fold(s); left out above")
    return "\n".join(lines) + "\n"


__all__ = ["BOOTSTRAP_SAMPLES", "REFERENCE", "fold_jcm", "format_protocol", "kendall_batch", "summarise", "t_interval"]
