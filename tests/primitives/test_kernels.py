"""The ``numpy`` kernel set (issue 12): NumPy forms of the slow element-wise primitives.

The default ``torch`` set stays bitwise what it was (the recorded-log tests of
``tests/repo/test_speed.py`` cover it); the ``numpy`` set gives the same validity and reasons
and scores within :data:`SCORE_TOLERANCE` of the torch set's.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from autoprox.core.errors import ConfigError
from autoprox.data.cache import StatsPlan, load_statistics
from autoprox.genome.memo import SubtreeMemo
from autoprox.genome.tree import InvalidProxy, kernel_map, parse_genome, primitive_set, score_architecture, typed_name
from autoprox.genome.template import mutate_template, random_template
from autoprox.core.errors import GenomeError
from autoprox.search.fitness import FitnessEvaluator
from autoprox.search.settings import SearchSettings
from autoprox.spaces.descriptors import terminal_values
from autoprox.primitives import KERNEL_SETS, PRIMITIVES, UNARY, fast, unary
from tests.genome_corpus import best_genomes
from tests.conftest import REPO

pytestmark = pytest.mark.slow

TARGETS = ("c100_kd", "flower_kd", "chaoyang_kd", "imagenet_super")
ALL_100 = {t: 100 for t in TARGETS}
FAST_OPS = ("element_wise_tanh", "element_wise_exp", "element_wise_log", "element_wise_mish", "element_wise_abslog")
#: Largest relative difference of a committed proxy's score between the two kernel sets: the largest
#: seen on 2 AutoFormer and 2 PiT architectures is 1.7e-7 (batch 2 here), and 2.0e-6 over the 1,428
#: genomes of every committed best.json and hall of fame (batch 8: exp(log(A_params)), where one ulp of
#: the log is 2e-6 of the exp), leaving out one score of 6e-8 that cancels two tanh values of 0.76.
SCORE_TOLERANCE = 1e-5
#: Largest difference of one value, in float32 ulps, between a fast kernel and its torch form
#: on normal results (3 seen).
ULP_TOLERANCE = 4
FLOAT32_TINY = float(np.finfo(np.float32).tiny)


def _edge_and_random_values(op: str) -> torch.Tensor:
    generator = torch.Generator().manual_seed(0)
    edges = torch.tensor([0.0, -0.0, -1.0, 1.0, -2.5, 1e-45, 1e-38, 1e-20, 20.0, 20.5, 88.7, 88.8, 89.0, -87.0,
                          -104.0, 1e10, -1e10, 1e30, -1e30, 3.4e38, -3.4e38, math.nan, math.inf, -math.inf])
    randoms = torch.cat([torch.randn(5000, generator=generator) * scale for scale in (1e-3, 0.1, 1, 3, 10, 30, 100)])
    if "log" in op:  # mostly positive values, where the log is defined
        randoms = randoms.abs()
    return torch.cat([edges, randoms])


def _int_bits(t: torch.Tensor) -> np.ndarray:
    return t.numpy().view(np.int32).astype(np.int64)


@pytest.mark.parametrize("op", FAST_OPS)
def test_each_fast_kernel_equals_its_torch_form_to_a_few_ulps_with_the_same_nan_and_inf(op):
    x = _edge_and_random_values(op)
    before = x.clone()
    got, expected = getattr(fast, op)(x), getattr(unary, op)(x)
    assert torch.equal(x.view(torch.int32), before.view(torch.int32))  # the input is not modified
    assert got.dtype == torch.float32 and got.shape == expected.shape
    assert torch.equal(torch.isnan(got), torch.isnan(expected)), op
    infinite = torch.isinf(expected)
    assert torch.equal(torch.isinf(got), infinite) and torch.equal(got[infinite], expected[infinite]), op
    finite = torch.isfinite(expected)
    normal = finite & (expected.abs() >= FLOAT32_TINY)
    ulps = np.abs(_int_bits(got[normal]) - _int_bits(expected[normal]))
    assert ulps.max() <= ULP_TOLERANCE, (op, int(ulps.max()))
    # Results below float32's normal range differ by at most as many of its smallest steps.
    tiny = finite & ~normal
    assert torch.all((got[tiny] - expected[tiny]).abs() <= ULP_TOLERANCE * 2.0**-149), op
    assert torch.equal(torch.signbit(got[finite]), torch.signbit(expected[finite])), op  # -0.0 stays -0.0


@pytest.mark.parametrize("op", FAST_OPS)
def test_a_fast_kernel_takes_a_scalar_and_strided_matrices(op):
    scalar = torch.tensor(0.75)
    value = getattr(fast, op)(scalar)
    assert isinstance(value, torch.Tensor) and value.dim() == 0 and value.dtype == torch.float32
    assert float(value) == pytest.approx(float(getattr(unary, op)(scalar)), rel=1e-6)
    matrix = torch.rand(7, 5, generator=torch.Generator().manual_seed(1)) + 0.5
    for view in (matrix.t(), matrix[:, ::2], matrix.expand(3, 7, 5)[1]):
        got, expected = getattr(fast, op)(view), getattr(unary, op)(view)
        assert got.shape == expected.shape
        torch.testing.assert_close(got, expected, rtol=1e-6, atol=0)


@pytest.mark.parametrize("op", FAST_OPS)
def test_a_fast_kernel_falls_back_to_torch_where_numpy_cannot_read_the_tensor(op):
    values = torch.rand(4, 3, generator=torch.Generator().manual_seed(2)) + 0.5
    for x in (values.double(), values.half(), values.clone().requires_grad_(True), torch._neg_view(-values)):
        got, expected = getattr(fast, op)(x), getattr(unary, op)(x)
        assert got.dtype == expected.dtype
        assert torch.equal(got.detach(), expected.detach()), (op, x.dtype)
    assert not fast.numpy_ready(torch._neg_view(values)) and fast.numpy_ready(values)


def test_the_table_names_the_fast_forms_and_exports_keep_torch_source():
    assert tuple(p.name for p in PRIMITIVES.values() if p.fast) == FAST_OPS
    assert tuple(KERNEL_SETS) == ("torch", "numpy")
    for prim in PRIMITIVES.values():
        assert prim.kernel() is prim.function and prim.kernel("torch") is prim.function
        assert prim.kernel("numpy") is (getattr(fast, prim.name) if prim.fast else prim.function)
        assert prim.source.startswith(f"def {prim.name}(") and "np." not in prim.source
    with pytest.raises(KeyError, match="unknown kernel set 'jax'"):
        UNARY["element_wise_tanh"].kernel("jax")


def test_kernel_maps_differ_from_each_other_only_at_the_fast_forms():
    torch_map, numpy_map = kernel_map("torch"), kernel_map("numpy")
    assert kernel_map("torch") is torch_map and set(torch_map) == set(numpy_map) == set(primitive_set().context)
    assert all(torch_map[typed_name(prim.name, form)] is prim.function
               for prim in PRIMITIVES.values() for form in prim.forms)
    changed = {name for name in numpy_map if numpy_map[name] is not torch_map[name]}
    assert changed == {typed_name(op, form) for op in FAST_OPS for form in ("matrix", "scalar")}
    with pytest.raises(ConfigError, match="unknown kernel set 'jax'; use torch or numpy"):
        kernel_map("jax")


def _committed_genomes() -> list[str]:
    return best_genomes()


def _outcome(tree, stats, terminals, kernels, memo=None):
    try:
        return "value", score_architecture(tree, stats, terminals, memo, kernels)
    except (InvalidProxy, GenomeError) as exc:
        return "invalid", str(exc)


@pytest.mark.parametrize("bench_name", ["af_small", "pit_small"])
def test_every_committed_proxy_scores_the_same_within_the_tolerance_with_numpy_kernels(request, session_cache,
                                                                                      small_spec, bench_name):
    """On 2 architectures: validity and reason identical, scores within SCORE_TOLERANCE relative; the
    subtree memo (and reducing early, where it reduces nothing) keeps numpy kernels' own numbers."""
    bench = request.getfixturevalue(bench_name)
    archs = bench.archs[:2]
    plan = StatsPlan(small_spec, (0,), ALL_100).with_extras(("spread",))  # for genomes with spread terminals
    stats = load_statistics(session_cache, plan, archs)[(0, 100)]
    memos = [SubtreeMemo(len(s)) for s in stats]
    genomes = _committed_genomes()
    assert len(genomes) >= 10
    torch_kernels, numpy_kernels = kernel_map("torch"), kernel_map("numpy")
    worst, valid, moved = 0.0, 0, 0
    for genome in genomes:
        tree = parse_genome(genome)
        for arch, blocks, memo in zip(archs, stats, memos):
            terminals = terminal_values(arch, 100)
            expected = _outcome(tree, blocks, terminals, torch_kernels)
            got = _outcome(tree, blocks, terminals, numpy_kernels)
            assert got[0] == expected[0], (genome, got, expected)
            assert _outcome(tree, blocks, terminals, numpy_kernels, memo) == got, genome
            if expected[0] == "invalid":
                assert got == expected, genome
                continue
            valid += 1
            moved += got != expected
            worst = max(worst, abs(got[1] - expected[1]) / max(abs(expected[1]), 1e-30))
    print(f"{bench_name}: {valid} valid scores, {moved} moved, largest relative difference {worst:.3g}")
    assert valid > len(genomes) and moved > 0  # the fast kernels are used, and they move the last bits
    assert worst <= SCORE_TOLERANCE


