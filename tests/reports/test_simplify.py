"""Readable formulas: the SymPy rendering of every primitive, simplification, its check and timeout."""

from __future__ import annotations

import pytest
import sympy
import torch

from autoprox.data.cache import StatsRequest
from autoprox.genome.tree import InvalidProxy, parse_genome
from autoprox.genome.tree import score_architecture as _score_architecture
from autoprox.networks.statistics import torch_threads
from autoprox.reports import sympy_worker
from autoprox.reports.simplify import (
    SYMBOLS,
    Formula,
    _simplify_into,
    block_expression,
    outer_operations,
    readable_formula,
    readable_formulas,
)
from autoprox.reports.formula_check import check_equivalent, expression_score
from autoprox.primitives import UNARY

PUBLISHED = ("block_mean(to_mean_scalar(element_wise_sum(frobenius_norm(min_max_normalize(F2)), "
             "element_wise_sqrt(sigmoid(F4g)))))")
# sigmoid(x) + sigmoid(-x) = 1: only sympy.simplify sees it; the proxy is mean(G_qkv)
SIMPLIFIABLE = ("block_mean(to_mean_scalar(element_wise_product(element_wise_sum(sigmoid(F1), "
                "sigmoid(element_wise_revert(F1))), F1g)))")


def score_architecture(tree, stats):
    """The engine's score, single-threaded as the engine computes it."""
    with torch_threads(1):
        return _score_architecture(tree, stats)


@pytest.fixture(scope="module")
def stats(session_cache, small_spec, af_small):
    """Real statistics (batch 2) of three small AutoFormer architectures."""
    return [session_cache.get(StatsRequest(af_small.archs[i], small_spec, 0, 100)) for i in (0, 5, 9)]


def _genomes_covering_every_primitive() -> list[str]:
    genomes = []
    for name in UNARY:
        # matrix form on positive entries, scalar form on a positive scalar
        genomes.append(f"block_mean(to_mean_scalar(element_wise_sum({name}(element_wise_abs(F3)), "
                       f"{name}(l1_norm(F2)))))")
        genomes.append(f"block_mean(to_mean_scalar(element_wise_product({name}(F4), F4g)))")
    for name in ("element_wise_sum", "element_wise_difference", "element_wise_product"):
        genomes.append(f"block_mean(to_mean_scalar({name}(F1, F1g)))")  # matrix, matrix
        genomes.append(f"block_mean(to_mean_scalar({name}(F3, to_std_scalar(F3g))))")  # matrix, scalar
        genomes.append(f"block_mean(to_mean_scalar({name}(frobenius_norm(F2g), F2)))")  # scalar, matrix
        genomes.append(f"block_mean({name}(frobenius_norm(F1), l1_norm(F2)))")  # scalar, scalar
    genomes.append("block_mean(to_mean_scalar(matrix_multiplication(F2, F2g)))")
    genomes.append("block_mean(to_mean_scalar(matrix_multiplication(frobenius_norm(F1), l1_norm(F2))))")
    genomes.append(PUBLISHED)
    return genomes


def test_formula_evaluates_to_the_engine_score_for_every_primitive_and_form(stats):
    """The SymPy rendering, evaluated on the same statistics, gives the engine's scores."""
    checked = 0
    for genome in _genomes_covering_every_primitive():
        tree = parse_genome(genome)
        expr = block_expression(tree)
        for arch_stats in stats:
            try:
                expected = score_architecture(tree, arch_stats)
            except InvalidProxy:
                continue
            got = expression_score(expr, "block_mean", arch_stats, dtype=torch.float32)
            assert got == pytest.approx(expected, rel=1e-4, abs=1e-30), genome
            checked += 1
    assert checked >= 3 * 50


def test_statistics_are_named_symbols_and_reductions_named_functions():
    formula = readable_formula(PUBLISHED, simplify=False)
    names = {s.name for s in formula.original.free_symbols}
    assert names == {"W_proj", "G_H_mlp"}
    functions = {f.func.__name__ for f in formula.original.atoms(sympy.core.function.AppliedUndef)}
    assert functions == {"mean", "frobenius", "minmax"}
    assert formula.text == "1/L * sum_l ( mean(frobenius(minmax(W_proj)) + 1/sqrt(1 + exp(-G_H_mlp))) )"
    assert formula.latex.startswith(r"\frac{1}{L} \sum_{l=1}^{L} \left(")
    assert r"W^{\mathrm{proj}}_{l}" in formula.latex and r"\operatorname{frobenius}" in formula.latex
    from autoprox.reports import formula_check

    assert {SYMBOLS[s].name for s in SYMBOLS} == (set(sympy_worker.STAT_SYMBOL_NAMES)
                                                | set(formula_check.SCALAR_SYMBOL_NAMES)
                                                | set(sympy_worker.SPREAD_SYMBOL_NAMES))
    from autoprox.proxies.zoo_scores import ZOO_TERMINALS
    from autoprox.spaces.descriptors import terminal_names

    assert set(sympy_worker.ARCH_SYMBOL_NAMES) == set(terminal_names())
    assert formula_check.ZOO_SYMBOL_NAMES == tuple(ZOO_TERMINALS)
    assert all(sympy_worker.is_zoo_symbol(name) and sympy_worker.is_scalar_symbol(name) for name in ZOO_TERMINALS)


