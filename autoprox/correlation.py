"""Rank correlations between proxy scores and accuracies, and the joint correlation metric."""

from __future__ import annotations

import math
import warnings
from typing import Mapping, Sequence

import numpy as np
from scipy import stats as sps

METRICS = ("kendall", "spearman", "pearson")


def correlate(scores: Sequence[float], accuracies: Sequence[float]) -> dict:
    """Kendall tau-b, Spearman and Pearson of ``scores`` against ``accuracies``.

    Entries whose accuracy is NaN (not measured) are left out; ``n`` says how many
    remain. Kendall is tau-b, which accounts for the ties common in proxy scores.
    A constant input gives NaN correlations.
    """
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
        raise ValueError("no target to compute the joint correlation metric over")
    weights = weights or {}
    total = sum(weights.get(t, 1.0) for t in kendalls)
    if not total > 0:  # also refuses a NaN total
        raise ValueError("target weights must sum to a positive number")
    return sum(weights.get(t, 1.0) * tau for t, tau in kendalls.items()) / total


def correlate_targets(scores: Sequence[float], accuracies: Mapping[str, np.ndarray],
                      targets: Sequence[str]) -> dict[str, dict]:
    """:func:`correlate` for each target."""
    return {t: correlate(scores, accuracies[t]) for t in targets}