@pytest.fixture(scope="module")
def af_stats(session_cache, small_spec, af_small):
    return load_statistics(session_cache, StatsPlan(small_spec, (0,), ALL_100), af_small.archs[:6])


def _near_ties(mine: np.ndarray, theirs: np.ndarray) -> bool:
    """Whether two architectures' scores are closer than the two kernel sets' scores differ: then either order
    is float rounding, which the CPU's torch kernels decide too (AVX-512, AVX2, ATEN_CPU_CAPABILITY=default), and
    a JCM is bounded by nothing but its range. A mean of normalized values is a small difference of large terms."""
    mine, theirs = np.asarray(mine, dtype=np.float64), np.asarray(theirs, dtype=np.float64)
    return bool(np.min(np.diff(np.sort(mine))) <= 2 * np.max(np.abs(mine - theirs)))


def test_a_search_like_stream_gets_the_same_records_to_the_tolerance_with_numpy_kernels(af_stats, af_small):
    """Genomes drawn as a search draws them (children of earlier ones, the memo shared): the same
    validity and reasons, Kendall figures equal unless a near-tie flips, JCM within a pair's weight."""
    import random

    accuracies = {t: af_small.accuracies[t][:6] for t in TARGETS}
    by_torch = FitnessEvaluator.from_statistics(af_stats, accuracies, TARGETS, ALL_100)
    by_numpy = FitnessEvaluator.from_statistics(af_stats, accuracies, TARGETS, ALL_100, kernels="numpy")
    assert by_numpy.evaluator.kernels == "numpy" and by_torch.evaluator.kernels == "torch"
    rng = random.Random(5)
    trees = [random_template(rng) for _ in range(12)]
    used_fast = bounded = 0
    for _ in range(60):
        tree = mutate_template(rng.choice(trees), rng)
        trees.append(tree)
        a, b = by_torch.evaluate(tree), by_numpy.evaluate(tree)
        assert (a.valid, a.reason) == (b.valid, b.reason), a.genome
        used_fast += any(op in a.genome for op in FAST_OPS)
        if a.valid and not _near_ties(by_torch.architecture_scores(tree)[100], by_numpy.architecture_scores(tree)[100]):
            bounded += 1
            assert abs(a.jcm - b.jcm) <= 1 / 15 + 1e-9, a.genome  # 15 pairs of 6 architectures
            assert sum(a.kendall[t] == b.kendall[t] for t in TARGETS) >= 3 or a.jcm == pytest.approx(b.jcm, abs=0.2)
    assert used_fast > 20 and bounded >= 10
    with pytest.raises(ConfigError, match="unknown kernel set"):
        FitnessEvaluator.from_statistics(af_stats, accuracies, TARGETS, ALL_100, kernels="jax")


