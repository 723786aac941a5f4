"""Issue 6: aggregations over blocks, architecture-level terminals, cross-validated fitness,
parsimony, the beyond-size report and the paired bootstrap — on real statistics."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest

from autoprox.core.correlation import correlate, paired_bootstrap
from autoprox.data.benchmark import write_benchmark_jsonl
from autoprox.data.cache import StatsPlan, StatsRequest, load_statistics
from autoprox.genome.tree import (
    ARCH_TERMINALS,
    aggregate,
    block_values,
    genome_to_string,
    parse_genome,
    score_architecture,
)
from autoprox.genome.template import mutate_template, random_template, template_genes
from autoprox.core.errors import GenomeError
from autoprox.genome.space import AGGREGATIONS, GenomeSpace
from autoprox.networks.statistics import torch_threads
from autoprox.proxies.figures import beyond_size
from autoprox.search.engine import run_search
from autoprox.search.evolution import EvolutionConfig, complexity, rank_key
from autoprox.search.fitness import FitnessEvaluator, FitnessRecord, make_folds
from autoprox.search.settings import SearchSettings
from autoprox.spaces.architectures import count_macs, count_params
from autoprox.spaces.descriptors import describe, terminal_names, terminal_values

pytestmark = pytest.mark.slow

TARGETS = ["c100_kd", "flower_kd", "chaoyang_kd", "imagenet_super"]


@pytest.mark.parametrize("name, expected", [
    ("block_mean", 2.5), ("block_sum", 10.0), ("block_wmean", (1 + 4 + 9 + 16) / 10), ("block_std", math.sqrt(1.25)),
])
def test_each_aggregation_by_hand(name, expected):
    assert aggregate(name, [1.0, 2.0, 3.0, 4.0]) == pytest.approx(expected)


def test_aggregations_on_real_statistics(af_small, session_cache, small_spec):
    arch = af_small.archs[0]
    stats = session_cache.get(StatsRequest(arch, small_spec, 0, 100))
    body = "to_mean_scalar(element_wise_abs(F1g))"
    values = [float(b["F1g"].abs().mean()) for b in stats]
    with torch_threads(1):
        for name in AGGREGATIONS:
            score = score_architecture(parse_genome(f"{name}({body})"), stats)
            assert score == pytest.approx(aggregate(name, values), rel=1e-5)
    assert score_architecture(parse_genome(f"block_sum({body})"), stats) == pytest.approx(
        len(stats) * score_architecture(parse_genome(f"block_mean({body})"), stats), rel=1e-6)


def test_descriptors_and_terminals(af_bench, pit_bench):
    arch = af_bench.archs[0]  # the benchmark README's first entry
    d = describe(arch)
    assert d["params"] == count_params(arch) and d["macs"] == count_macs(arch)
    assert d["depth"] == 12 and d["width"] == 192
    assert d["heads"] == pytest.approx(np.mean(arch.heads)) and d["mlp_ratio"] == pytest.approx(np.mean(arch.ratios))
    pit = pit_bench.archs[0]  # {"base_dim": 16, "mlp_ratio": 6, "depth": [2, 8, 4], "num_heads": [2, 4, 4]}
    dp = describe(pit)
    assert dp["depth"] == 14 and dp["width"] == pytest.approx((2 * 32 + 8 * 64 + 4 * 64) / 14)
    assert dp["mlp_ratio"] == pytest.approx(6.0)
    values = terminal_values(arch)
    assert set(values) == set(terminal_names()) == set(ARCH_TERMINALS) and len(values) == 12
    assert values["A_log_params"] == pytest.approx(math.log(d["params"]))


def test_terminals_enter_genomes(af_small, session_cache, small_spec):
    arch = af_small.archs[1]
    stats = session_cache.get(StatsRequest(arch, small_spec, 0, 100))
    tree = parse_genome("block_mean(element_wise_sum(A_log_params, to_mean_scalar(element_wise_abs(F3))))")
    with torch_threads(1):
        score = score_architecture(tree, stats, terminal_values(arch))
        expected = math.log(count_params(arch)) + np.mean([float(b["F3"].abs().mean()) for b in stats])
    assert score == pytest.approx(expected, rel=1e-5)
    with pytest.raises(GenomeError, match="architecture-level terminals"):
        block_values(tree, stats)
    sum_depth = parse_genome("block_sum(no_op(A_depth))")
    assert score_architecture(sum_depth, stats, terminal_values(arch)) == len(stats) ** 2


def test_genome_space_genes():
    space = GenomeSpace(aggregations=AGGREGATIONS, arch_terminals=True)
    rng = random.Random(0)
    trees = [random_template(rng, space) for _ in range(300)]
    aggregations = {template_genes(t).aggregation for t in trees}
    inputs = {template_genes(t).input_a for t in trees} | {template_genes(t).input_b for t in trees}
    assert aggregations == set(AGGREGATIONS)
    assert inputs & set(ARCH_TERMINALS) and inputs & {"F1", "F4g"}
    assert all(space.contains(t) for t in trees)
    children = [mutate_template(t, rng, 0.5, space) for t in trees]
    assert {template_genes(c).aggregation for c in children} == set(AGGREGATIONS)
    paper = GenomeSpace()
    assert not paper.contains(parse_genome("block_sum(to_mean_scalar(F1))"))
    assert not paper.contains(parse_genome("block_mean(no_op(A_depth))"))
    assert all(template_genes(random_template(rng)).aggregation == "block_mean" for _ in range(50))
    with pytest.raises(GenomeError, match="unknown aggregation"):
        GenomeSpace(aggregations=("block_max",))


def test_paper_space_draws_are_unchanged():
    """The default space must consume the random generator exactly as before issue 6,
    so that the committed reference runs replay identically."""
    rng = random.Random(0)
    first = genome_to_string(random_template(rng))
    assert first == ("block_mean(to_mean_scalar(matrix_multiplication(element_wise_abs(sigmoid(F4)), "
                     "softmax(element_wise_sqrt(F3)))))")


def test_make_folds():
    folds = make_folds(60, 5, seed=0)
    assert sorted(i for f in folds for i in f) == list(range(60))
    assert {len(f) for f in folds} == {12}
    assert make_folds(60, 5, seed=0) == folds and make_folds(60, 5, seed=1) != folds
    with pytest.raises(ValueError):
        make_folds(10, 1)


@pytest.fixture(scope="module")
def evaluator_parts(af_small, session_cache, small_spec):
    plan = StatsPlan(small_spec, (0,), {t: 100 for t in TARGETS})
    stats = load_statistics(session_cache, plan, af_small.archs)
    return stats, {t: af_small.accuracies[t] for t in TARGETS}, plan, [terminal_values(a) for a in af_small.archs]


def test_cross_validated_fitness(evaluator_parts):
    stats, accuracies, plan, terminals = evaluator_parts
    folds = make_folds(16, 4, seed=0)
    genome = parse_genome("block_mean(to_mean_scalar(element_wise_abs(F1g)))")
    mean_eval = FitnessEvaluator.from_statistics(stats, accuracies, TARGETS, plan.target_classes, folds=folds, fold_mode="mean")
    worst_eval = FitnessEvaluator.from_statistics(stats, accuracies, TARGETS, plan.target_classes, folds=folds, fold_mode="worst")
    plain = FitnessEvaluator.from_statistics(stats, accuracies, TARGETS, plan.target_classes)
    record, worst, whole = mean_eval.evaluate(genome), worst_eval.evaluate(genome), plain.evaluate(genome)
    scores = plain.architecture_scores(genome)[100]
    by_hand = [np.mean([correlate(scores[f], accuracies[t][f])["kendall"] for t in TARGETS]) for f in folds]
    assert record.fold_fitness == pytest.approx(by_hand)
    assert record.fitness == pytest.approx(np.mean(by_hand)) and worst.fitness == pytest.approx(min(by_hand))
    assert record.fitness_all == whole.jcm and record.jcm == whole.jcm == worst.jcm
    assert FitnessRecord.from_json(json.loads(json.dumps(record.to_json()))) == record
    assert "fold_fitness" not in whole.to_json() and "fitness" not in whole.to_json(), \
        "paper-setting records keep their old form"
    with pytest.raises(ValueError, match="folds"):
        FitnessEvaluator.from_statistics(stats, accuracies, TARGETS, plan.target_classes, folds=[[0, 1], [1, 2]])


def test_terminal_genomes_need_terminals_in_the_evaluator(evaluator_parts):
    stats, accuracies, plan, terminals = evaluator_parts
    genome = parse_genome("block_mean(no_op(A_log_params))")
    without = FitnessEvaluator.from_statistics(stats, accuracies, TARGETS, plan.target_classes).evaluate(genome)
    assert not without.valid and "terminals" in without.reason
    record = FitnessEvaluator.from_statistics(stats, accuracies, TARGETS, plan.target_classes, terminals=terminals).evaluate(genome)
    params = [t["A_params"] for t in terminals]
    assert record.kendall["c100_kd"] == pytest.approx(correlate(params, accuracies["c100_kd"])["kendall"])


def test_parsimony_tie_break():
    big = FitnessRecord("g1", "block_mean(to_mean_scalar(sigmoid(element_wise_abs(F1))))", True, jcm=0.5)
    small = FitnessRecord("g2", "block_mean(to_mean_scalar(F1))", True, jcm=0.5)
    better = FitnessRecord("g3", "block_mean(to_mean_scalar(sigmoid(element_wise_abs(F2))))", True, jcm=0.6)
    assert complexity(small) == 3 and complexity(big) == 5
    assert max([big, small], key=lambda r: rank_key(r, True)) is small
    assert max([big, small, better], key=lambda r: rank_key(r, True)) is better
    assert rank_key(big, False) == rank_key(small, False)


def test_beyond_size_by_hand(af_bench):
    archs = af_bench.archs
    params = np.array([count_params(a) for a in archs], dtype=float)
    depth = np.array([describe(a)["depth"] for a in archs])
    report = beyond_size(params, archs, af_bench.accuracies, ["c100_kd", "flower_kd"])
    c100 = report["c100_kd"]
    assert c100["kendall_with_params"] == pytest.approx(1.0)
    assert c100["kendall"] == pytest.approx(0.548, abs=5e-4)  # the benchmark README's figure
    assert c100["kendall_with_depth"] == pytest.approx(correlate(params, depth)["kendall"])
    assert math.isnan(c100["partial_given_params"]), "nothing beyond size when the proxy is size"
    # c100_kd follows depth on AutoFormer: depth is the bar there, params the bar on flower_kd
    assert c100["bar"]["descriptor"] == "depth" and not c100["beats_bar"]
    assert report["flower_kd"]["bar"]["descriptor"] == "params"


def test_paired_bootstrap():
    rng = np.random.default_rng(0)
    accuracy = rng.normal(size=80)
    good = accuracy + rng.normal(scale=0.3, size=80)
    bad = accuracy + rng.normal(scale=2.0, size=80)
    result = paired_bootstrap(good, bad, accuracy, samples=300, seed=1)
    observed = correlate(good, accuracy)["kendall"] - correlate(bad, accuracy)["kendall"]
    assert result["difference"] == pytest.approx(observed)
    assert result["mean"] == pytest.approx(observed, abs=0.05) and 0 < result["std"] < 0.1
    assert result["ahead"] > 0.95 and result["samples"] == 300
    same = paired_bootstrap(good, good, accuracy, samples=50)
    assert same["mean"] == 0 and same["std"] == 0


def test_search_with_the_new_genome_space_and_cv(af_small, session_cache, tmp_path):
    bench_file = tmp_path / "af16.jsonl"
    write_benchmark_jsonl(af_small, bench_file)
    space = GenomeSpace(aggregations=AGGREGATIONS, arch_terminals=True)
    settings = SearchSettings(
        bench=str(bench_file), batch_size=2, cache_dir=str(session_cache.root), search_fraction=0.75, workers=1,
        evolution=EvolutionConfig(population_size=5, iterations=4, retry_cap=4, top_k=2, seed=1, parsimony=True),
        genome=space.to_json(), cv_folds=3,
    )
    report = run_search(settings, tmp_path / "run", quiet=True)
    assert report["genome_space"] == space.to_json()
    assert report["cv"]["folds"] == 3 and len(report["cv"]["fold_jcm"]) == 3
    assert report["generalisation_gap"] == pytest.approx(report["search"]["jcm"] - report["test"]["jcm"])
    for split in ("search", "test"):
        for target in report["targets"]:
            row = report["beyond_size"][split][target]
            assert {"kendall_with_params", "kendall_with_depth", "partial_given_params", "partial_given_depth",
                    "bar", "beats_bar"} <= set(row)
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["settings"]["genome"]["arch_terminals"] is True and config["settings"]["cv_folds"] == 3
    resumed = run_search(None, tmp_path / "run", resume=True, quiet=True, session={"iterations": 5})
    assert resumed["iteration"] == 5


def test_free_tree_search_runs(af_small, session_cache, tmp_path):
    bench_file = tmp_path / "af16.jsonl"
    write_benchmark_jsonl(af_small, bench_file)
    settings = SearchSettings(
        bench=str(bench_file), batch_size=2, cache_dir=str(session_cache.root), search_fraction=0.75, workers=1,
        evolution=EvolutionConfig(population_size=5, iterations=4, retry_cap=4, top_k=2, seed=2),
        genome=GenomeSpace("free", AGGREGATIONS, arch_terminals=True).to_json(),
    )
    report = run_search(settings, tmp_path / "free", quiet=True)
    tree = parse_genome(report["genome"])
    from autoprox.genome.free import check_tree

    check_tree(tree, GenomeSpace("free", AGGREGATIONS, arch_terminals=True), allow_excluded=False)
    assert report["finished"]
