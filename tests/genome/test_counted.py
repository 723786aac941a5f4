"""Counted evaluation (issue 12): a genome evaluated once per distinct stored float16 value.

What is checked: the counts hold every entry of every block; a counted reduction is the
float64 sum of the very float32 values the exact path computes entry by entry (rounded once
to float32); a genome the counted path does not cover, or an invalid one, gets the exact
path's record bitwise; every committed proxy and a search-like stream of genomes keep their
validity and reasons, and their scores within :data:`SCORE_TOLERANCE`; the setting is recorded
only when used, and refused where it cannot apply.
"""

from __future__ import annotations

import json
import random
from dataclasses import replace

import numpy as np
import pytest
import torch

from autoprox.core.errors import ConfigError
from autoprox.data.cache import StatsPlan, load_statistics
from autoprox.data.counts import count_statistic, stored_float16
from autoprox.genome.counted import CountedBlocks, NotCounted, counted_block_values, counted_scores
from autoprox.genome.tree import InvalidProxy, block_values, kernel_map, parse_genome
from autoprox.genome.template import mutate_template, random_template
from autoprox.core.errors import GenomeError
from autoprox.networks.statistics import STAT_NAMES
from autoprox.search.fitness import FitnessEvaluator
from autoprox.search.settings import SearchSettings
from autoprox.spaces.descriptors import terminal_values
from tests.conftest import REPO
from tests.genome_corpus import best_genomes

pytestmark = pytest.mark.slow

TARGETS = ("c100_kd", "flower_kd", "chaoyang_kd", "imagenet_super")
ALL_100 = {t: 100 for t in TARGETS}
#: Largest relative difference between a counted and an exact block value (below the aggregation),
#: against the larger of the value and :data:`SCALE_FLOOR` times the values' typical size: the exact
#: path sums in float32 (torch's cascade), the counted one in float64, so values that are a small
#: difference of large terms (the mean of a gradient, about 1e-6 of its entries' magnitude) differ
#: by more, relative to themselves, than the float32 rounding of their terms. (Scores are the
#: aggregation of these; a block_std of near-equal values magnifies their differences, and scores
#: spread over less than NEAR_CONSTANT of the values go to the exact path.)
SCORE_TOLERANCE = 1e-4
SCALE_FLOOR = 1e-2


@pytest.fixture(scope="module")
def af_stats(session_cache, small_spec, af_small):
    plan = StatsPlan(small_spec, (0,), ALL_100).with_extras(("spread",))
    return load_statistics(session_cache, plan, af_small.archs[:6])


@pytest.fixture(scope="module")
def pit_stats(session_cache, small_spec, pit_small):
    plan = StatsPlan(small_spec, (0,), ALL_100).with_extras(("spread",))
    return load_statistics(session_cache, plan, pit_small.archs[:3])


def _exact(tree, blocks, terminals):
    """Every block's value below the aggregation, the exact way (None when invalid)."""
    kernels = kernel_map()
    try:
        return np.concatenate([block_values(tree, b, t, None, kernels) for b, t in zip(blocks, terminals)])
    except (InvalidProxy, GenomeError):
        return None


def _close(counted: np.ndarray, exact: np.ndarray) -> float:
    """The largest relative difference of two vectors of block values (see SCORE_TOLERANCE)."""
    scale = np.maximum(np.abs(exact), SCALE_FLOOR * np.median(np.abs(exact)))
    scale = np.where(scale > 0, scale, 1e-30)
    return float(np.max(np.abs(counted - exact) / scale))


def test_the_counts_hold_every_entry_of_every_block(af_stats):
    blocks = [b for arch in af_stats[(0, 100)] for b in arch]
    assert all(stored_float16(b) for b in blocks)
    for name in ("F1", "F2g", "F4"):
        counted = count_statistic(name, blocks)
        assert counted.blocks == len(blocks) and 1 <= len(counted.exponents) <= len(blocks)
        rows = counted.counts
        assert np.array_equal(np.asarray(rows.sum(axis=1)).ravel(), counted.numel)
        for m, block in enumerate(blocks):
            decoded = block[name].numpy().ravel()
            start, end = rows.indptr[m], rows.indptr[m + 1]
            values = counted.base_values.numpy().ravel()[rows.indices[start:end]]
            repeated = np.repeat(values, rows.data[start:end].astype(np.int64))
            # the same float32 bits as the block decoded, in ascending code order
            assert np.array_equal(np.sort(repeated.view(np.uint32)), np.sort(decoded.view(np.uint32)))
            assert counted.shapes[m] == tuple(block[name].shape)