def test_simplification_runs_checked_and_keeps_the_original_when_not_smaller(stats):
    simplified, published = readable_formulas([SIMPLIFIABLE, PUBLISHED], check_stats=stats)
    assert simplified.status == "simplified", simplified.note
    assert simplified.shown == sympy.Function("mean", real=True)(SYMBOLS["F1g"])
    assert simplified.text == "1/L * sum_l ( mean(G_qkv) )"
    assert "checked on 3 architecture(s)" in simplified.note
    assert sympy_worker.node_count(simplified.shown) < sympy_worker.node_count(simplified.original)
    # the published proxy has no smaller form: the original is kept
    assert published.status == "original (not smaller)" and published.shown == published.original


def test_a_simpler_form_without_statistics_to_check_it_is_not_shown():
    formula = readable_formula(SIMPLIFIABLE, check_stats=None)
    assert formula.status == "unchecked" and formula.shown == formula.original
    assert "no statistics" in formula.note


def test_a_simplification_that_fails_the_numeric_check_is_not_shown(stats):
    original = block_expression(SIMPLIFIABLE)
    wrong = sympy.Function("mean", real=True)(SYMBOLS["F1g"]) * 2

    class FakeWorker:
        timeout = 10.0

        def simplify(self, index, expr):
            return "ok", wrong

    formula = Formula(SIMPLIFIABLE, "block_mean", original, original, "not simplified")
    _simplify_into(formula, FakeWorker(), 0, stats)
    assert formula.status == "check failed" and formula.shown == original
    assert "unsimplified formula shown" in formula.note
    agrees, _ = check_equivalent(original, wrong, "block_mean", stats)
    assert agrees is False
    agrees, how = check_equivalent(original, sympy.Function("mean", real=True)(SYMBOLS["F1g"]), "block_mean", stats)
    assert agrees is True, how


def test_timeout_falls_back_to_the_unsimplified_formula_and_says_so(stats):
    formulas = readable_formulas([SIMPLIFIABLE, SIMPLIFIABLE], check_stats=stats, timeout=0.001)
    for formula in formulas:
        assert formula.status == "timeout"
        assert formula.shown == formula.original
        assert "timed out" in formula.note and "unsimplified" in formula.note


def test_rank_preserving_outer_operations_are_reported(stats):
    plus_one = "block_mean(to_mean_scalar(element_wise_sum(softmax(frobenius_norm(F1)), element_wise_abs(F3))))"
    scaled = "block_mean(element_wise_normalized_sum(to_mean_scalar(element_wise_abs(F3))))"
    negated = "block_mean(to_mean_scalar(element_wise_revert(element_wise_abs(F3))))"
    plain = "block_mean(to_mean_scalar(element_wise_abs(F3)))"
    formulas = {g: readable_formula(g, simplify=False) for g in (plus_one, scaled, negated, plain)}
    assert [(op.text, op.rank_preserving) for op in formulas[plus_one].outer] == [("+ 1", True)]
    assert [(op.text, op.rank_preserving) for op in formulas[scaled].outer] == [("* 1/(eps + 1)", True)]
    assert [(op.text, op.rank_preserving) for op in formulas[negated].outer] == [("-", False)]
    assert formulas[plain].outer == [] and formulas[plain].outer_text() == ""
    assert "Kendall tau cannot see it" in formulas[plus_one].outer_text()
    # the claim holds: the proxy and its core rank the architectures identically (reversed for '-')
    for genome in (plus_one, scaled, negated):
        core = formulas[genome].ranking_core
        scores = [score_architecture(parse_genome(genome), s) for s in stats]
        cores = [expression_score(core, "block_mean", s) for s in stats]
        sign = -1 if genome == negated else 1
        assert sorted(range(3), key=lambda i: scores[i]) == sorted(range(3), key=lambda i: sign * cores[i])
    _, core = outer_operations(block_expression(plus_one))
    assert core == sympy.Function("mean", real=True)(sympy.Abs(SYMBOLS["F3"]))


