"""Descriptor baselines (issue 13, item 1): chosen on the search part only, the blend fits a known ranking."""

from __future__ import annotations

import numpy as np
import pytest

from autoprox.core.correlation import kendall
from autoprox.core.errors import ConfigError
from autoprox.data.benchmark import split_benchmark
from autoprox.proxies.baselines import (
    BASELINES,
    BLEND_FEATURES,
    baseline_scores,
    blend_features,
    blend_scores,
    choose_baselines,
    fit_rank_blend,
)
from autoprox.proxies.figures import BAR_DESCRIPTORS
from autoprox.spaces.descriptors import descriptor_columns


def synthetic_columns(size: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "params": np.exp(rng.normal(16.0, 0.5, size)), "macs": np.exp(rng.normal(21.0, 0.5, size)),
        "depth": rng.integers(10, 15, size).astype(float), "width": rng.uniform(200, 300, size),
        "heads": rng.uniform(3, 5, size), "mlp_ratio": rng.uniform(3, 4, size),
    }


def test_blend_recovers_a_known_linear_ranking():
    """Accuracy a monotone function of a linear mix of features: the fit ranks unseen architectures
    almost as the mix does, and its coefficients point the same way."""
    columns = synthetic_columns(300, seed=1)
    features = blend_features(columns)
    true = np.array([2.0, -0.5, 0.0, 0.0, 1.0, 0.0])  # log params, depth, width, heads, mlp ratio, log macs
    z = (features - features.mean(axis=0)) / features.std(axis=0)
    accuracy = np.exp(z @ true)  # ranks are all that matter
    fit, held = np.arange(200), np.arange(200, 300)
    choice = fit_rank_blend(features[fit], accuracy[fit])
    assert choice["features"] == list(BLEND_FEATURES) and choice["n"] == 200
    scores = blend_scores(choice, {k: v[held] for k, v in columns.items()})
    assert kendall(scores, accuracy[held]) > 0.9
    coef = np.asarray(choice["coef"])
    assert coef @ true / (np.linalg.norm(coef) * np.linalg.norm(true)) > 0.97


def test_blend_ridge_and_missing_accuracies():
    columns = synthetic_columns(40, seed=2)
    columns["depth"] = np.full(40, 12.0)  # constant on the search part: weight 0, no singular solve
    accuracy = np.log(columns["params"]) + np.random.default_rng(0).normal(0, 0.1, 40)
    accuracy[:5] = np.nan
    choice = fit_rank_blend(blend_features(columns), accuracy)
    assert choice["n"] == 35
    assert choice["coef"][BLEND_FEATURES.index("depth")] == pytest.approx(0.0, abs=1e-12)
    stronger = fit_rank_blend(blend_features(columns), accuracy, ridge=10.0)
    assert np.linalg.norm(stronger["coef"]) < np.linalg.norm(choice["coef"])
    with pytest.raises(ConfigError):
        fit_rank_blend(blend_features(columns), accuracy, ridge=-1)


def test_coarse_is_the_best_descriptor_on_the_search_part(af_bench):
    columns = descriptor_columns(af_bench.archs)
    split = split_benchmark(len(af_bench), 3, 0.6)
    targets = ["c100_kd", "flower_kd", "imagenet_super"]
    choices = choose_baselines(columns, af_bench.accuracies, split.search, targets)
    assert set(choices) == set(BASELINES) == {"params", "coarse", "blend"}
    search = list(split.search)
    for target in targets:
        acc = af_bench.accuracies[target][search]
        taus = {name: kendall(columns[name][search], acc) for name in BAR_DESCRIPTORS}
        chosen = choices["coarse"][target]
        assert taus[chosen["descriptor"]] == max(taus.values())
        assert chosen["search_kendall"] == pytest.approx(max(taus.values()))
        assert choices["params"][target] == {"descriptor": "params"}
        scores = baseline_scores("coarse", chosen, columns, split.test)
        assert np.array_equal(scores, columns[chosen["descriptor"]][list(split.test)])


def test_choices_never_look_at_the_test_part(af_bench):
    """Rewriting every accuracy outside the search part (here: the test part made a perfect ranking by
    width) changes no choice; rewriting the search part does, so the check can see a leak."""
    columns = descriptor_columns(af_bench.archs)
    split = split_benchmark(len(af_bench), 0, 0.6)
    targets = ["c100_kd", "chaoyang_kd"]
    original = choose_baselines(columns, af_bench.accuracies, split.search, targets)
    test = list(split.test)
    leaked = {t: a.copy() for t, a in af_bench.accuracies.items()}
    for target in targets:
        leaked[target][test] = columns["width"][test] * 1000.0 - columns["depth"][test]
    assert choose_baselines(columns, leaked, split.search, targets) == original
    search = list(split.search)
    for target in targets:
        leaked[target][search] = columns["width"][search]
    moved = choose_baselines(columns, leaked, split.search, targets)
    assert moved["coarse"]["c100_kd"]["descriptor"] == "width"
    assert moved["blend"]["c100_kd"]["coef"] != original["blend"]["c100_kd"]["coef"]


def test_registry_and_refusals():
    columns = synthetic_columns(10, seed=3)
    accuracies = {"t": np.arange(10.0)}
    assert list(BASELINES) == ["params", "coarse", "blend"]
    with pytest.raises(ConfigError, match="unknown baseline 'zico'"):
        choose_baselines(columns, accuracies, range(10), ["t"], names=["zico"])
    only = choose_baselines(columns, accuracies, range(5), ["t"], names=["blend"])
    assert list(only) == ["blend"] and only["blend"]["t"]["n"] == 5