def test_statistics_held_as_float32_are_not_counted(session_cache, small_spec, af_small):
    plan = StatsPlan(small_spec, (0,), ALL_100)
    as_float32 = load_statistics(session_cache, plan, af_small.archs[:2], encoded=False)
    blocks = [b for arch in as_float32[(0, 100)] for b in arch]
    assert count_statistic("F1", blocks) is None and not stored_float16(blocks[0])
    with pytest.raises(NotCounted, match="not held as stored float16"):
        CountedBlocks(as_float32[(0, 100)]).statistic("F1")
    accuracies = {t: af_small.accuracies[t][:2] for t in TARGETS}
    with pytest.raises(ConfigError, match="counted evaluation needs the statistics held as stored float16"):
        FitnessEvaluator.from_statistics(as_float32, accuracies, TARGETS, ALL_100, evaluation="counted")
    with pytest.raises(ConfigError, match="unknown evaluation 'fast'; use exact or counted"):
        FitnessEvaluator.from_statistics(as_float32, accuracies, TARGETS, ALL_100, evaluation="fast")


@pytest.mark.parametrize("genome", [
    "to_mean_scalar(element_wise_tanh(F1))",
    "element_wise_normalized_sum(element_wise_exp(F2))",
    "l1_norm(element_wise_revert(F3g))",
    "frobenius_norm(sigmoid(F4))",
    "to_std_scalar(element_wise_mish(F1g))",
    "to_mean_scalar(element_wise_product(element_wise_abs(F4g), element_wise_sqrt(element_wise_abs(F4g))))",
    "to_mean_scalar(element_wise_tanh(min_max_normalize(F3)))",
    "frobenius_norm(element_wise_sum(normalize(F1g), element_wise_abs(F1g)))",
    "to_std_scalar(sigmoid(normalize(F2)))",
])
def test_a_counted_reduction_is_the_float64_sum_of_the_exact_entries(af_stats, genome):
    """Per block: the counted value equals the reduction of the entries the exact path computes,
    summed in float64 and rounded once, to one float32 step; the exact float32 sum is within 1e-5
    of the larger of the value and the entries' mean magnitude of both."""
    tree = parse_genome(genome)
    archs = af_stats[(0, 100)]
    counted = CountedBlocks(archs)
    walk_values = []
    for arch in archs:
        for block in arch:
            from autoprox.genome.tree import _evaluate_block

            matrix, _ = _evaluate_block(tree, 2, block)  # the matrix below the reduction, the exact way
            walk_values.append(matrix.numpy().astype(np.float64))
    from autoprox.genome.counted import _Walk

    got = _Walk(tree, counted, None, kernel_map()).evaluate(1)[0].numpy()
    op = genome.split("(", 1)[0]
    for value, entries, arch_block in zip(got, walk_values, [b for a in archs for b in a]):
        n = entries.size
        reference = {"to_mean_scalar": np.float32(entries.sum()) / np.float32(n),
                     "element_wise_normalized_sum": np.float32(entries.sum()) / np.float32(n),
                     "l1_norm": np.float32(np.abs(entries).sum()) / np.float32(n),
                     "frobenius_norm": np.sqrt(np.float32((entries.astype(np.float32) ** 2).astype(np.float64).sum())),
                     "to_std_scalar": np.float32(entries.std())}[op]
        assert value == pytest.approx(float(reference), rel=2.5e-7, abs=1e-37), genome
        exact = float(_evaluate_block(tree, 1, arch_block)[0])
        assert abs(exact - value) <= 1e-5 * max(abs(float(value)), np.abs(entries).mean(), 1e-30), genome


def _committed_genomes() -> list[str]:
    return best_genomes()


@pytest.mark.parametrize("bench_name", ["af", "pit"])
def test_every_committed_proxy_keeps_its_validity_and_its_scores_within_the_tolerance(
        request, af_small, pit_small, bench_name):
    bench = af_small if bench_name == "af" else pit_small
    stats = request.getfixturevalue(f"{bench_name}_stats")[(0, 100)]
    terminals = [terminal_values(a, 100) for a in bench.archs[: len(stats)]]
    counted = CountedBlocks(stats)
    genomes = _committed_genomes()
    assert len(genomes) >= 10
    used, worst, worst_genome = 0, 0.0, ""
    for genome in genomes:
        tree = parse_genome(genome)
        exact = _exact(tree, stats, terminals)
        try:
            got = counted_block_values(tree, counted, terminals, kernel_map())
        except NotCounted:
            continue
        assert exact is not None, genome  # counted never finds valid what the exact path rejects
        used += 1
        if _close(got, exact) > worst:
            worst, worst_genome = _close(got, exact), genome
    print(f"{bench_name}: {used} of {len(genomes)} committed proxies counted, largest difference {worst:.3g} "
          f"({worst_genome})")
    assert used >= len(genomes) // 3 and worst <= SCORE_TOLERANCE