def test_expressions_cross_processes_only_through_the_whitelist():
    expr = block_expression(PUBLISHED)
    assert sympy_worker.from_data(sympy_worker.to_data(expr)) == expr
    for bad in (["Symbol", "x"], ["Function", "system", ["Integer", "1"]], ["Integral", ["Integer", "1"]],
                ["Float", "__import__('os')"], "W_qkv", []):
        with pytest.raises(sympy_worker.Unsupported):
            sympy_worker.from_data(bad)
    with pytest.raises(sympy_worker.Unsupported):
        sympy_worker.to_data(sympy.Integral(SYMBOLS["F1"]))


def test_issue6_genomes_have_formulas():
    """Aggregations beyond the mean and architecture terminals render and score like the engine."""
    formula = readable_formula("block_sum(element_wise_sum(A_log_params, to_mean_scalar(F1g)))", simplify=False)
    assert formula.text.startswith("sum_l (") and "A_log_params" in formula.text
    tree_std = "block_std(to_mean_scalar(element_wise_abs(F1)))"
    assert "block_std" in readable_formula(tree_std, simplify=False).text


# sigmoid(x) + sigmoid(-x) = 1 again, around a sum with an architecture terminal: mean(A_log_params + G_qkv)
SIMPLIFIABLE_ARCH = ("block_sum(to_mean_scalar(element_wise_product(element_wise_sum(sigmoid(F1), "
                     "sigmoid(element_wise_revert(F1))), element_wise_sum(F1g, A_log_params))))")


@pytest.fixture(scope="module")
def arch_stats(stats, af_small):
    """The same statistics, each with its architecture's terminal values (as the engine computes them)."""
    from autoprox.reports.formula_check import CheckStatistics
    from autoprox.spaces.descriptors import terminal_values

    return [CheckStatistics(s, terminal_values(af_small.archs[i])) for s, i in zip(stats, (0, 5, 9))]


def test_formulas_with_architecture_terminals_are_checked_numerically(arch_stats, af_small):
    from autoprox.spaces.descriptors import terminal_values

    mean = sympy.Function("mean", real=True)
    (formula,) = readable_formulas([SIMPLIFIABLE_ARCH], check_stats=arch_stats)
    assert formula.status == "simplified", formula.note
    assert formula.shown in (mean(SYMBOLS["A_log_params"] + SYMBOLS["F1g"]),
                             SYMBOLS["A_log_params"] + mean(SYMBOLS["F1g"]))
    assert "checked on 3 architecture(s)" in formula.note
    # the formula scores as the engine does, with the descriptors substituted
    for genome in (SIMPLIFIABLE_ARCH, "block_wmean(element_wise_product(A_depth, frobenius_norm(F2g)))",
                   "block_std(element_wise_sum(A_log_macs, l1_norm(element_wise_product(A_width, F3))))"):
        tree = parse_genome(genome)
        for s, i in zip(arch_stats, (0, 5, 9)):
            with torch_threads(1):
                expected = _score_architecture(tree, s, terminal_values(af_small.archs[i]))
            got = expression_score(block_expression(tree), genome.split("(")[0], s, dtype=torch.float32)
            assert got == pytest.approx(expected, rel=1e-4), genome
    # a wrong simplification is caught through the terminal too
    original = block_expression(SIMPLIFIABLE_ARCH)
    wrong = 2 * SYMBOLS["A_log_params"] + mean(SYMBOLS["F1g"])
    agrees, how = check_equivalent(original, wrong, "block_sum", arch_stats)
    assert agrees is False and "gives" in how
    # without the architectures' values nothing can be checked, and it says why
    agrees, how = check_equivalent(original, formula.shown, "block_sum", [list(s) for s in arch_stats])
    assert agrees is None and "A_log_params" in how


def test_statistics_for_check_carry_the_architectures_terminal_values():
    from autoprox.reports.formula_check import CheckStatistics, statistics_for_check

    (found,) = statistics_for_check(None, "pit", count=1)
    assert isinstance(found, CheckStatistics) and isinstance(found, list) and isinstance(found[0], dict)
    from autoprox.reports.formula_check import SCALAR_SYMBOL_NAMES

    assert set(found.terminals) == set(SCALAR_SYMBOL_NAMES)
    assert found.terminals["A_depth"] == len(found)
