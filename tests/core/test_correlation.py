"""Rank correlations and the joint correlation metric."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from autoprox.core.correlation import METRICS, correlate, correlate_targets, jcm, kendall, kendall_or_zero


def test_tau_b_by_hand_on_a_tiny_example_with_ties():
    # pairs: 4 concordant, 0 discordant, 1 tied in x only, 1 tied in y only, of 6:
    # tau-b = 4 / sqrt((6 - 1) * (6 - 1)) = 0.8 (tau-a would be 4/6)
    result = correlate([1, 2, 2, 3], [1, 2, 3, 3])
    assert result["kendall"] == pytest.approx(0.8, abs=1e-12)
    assert result["n"] == 4


def test_tau_b_with_ties_equals_scipy():
    rng = np.random.default_rng(0)
    for _ in range(20):
        scores = rng.integers(0, 5, size=30).astype(float)  # many ties
        accuracies = np.round(rng.normal(70, 2, size=30), 0)  # ties too
        result = correlate(scores, accuracies)
        assert result["kendall"] == pytest.approx(sps.kendalltau(scores, accuracies, variant="b").statistic, abs=1e-12)
        assert result["spearman"] == pytest.approx(sps.spearmanr(scores, accuracies).statistic, abs=1e-12)
        assert result["pearson"] == pytest.approx(sps.pearsonr(scores, accuracies).statistic, abs=1e-12)
        assert result["n"] == 30
    assert set(METRICS) <= set(result)


def test_perfect_and_reversed_rankings():
    x = np.arange(10.0)
    assert correlate(x, x ** 3)["kendall"] == pytest.approx(1.0)
    assert correlate(x, -x)["kendall"] == pytest.approx(-1.0)
    assert correlate(x, -x)["spearman"] == pytest.approx(-1.0)


def test_nan_accuracies_are_left_out_and_counted():
    scores = np.array([3.0, 1.0, 4.0, 1.5, 5.0, 9.0, 2.0, 6.0])
    accuracies = np.array([70.0, np.nan, 72.0, 69.0, np.nan, 75.0, 68.5, 71.0])
    result = correlate(scores, accuracies)
    keep = ~np.isnan(accuracies)
    assert result["n"] == 6
    assert result["kendall"] == pytest.approx(sps.kendalltau(scores[keep], accuracies[keep]).statistic, abs=1e-12)
    assert result["pearson"] == pytest.approx(sps.pearsonr(scores[keep], accuracies[keep]).statistic, abs=1e-12)
    assert not math.isnan(result["kendall"])


@pytest.mark.parametrize(
    "scores, accuracies, n",
    [
        ([2.0] * 6, [1, 2, 3, 4, 5, 6], 6),  # constant scores
        ([1, 2, 3, 4, 5, 6], [70.0] * 6, 6),  # constant accuracies
        ([1, 2, 3, 4, 5, 6], [1, np.nan, np.nan, np.nan, np.nan, 2], 2),  # too few measured
        ([1, 2, np.nan, 4, 5, 6], [1, 2, 3, 4, 5, 6], 6),  # a NaN score
        ([1, 2, np.inf, 4, 5, 6], [1, 2, 3, 4, 5, 6], 6),  # an infinite score
        ([5, 5, 1, 2], [np.nan, np.nan, 3, 4], 2),
    ],
)
def test_undefined_correlations_are_nan(scores, accuracies, n):
    result = correlate(scores, accuracies)
    assert result["n"] == n
    assert all(math.isnan(result[m]) for m in METRICS)


def test_mismatched_lengths_are_refused():
    with pytest.raises(ValueError, match="one length"):
        correlate([1, 2, 3, 4], [1, 2, 3])
    with pytest.raises(ValueError, match="1-D"):
        correlate([[1, 2], [3, 4]], [[1, 2], [3, 4]])


def test_correlate_targets():
    scores = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    accs = {"a": np.array([1.0, 2.0, 3.0, 4.0, 5.0]), "b": np.array([5.0, 4.0, 3.0, 2.0, 1.0]), "c": np.zeros(5)}
    result = correlate_targets(scores, accs, ["a", "b"])
    assert set(result) == {"a", "b"}
    assert result["a"]["kendall"] == pytest.approx(1.0) and result["b"]["kendall"] == pytest.approx(-1.0)


def test_jcm_is_a_weighted_mean():
    kendalls = {"c100_kd": 0.5, "flower_kd": 0.7, "chaoyang_kd": 0.3}
    assert jcm(kendalls) == pytest.approx(0.5)
    assert jcm(kendalls, {}) == pytest.approx(0.5)
    weights = {"c100_kd": 2.0, "chaoyang_kd": 0.0}  # flower_kd defaults to 1
    assert jcm(kendalls, weights) == pytest.approx((2 * 0.5 + 0.7) / 3)
    assert jcm(kendalls, {"other": 5.0}) == pytest.approx(0.5)  # weights of absent targets are ignored
    assert jcm({"a": -0.2}) == pytest.approx(-0.2)
    assert math.isnan(jcm({"a": 0.5, "b": math.nan}))


@pytest.mark.parametrize("weights", [{"a": 0.0, "b": 0.0}, {"a": -1.0, "b": 0.5}, {"a": math.nan, "b": 1.0}])
def test_jcm_refuses_weights_without_a_positive_total(weights):
    with pytest.raises(ValueError, match="positive"):
        jcm({"a": 0.1, "b": 0.2}, weights)


def test_jcm_refuses_no_target():
    with pytest.raises(ValueError, match="no target"):
        jcm({})


def test_kendall_or_zero_is_tau_b_over_the_rows_where_both_are_finite():
    rng = np.random.default_rng(3)
    scores, truth = np.round(rng.normal(size=40)), np.round(rng.normal(size=40))  # ties on both sides
    scores[[0, 5]], truth[[7, 9]], scores[11], truth[12] = np.nan, np.nan, np.inf, -np.inf
    keep = np.isfinite(scores) & np.isfinite(truth)
    expected = sps.kendalltau(scores[keep], truth[keep], variant="b").statistic
    assert kendall_or_zero(scores, truth) == pytest.approx(expected, abs=1e-15)
    assert kendall_or_zero(scores[keep], truth[keep]) == kendall(scores[keep], truth[keep])


@pytest.mark.parametrize("scores, truth", [
    ([], []),
    ([1.0, 2.0], [1.0, 2.0]),  # fewer than 3 rows: kendall gives +1 here
    ([1.0, 2.0, np.nan, 3.0], [1.0, 2.0, 3.0, np.nan]),  # 2 rows where both are finite
    ([4.0, 4.0, 4.0, 4.0], [1.0, 2.0, 3.0, 4.0]),  # a constant score ranks nothing
    ([4.0, 4.0, 9.0, 4.0], [1.0, 2.0, np.nan, 4.0]),  # constant on the rows kept, not before
    ([1.0, 2.0, 3.0, 4.0], [5.0, 5.0, 5.0, 5.0]),  # a constant truth
])
def test_kendall_or_zero_is_zero_where_kendall_is_undefined(scores, truth):
    value = kendall_or_zero(np.asarray(scores), np.asarray(truth))
    assert value == 0.0 and isinstance(value, float)