def test_settings_record_the_kernels_only_when_not_torch():
    plain = SearchSettings(bench="b.jsonl")
    numpy_set = SearchSettings(bench="b.jsonl", kernels="numpy")
    assert "kernels" not in plain.to_json()
    assert numpy_set.to_json()["kernels"] == "numpy"
    assert SearchSettings.from_json(numpy_set.to_json()).to_json() == numpy_set.to_json()
    assert SearchSettings.from_json(numpy_set.to_json()).kernels == "numpy"
    assert SearchSettings.from_json(plain.to_json()).kernels == "torch"
    assert plain.digest("x") != numpy_set.digest("x")
    with pytest.raises(ConfigError, match="setting 'kernels'"):
        SearchSettings.from_json(plain.to_json() | {"kernels": "jax"})


@pytest.mark.parametrize("run", ["autoformer-search", "pit-search"])
def test_committed_runs_read_as_torch_kernels_with_their_recorded_digest(run):
    """Resuming a run made before the kernels setting existed still finds the digest it recorded."""
    from autoprox.data.benchmark import load_benchmark, locate_benchmark
    from autoprox.search.settings import recorded_settings

    path = REPO / "tests" / "fixtures" / "recorded-runs" / run  # runs/recommended/RUN's, frozen (its README)
    settings, _ = recorded_settings(path)
    assert settings.kernels == "torch" and "kernels" not in settings.to_json()
    recorded = json.loads((path / "checkpoint-digest.json").read_text())["settings_digest"]
    assert settings.digest(load_benchmark(locate_benchmark(settings.bench)).sha256) == recorded