def test_a_search_like_stream_gets_the_same_validity_reasons_and_jcm_to_a_pair(af_stats, af_small):
    """Genomes drawn as a search draws them: validity and reasons identical (an invalid genome
    always ends on the exact path), a genome the counted path does not cover gets the exact record
    bitwise, and a counted JCM moves by at most one flipped pair (1/15 of 6 architectures' 15)."""
    accuracies = {t: af_small.accuracies[t][:6] for t in TARGETS}
    terminals = [terminal_values(a, 100) for a in af_small.archs[:6]]
    exact = FitnessEvaluator.from_statistics(af_stats, accuracies, TARGETS, ALL_100, terminals=terminals)
    counted = FitnessEvaluator.from_statistics(af_stats, accuracies, TARGETS, ALL_100, terminals=terminals, evaluation="counted")
    assert counted.prepare() >= 0 and counted.counted[(0, 100)].nbytes > 0
    rng = random.Random(11)
    trees = [random_template(rng) for _ in range(15)]
    same, valid = 0, 0
    for _ in range(90):
        tree = mutate_template(rng.choice(trees), rng)
        trees.append(tree)
        before = counted.path_counts["counted"]
        a, b = exact.evaluate(tree), counted.evaluate(tree)
        assert (a.valid, a.reason) == (b.valid, b.reason), a.genome
        if counted.path_counts["counted"] == before:
            assert a == b, a.genome  # the exact path's record, bitwise
        elif a.valid:
            valid += 1
            same += a.kendall == b.kendall
            assert abs(a.jcm - b.jcm) <= 1 / 15 + 1e-9, a.genome
    print(counted.path_counts, f"{valid} valid counted, {same} with every Kendall the same")
    assert counted.path_counts["counted"] >= 12 and counted.path_counts["exact"] >= 10
    assert valid >= 10 and same >= 0.8 * valid


def test_uncovered_and_invalid_genomes_take_the_exact_path(af_stats, af_small):
    accuracies = {t: af_small.accuracies[t][:6] for t in TARGETS}
    counted = FitnessEvaluator.from_statistics(af_stats, accuracies, TARGETS, ALL_100, evaluation="counted")
    exact = FitnessEvaluator.from_statistics(af_stats, accuracies, TARGETS, ALL_100)
    for genome, reason in [
        ("to_mean_scalar(softmax(F1))", None),  # row-wise: not covered
        ("to_mean_scalar(element_wise_product(F1, F1g))", None),  # a Hadamard product of two statistics
        ("to_mean_scalar(element_wise_sum(F1, F2))", "shapes"),  # (3D x D) + (D x D): a shape mismatch
        ("to_mean_scalar(element_wise_log(F1g))", "NaN or inf"),  # the log of negative gradients
        ("to_mean_scalar(element_wise_revert(normalize(F3)))", None),  # zero but for rounding
    ]:
        tree = parse_genome(genome)
        with pytest.raises(NotCounted):
            counted_scores(tree, counted.counted[(0, 100)], None, kernel_map())
        got, expected = counted.evaluate(tree), exact.evaluate(tree)
        assert got == expected, genome
        assert (reason is None) == got.valid and (reason is None or reason in got.reason), genome
    assert counted.path_counts == {"counted": 0, "exact": 5}


def test_the_subtree_memo_gives_the_same_values(af_stats):
    tree = parse_genome("to_mean_scalar(element_wise_sum(element_wise_tanh(l1_norm(F3)), sigmoid(F2g)))")
    fresh = counted_block_values(tree, CountedBlocks(af_stats[(0, 100)]), None, kernel_map())
    shared = CountedBlocks(af_stats[(0, 100)])
    counted_block_values(parse_genome("to_mean_scalar(element_wise_tanh(l1_norm(F3)))"), shared, None, kernel_map())
    assert any("l1_norm(F3)" in key for key in shared.memo)
    assert np.array_equal(counted_block_values(tree, shared, None, kernel_map()), fresh)
    shared.memo_limit = 1
    shared.remember("x", torch.zeros(3))
    assert list(shared.memo) == ["x"]


def test_settings_record_the_evaluation_only_when_counted():
    plain = SearchSettings(bench="b.jsonl")
    counted = SearchSettings(bench="b.jsonl", evaluation="counted")
    assert "evaluation" not in plain.to_json() and counted.to_json()["evaluation"] == "counted"
    assert SearchSettings.from_json(counted.to_json()).evaluation == "counted"
    assert SearchSettings.from_json(plain.to_json()).evaluation == "exact"
    assert plain.digest("x") != counted.digest("x")
    with pytest.raises(ConfigError, match="setting 'evaluation'"):
        SearchSettings.from_json(plain.to_json() | {"evaluation": "fast"})


def test_the_search_command_takes_the_evaluation():
    from autoprox.cli.main import build_parser
    from autoprox.cli.options import search_settings

    args = build_parser().parse_args(["search", "--space", "autoformer", "--evaluation", "counted"])
    assert search_settings(args).evaluation == "counted"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["search", "--space", "autoformer", "--evaluation", "fast"])


