"""Fitness: JCM of genomes on real small statistics of 16 AutoFormer architectures."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from scipy import stats as sps

from autoprox.data.cache import StatsPlan, load_statistics
from autoprox.genome.tree import parse_genome, score_architecture
from autoprox.networks.statistics import torch_threads
from autoprox.proxies.figures import figures
from autoprox.search.fitness import FitnessEvaluator, FitnessRecord

TARGETS = ("c100_kd", "flower_kd", "chaoyang_kd", "imagenet_super")
ALL_100 = {t: 100 for t in TARGETS}
FROBENIUS_F1 = "block_mean(frobenius_norm(F1))"
PUBLISHED = (
    "block_mean(to_mean_scalar(element_wise_sum(frobenius_norm(min_max_normalize(F2)), "
    "element_wise_sqrt(sigmoid(F4g)))))"
)
CONSTANT = "block_mean(to_std_scalar(to_mean_scalar(F1)))"  # the std of one value: 0 everywhere
NAN_GENOME = "block_mean(to_mean_scalar(element_wise_log(element_wise_revert(element_wise_abs(F1)))))"
INF_GENOME = "block_mean(element_wise_invert(to_std_scalar(to_mean_scalar(F1))))"  # 1 / 0
SHAPE_GENOME = "block_mean(to_mean_scalar(matrix_multiplication(F1, F3)))"


@pytest.fixture(scope="module")
def plan(small_spec):
    return StatsPlan(small_spec, (0,), ALL_100)


@pytest.fixture(scope="module")
def stats(session_cache, plan, af_small):
    calls = []
    loaded = load_statistics(session_cache, plan, af_small.archs, progress=lambda d, t: calls.append((d, t)))
    assert calls[-1] == (len(af_small), len(af_small))
    return loaded


@pytest.fixture(scope="module")
def accuracies(af_small):
    return {t: af_small.accuracies[t] for t in TARGETS}


@pytest.fixture
def evaluator(stats, accuracies):
    return FitnessEvaluator.from_statistics(stats, accuracies, TARGETS, ALL_100)


def hand_frobenius_scores(arch_stats) -> np.ndarray:
    """mean over blocks of ||F1||_F, computed with torch directly."""
    return np.array([np.mean([float(torch.linalg.norm(b["F1"])) for b in s]) for s in arch_stats])


def test_plan_keys_and_requests(small_spec, af_small):
    plan = StatsPlan(small_spec, (0, 1), {"c100_kd": 100, "chaoyang_kd": 4, "flower_kd": 102})
    assert plan.class_counts == (4, 100, 102)
    assert plan.keys() == [(0, 4), (0, 100), (0, 102), (1, 4), (1, 100), (1, 102)]
    requests = plan.requests(af_small.archs[:2])
    assert len(requests) == 12 and {r.num_classes for r in requests} == {4, 100, 102}
    assert json.loads(json.dumps(plan.to_json()))["seeds"] == [0, 1]


def test_jcm_of_a_valid_genome_is_the_mean_of_scipy_kendall(evaluator, stats, accuracies):
    record = evaluator.evaluate(parse_genome(FROBENIUS_F1))
    assert record.valid, record.reason
    tree = parse_genome(FROBENIUS_F1)
    with torch_threads(1):
        scores = np.array([score_architecture(tree, s) for s in stats[(0, 100)]])
    np.testing.assert_allclose(scores, hand_frobenius_scores(stats[(0, 100)]), rtol=1e-5)
    assert np.ptp(scores) > 0
    taus = {t: sps.kendalltau(scores, accuracies[t]).statistic for t in TARGETS}
    for t in TARGETS:
        assert record.kendall[t] == pytest.approx(taus[t], abs=1e-9)
        assert record.spearman[t] == pytest.approx(sps.spearmanr(scores, accuracies[t]).statistic, abs=1e-9)
        assert record.pearson[t] == pytest.approx(sps.pearsonr(scores, accuracies[t]).statistic, abs=1e-9)
    assert record.jcm == pytest.approx(np.mean(list(taus.values())), abs=1e-9)
    assert record.genome == FROBENIUS_F1 and record.canonical == FROBENIUS_F1
    assert evaluator.evaluations == 1 and evaluator.seconds > 0


def test_published_proxy_is_valid_and_matches_score_architecture(evaluator, stats, accuracies):
    tree = parse_genome(PUBLISHED)
    record = evaluator.evaluate(tree)
    assert record.valid
    with torch_threads(1):
        scores = np.array([score_architecture(tree, s) for s in stats[(0, 100)]])
    # single-threaded whatever the caller set, so the scores never depend on the machine
    for threads in (2, 1):
        with torch_threads(threads):
            np.testing.assert_array_equal(evaluator.architecture_scores(tree)[100], scores)
    expected = np.mean([sps.kendalltau(scores, accuracies[t]).statistic for t in TARGETS])
    assert record.jcm == pytest.approx(expected, abs=1e-9)


def test_weights_give_a_weighted_mean(stats, accuracies, evaluator):
    weights = {"c100_kd": 3.0, "imagenet_super": 0.5}
    weighted = FitnessEvaluator.from_statistics(stats, accuracies, TARGETS, ALL_100, weights).evaluate(parse_genome(FROBENIUS_F1))
    plain = evaluator.evaluate(parse_genome(FROBENIUS_F1))
    assert weighted.kendall == plain.kendall
    w = {t: weights.get(t, 1.0) for t in TARGETS}
    expected = sum(w[t] * plain.kendall[t] for t in TARGETS) / sum(w.values())
    assert weighted.jcm == pytest.approx(expected, abs=1e-12)
    assert weighted.jcm != pytest.approx(plain.jcm, abs=1e-6)
    only_c100 = {"c100_kd": 1.0, "flower_kd": 0.0, "chaoyang_kd": 0.0, "imagenet_super": 0.0}
    single = FitnessEvaluator.from_statistics(stats, accuracies, TARGETS, ALL_100, only_c100).evaluate(parse_genome(FROBENIUS_F1))
    assert single.jcm == pytest.approx(plain.kendall["c100_kd"], abs=1e-12)


def test_equivalent_genomes_are_memoised(evaluator):
    first = evaluator.evaluate(parse_genome("block_mean(to_mean_scalar(element_wise_sum(sigmoid(F1), F1g)))"))
    assert evaluator.evaluations == 1 and first.valid
    commuted = evaluator.evaluate(parse_genome("block_mean(to_mean_scalar(element_wise_sum(F1g, no_op(sigmoid(F1)))))"))
    assert commuted is first
    assert evaluator.evaluations == 1
    other = evaluator.evaluate(parse_genome("block_mean(to_mean_scalar(element_wise_difference(F1g, sigmoid(F1))))"))
    assert other is not first and evaluator.evaluations == 2
    # invalid records are memoised too
    bad = evaluator.evaluate(parse_genome(NAN_GENOME))
    assert evaluator.evaluate(parse_genome(NAN_GENOME)) is bad and evaluator.evaluations == 3
    # a resumed run's records pre-fill the memo
    fresh = FitnessEvaluator.from_statistics(evaluator.evaluator.stats, evaluator.data.accuracies, TARGETS, ALL_100)
    fresh.remember([first, other])
    assert fresh.evaluate(parse_genome("block_mean(to_mean_scalar(element_wise_sum(F1g, sigmoid(F1))))")) is first
    assert fresh.evaluations == 0


@pytest.mark.parametrize(
    "text, reason",
    [
        (NAN_GENOME, "invalid: NaN or inf"),
        (INF_GENOME, "invalid: NaN or inf"),
        (CONSTANT, "all scores equal"),
        (SHAPE_GENOME, "invalid: matrix_multiplication"),
        ("block_mean(to_mean_scalar(element_wise_product(F3, F4)))", "invalid: element_wise_product"),
    ],
)
def test_invalid_genomes_give_invalid_records_without_raising(evaluator, text, reason):
    record = evaluator.evaluate(parse_genome(text))
    assert record.valid is False
    assert record.reason.startswith(reason), record.reason
    assert math.isnan(record.jcm) and record.kendall == {}
    assert evaluator.evaluations == 1


def test_constant_genome_really_is_constant(stats):
    tree = parse_genome(CONSTANT)
    assert {score_architecture(tree, s) for s in stats[(0, 100)]} == {0.0}


@pytest.fixture(scope="module")
def first8(af_small):
    return af_small.subset(range(8))


@pytest.mark.slow
def test_two_seeds_average_the_scores(session_cache, small_spec, first8):
    plan = StatsPlan(small_spec, (0, 1), ALL_100)
    loaded = load_statistics(session_cache, plan, first8.archs)
    assert set(loaded) == {(0, 100), (1, 100)} and all(len(v) == 8 for v in loaded.values())
    accuracies = {t: first8.accuracies[t] for t in TARGETS}
    evaluator = FitnessEvaluator.from_statistics(loaded, accuracies, TARGETS, ALL_100)
    tree = parse_genome(FROBENIUS_F1)
    with torch_threads(1):  # the evaluator's own setting, so that the numbers agree to the bit
        seed0 = np.array([score_architecture(tree, s) for s in loaded[(0, 100)]])
        seed1 = np.array([score_architecture(tree, s) for s in loaded[(1, 100)]])
    assert not np.allclose(seed0, seed1, rtol=0, atol=1e-7)  # the seed changes the initialisation
    averaged = evaluator.architecture_scores(tree)
    assert set(averaged) == {100}
    np.testing.assert_array_equal(averaged[100], (seed0 + seed1) / 2)
    hand = (hand_frobenius_scores(loaded[(0, 100)]) + hand_frobenius_scores(loaded[(1, 100)])) / 2
    np.testing.assert_allclose(averaged[100], hand, rtol=1e-5)
    record = evaluator.evaluate(tree)
    expected = {t: sps.kendalltau(averaged[100], accuracies[t]).statistic for t in TARGETS}
    assert record.kendall == pytest.approx(expected, abs=1e-12)


@pytest.mark.slow
def test_each_target_uses_its_class_count(session_cache, small_spec, first8):
    classes = {"c100_kd": 100, "chaoyang_kd": 4}
    plan = StatsPlan(small_spec, (0,), classes)
    loaded = load_statistics(session_cache, plan, first8.archs)
    assert set(loaded) == {(0, 4), (0, 100)}
    accuracies = {t: first8.accuracies[t] for t in classes}
    evaluator = FitnessEvaluator.from_statistics(loaded, accuracies, list(classes), classes)
    # a gradient statistic: it depends on the classifier head's class count
    tree = parse_genome("block_mean(frobenius_norm(F1g))")
    scores = evaluator.architecture_scores(tree)
    assert set(scores) == {4, 100}
    assert not np.allclose(scores[4], scores[100])
    with torch_threads(1):
        np.testing.assert_array_equal(scores[4], [score_architecture(tree, s) for s in loaded[(0, 4)]])
    record = evaluator.evaluate(tree)
    assert record.valid
    assert record.kendall["chaoyang_kd"] == pytest.approx(
        sps.kendalltau(scores[4], accuracies["chaoyang_kd"]).statistic, abs=1e-12)
    assert record.kendall["c100_kd"] == pytest.approx(
        sps.kendalltau(scores[100], accuracies["c100_kd"]).statistic, abs=1e-12)
    direct = figures(scores, accuracies, list(classes), classes)
    assert direct["jcm"] == pytest.approx(record.jcm, abs=1e-12)


def test_misconfigured_evaluator_is_refused(stats, accuracies):
    with pytest.raises(ValueError, match="4-class statistics"):
        FitnessEvaluator.from_statistics(stats, accuracies, TARGETS, {**ALL_100, "chaoyang_kd": 4})
    with pytest.raises(ValueError, match="no accuracies for target 'c10_kd'"):
        FitnessEvaluator.from_statistics(stats, accuracies, ["c10_kd"], {"c10_kd": 100})
    with pytest.raises(ValueError, match="3 accuracies for 16 architectures"):
        FitnessEvaluator.from_statistics(stats, {t: a[:3] for t, a in accuracies.items()}, TARGETS, ALL_100)
    with pytest.raises(ValueError, match="same architectures"):
        FitnessEvaluator.from_statistics({(0, 100): stats[(0, 100)], (1, 100): stats[(0, 100)][:4]}, accuracies, TARGETS, ALL_100)


def test_record_json_round_trip(evaluator):
    invalid = evaluator.evaluate(parse_genome(NAN_GENOME))
    text = json.dumps(invalid.to_json(), allow_nan=False)  # strict JSON: no NaN literal
    back = FitnessRecord.from_json(json.loads(text))
    assert math.isnan(back.jcm) and back.valid is False
    assert (back.genome, back.canonical, back.reason) == (invalid.genome, invalid.canonical, invalid.reason)
    valid = evaluator.evaluate(parse_genome(FROBENIUS_F1))
    assert FitnessRecord.from_json(json.loads(json.dumps(valid.to_json(), allow_nan=False))) == valid
    odd = FitnessRecord("g", "g", True, 0.5, kendall={"a": 0.5, "b": math.nan})
    back = FitnessRecord.from_json(json.loads(json.dumps(odd.to_json(), allow_nan=False)))
    assert back.kendall["a"] == 0.5 and math.isnan(back.kendall["b"])
