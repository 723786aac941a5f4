"""Rank correlations between proxy scores and accuracies, and the joint correlation metric."""

from __future__ import annotations

import math
import warnings
from typing import Mapping, Sequence

import numpy as np

from autoprox.core.errors import ConfigError

METRICS = ("kendall", "spearman", "pearson")


def import_scipy() -> None:
    """Import SciPy's statistics and linear algebra now. They import lazily (``--help`` stays fast), and a search
    calls this before it says it has started: their first use, deep in its work, would otherwise spend a second on
    imports there, and a Ctrl-C that lands inside an import can end CPython by the signal itself rather than by
    the exit status and the resume line the search gives (it did in 11 of 40 tries)."""
    import scipy.linalg  # noqa: F401
    import scipy.stats  # noqa: F401


def correlate(scores: Sequence[float], accuracies: Sequence[float]) -> dict:
    """Kendall tau-b, Spearman and Pearson of ``scores`` against ``accuracies``.

    Entries whose accuracy is NaN (not measured) are left out; ``n`` says how many
    remain. Kendall is tau-b, which accounts for the ties common in proxy scores.
    A constant input gives NaN correlations.
    """
    from scipy import stats as sps  # on first use: --help imports this module

    x = np.asarray(scores, dtype=np.float64)
    y = np.asarray(accuracies, dtype=np.float64)
    if x.ndim != 1 or x.shape != y.shape:
        raise ValueError(f"scores and accuracies must be two 1-D arrays of one length, "
                         f"got shapes {x.shape} and {y.shape}")
    keep = ~np.isnan(y)
    x, y = x[keep], y[keep]
    result = {"kendall": math.nan, "spearman": math.nan, "pearson": math.nan, "n": int(len(x))}
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0 or not np.all(np.isfinite(x)):
        return result
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result["kendall"] = float(sps.kendalltau(x, y).statistic)
        result["spearman"] = float(sps.spearmanr(x, y).statistic)
        result["pearson"] = float(sps.pearsonr(x, y).statistic)
    return result


def jcm(kendalls: Mapping[str, float], weights: Mapping[str, float] | None = None) -> float:
    """Joint correlation metric: the weighted mean of Kendall's tau over targets.

    Equal weights by default (the paper's alpha_i = 1). NaN when any target is NaN.
    """
    if not kendalls:
        raise ConfigError("no target to compute the joint correlation metric over")
    weights = weights or {}
    total = sum(weights.get(t, 1.0) for t in kendalls)
    if not total > 0:  # also refuses a NaN total
        raise ConfigError("target weights must sum to a positive number")
    return sum(weights.get(t, 1.0) * tau for t, tau in kendalls.items()) / total


def correlate_targets(scores: Sequence[float], accuracies: Mapping[str, np.ndarray],
                      targets: Sequence[str]) -> dict[str, dict]:
    """:func:`correlate` for each target."""
    return {t: correlate(scores, accuracies[t]) for t in targets}


def paired_bootstrap(scores_a: Sequence[float], scores_b: Sequence[float], accuracies: Sequence[float],
                     samples: int = 1000, seed: int = 0) -> dict:
    """Kendall(a) - Kendall(b) against the same accuracies, over bootstrap resamples of the
    architectures (the same resample for both, so the difference is paired).

    Returns the observed difference, the bootstrap mean and standard deviation, and the
    share of resamples where ``a`` is ahead.
    """
    a = np.asarray(scores_a, dtype=np.float64)
    b = np.asarray(scores_b, dtype=np.float64)
    y = np.asarray(accuracies, dtype=np.float64)
    keep = ~np.isnan(y)
    a, b, y = a[keep], b[keep], y[keep]
    rng = np.random.default_rng(seed)
    differences = []
    for _ in range(samples):
        pick = rng.integers(0, len(y), len(y))
        ta, tb = correlate(a[pick], y[pick])["kendall"], correlate(b[pick], y[pick])["kendall"]
        if not (math.isnan(ta) or math.isnan(tb)):
            differences.append(ta - tb)
    values = np.asarray(differences)
    observed = correlate(a, y)["kendall"] - correlate(b, y)["kendall"]
    return {
        "difference": observed,
        "mean": float(values.mean()) if len(values) else math.nan,
        "std": float(values.std(ddof=1)) if len(values) > 1 else math.nan,
        "ahead": float((values > 0).mean()) if len(values) else math.nan,
        "samples": int(len(values)),
    }



def kendall_null_sd(n: int) -> float:
    """The standard deviation of Kendall's tau over ``n`` pairs of independent values (no ties),
    sqrt(2(2n+5) / (9n(n-1))); NaN for fewer than two."""
    return math.sqrt(2 * (2 * n + 5) / (9 * n * (n - 1))) if n > 1 else float("nan")


def kendall(x: Sequence[float], y: Sequence[float]) -> float:
    """Kendall tau-b; NaN when either side is constant or has fewer than 2 values."""
    from scipy import stats as sps  # on first use: --help imports this module

    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if len(x) < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return math.nan
    return float(sps.kendalltau(x, y).statistic)


def kendall_or_zero(scores: Sequence[float], truth: Sequence[float]) -> float:
    """Kendall tau-b of ``scores`` against ``truth`` over the rows where both are finite; 0 where it is
    undefined: fewer than 3 such rows, a constant score there (it ranks nothing), or a constant truth.

    Unlike :func:`kendall` (NaN where undefined), this is the figure a search or a protocol can average
    and compare: a proxy that ranks nothing counts as no better than chance.
    """
    from scipy.stats import kendalltau  # on first use: --help imports this module

    scores, truth = np.asarray(scores), np.asarray(truth)
    keep = np.isfinite(scores) & np.isfinite(truth)
    if keep.sum() < 3 or np.ptp(scores[keep]) == 0:
        return 0.0
    value = kendalltau(scores[keep], truth[keep]).statistic
    return float(value) if math.isfinite(value) else 0.0


def partial_kendall(x: Sequence[float], y: Sequence[float], z: Sequence[float]) -> float:
    """Partial Kendall tau of x and y given z (see the module docstring); NaN when undefined."""
    t_xy, t_xz, t_yz = kendall(x, y), kendall(x, z), kendall(y, z)
    denominator = (1.0 - t_xz * t_xz) * (1.0 - t_yz * t_yz)
    if not denominator > 1e-12:  # also NaN
        return math.nan
    return (t_xy - t_xz * t_yz) / math.sqrt(denominator)