def test_a_new_search_evaluates_counted_where_it_applies_and_committed_runs_stay_exact():
    """Issue 32: counted evaluation is the default of search and ProxySearch (the default AutoFormer search ends on
    the same 20 hall-of-fame proxies and the same best.json as exact, in half the time: BENCHMARKS.md); exact where
    counted cannot run (float32 cache, a Dask cluster), for evaluate and transfer, and for every run that recorded
    no evaluation (the committed ones)."""
    from autoprox.api import ProxySearch
    from autoprox.cli import evaluate, transfer
    from autoprox.cli.main import build_parser
    from autoprox.cli.options import search_settings

    def settings(*argv):
        return search_settings(build_parser().parse_args(["search", "--space", "autoformer", *argv]))

    assert settings().evaluation == "counted" and settings().to_json()["evaluation"] == "counted"
    assert settings("--cache-precision", "float32").evaluation == "exact"
    assert settings("--scheduler", "local:2").evaluation == "exact"
    assert settings("--evaluation", "exact").evaluation == "exact"
    assert ProxySearch(space="pit").search_settings().evaluation == "counted"
    assert ProxySearch(space="pit", scheduler="local:2").search_settings().evaluation == "exact"
    # evaluate and transfer keep exact unless told: the protocols' figures stay those of the committed ones
    import inspect

    assert 'search_settings(args, evaluation="exact")' in inspect.getsource(evaluate)
    assert inspect.getsource(evaluate).count("search_settings(args") == \
        inspect.getsource(evaluate).count('search_settings(args, evaluation="exact")')
    assert 'search_settings(args, evaluation="exact")' in inspect.getsource(transfer)
    committed = json.loads((REPO / "runs" / "autoformer-reference" / "config.json").read_text())["settings"]
    assert "evaluation" not in committed and SearchSettings.from_json(committed).evaluation == "exact"


def test_a_counted_search_runs_and_records_it(af_small_file, session_cache, tmp_path):
    from autoprox.search.engine import run_search
    from autoprox.search.evolution import EvolutionConfig

    settings = SearchSettings(bench=str(af_small_file), targets=("c100_kd", "flower_kd"), batch_size=2,
                              cache_dir=str(session_cache.root), workers=1, search_fraction=0.75,
                              evolution=EvolutionConfig(population_size=6, iterations=4, retry_cap=3, seed=1),
                              evaluation="counted")
    with pytest.raises(ConfigError, match="needs --cache-precision float16"):
        run_search(replace(settings, cache_precision="float32"), tmp_path / "float32", quiet=True)
    assert not (tmp_path / "float32").exists()
    report = run_search(settings, tmp_path / "run", quiet=True)
    assert report["finished"] is True
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["settings"]["evaluation"] == "counted"
    records = [json.loads(line) for line in (tmp_path / "run" / "evaluations.jsonl").open()]
    assert len(records) >= 6 and any(r["valid"] for r in records)


def test_every_statistic_name_can_be_counted(af_stats):
    counted = CountedBlocks(af_stats[(0, 100)])
    assert set(STAT_NAMES) <= set(counted.statistic_names)
    assert all(counted.statistic(name).blocks == counted.blocks for name in STAT_NAMES)


def test_a_genome_stopped_by_its_structure_is_one_the_walk_stops(af_stats, monkeypatch):
    """``structural_obstacle`` (issue 32: a normalized matrix's 720 blocks computed and thrown away cost
    0.24 s a genome on the default search) only ever stops a genome the counted walk would stop too, so
    every score stays the exact path's; and it does stop each family of structural obstacles."""
    import autoprox.genome.counted as counted_module
    from autoprox.genome.counted import structural_obstacle
    from autoprox.genome.tree import genome_to_string
    from tests.genome_corpus import hall_of_fame_genomes

    rng = random.Random(7)
    drawn = [random_template(rng) for _ in range(400)]
    trees = [parse_genome(g) for g in hall_of_fame_genomes()] + drawn
    trees += [mutate_template(rng.choice(drawn), rng) for _ in range(400)]
    counted = CountedBlocks(af_stats[(0, 100)][:2])
    monkeypatch.setattr(counted_module, "structural_obstacle", lambda tree: None)  # the walk alone
    stopped = {}
    for tree in trees:
        reason = structural_obstacle(tree)
        if reason is None:
            continue
        stopped[reason.split(" ")[0] if "(" in reason else reason] = genome_to_string(tree)
        with pytest.raises(NotCounted):
            counted_block_values(tree, counted)
    assert {"softmax", "logsoftmax", "a matrix product", "the mean of a normalized matrix is its rounding",
            "the mean of a Hadamard product is not the product of the means"} <= set(stopped), stopped