def test_the_search_commands_take_kernels():
    from autoprox.cli.main import build_parser
    from autoprox.cli.options import search_settings

    parser = build_parser()
    for command in ("search", "evaluate", "transfer"):
        args = parser.parse_args([command, "--space", "autoformer", "--kernels", "numpy"])
        assert args.kernels == "numpy"
        assert parser.parse_args([command, "--space", "autoformer"]).kernels is None  # resolved with the evaluation
    args = parser.parse_args(["search", "--space", "autoformer", "--kernels", "torch"])
    assert search_settings(args).kernels == "torch"
    with pytest.raises(SystemExit):
        parser.parse_args(["search", "--space", "autoformer", "--kernels", "jax"])


@pytest.mark.parametrize("argv, evaluation, kernels", [
    (["search"], "counted", "numpy"),  # issue 32: the default search counts with NumPy's kernels
    (["search", "--evaluation", "exact"], "exact", "torch"),  # bitwise the committed runs
    (["search", "--cache-precision", "float32"], "exact", "torch"),  # counted cannot run: exact, torch's
    (["search", "--evaluation", "exact", "--kernels", "numpy"], "exact", "numpy"),
    (["evaluate"], "exact", "torch"),  # evaluate and transfer keep the committed studies' defaults
    (["evaluate", "--evaluation", "counted"], "counted", "numpy"),
    (["transfer"], "exact", "torch"),
])
def test_counted_evaluation_takes_numpy_kernels_unless_told(argv, evaluation, kernels):
    from autoprox.cli.main import build_parser
    from autoprox.cli.options import search_settings

    args = build_parser().parse_args([*argv, "--space", "autoformer"])
    settings = search_settings(args, evaluation="counted" if argv[0] == "search" else "exact")
    assert (settings.evaluation, settings.kernels) == (evaluation, kernels)
    assert settings.to_json().get("kernels", "torch") == kernels  # recorded unless torch's, the reading default
