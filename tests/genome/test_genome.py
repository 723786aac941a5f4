"""Genomes: the typed primitive set, the token-string form, canonical forms, the
template and its mutation, and evaluation on real (small) statistics."""

from __future__ import annotations

import random

import pytest
import torch
from deap import gp

from autoprox.data.cache import StatsRequest
from autoprox.genome.tree import (
    ARCH_TERMINALS,
    InvalidProxy,
    Matrix,
    Scalar,
    Score,
    block_values,
    canonical_string,
    genome_to_string,
    kernel_map,
    parse_genome,
    primitive_set,
    score_architecture,
    tree_size,
)
from autoprox.genome.template import TemplateGenes, mutate_template, random_template, template_genes, template_tree
from autoprox.core.errors import GenomeError
from autoprox.genome.space import GENE_CHOICES
from autoprox.proxies.zoo_scores import ZOO_TERMINALS
from autoprox.networks.statistics import STAT_NAMES
from autoprox.networks.runtime import SPREAD_NAMES
from autoprox.primitives import BINARY, UNARY

PUBLISHED = (
    "block_mean(to_mean_scalar(element_wise_sum(frobenius_norm(min_max_normalize(F2)), "
    "element_wise_sqrt(sigmoid(F4g)))))"
)
NAN_GENOME = "block_mean(to_mean_scalar(element_wise_log(element_wise_revert(element_wise_abs(F1)))))"
# F1 is 3D x D, F3 is h x D: their inner dimensions (D and h) differ.
MATMUL_MISMATCH = "block_mean(to_mean_scalar(matrix_multiplication(F1, F3)))"

HAND_WRITTEN = [
    PUBLISHED,
    "block_mean(to_mean_scalar(F1))",
    "block_mean(frobenius_norm(F3g))",
    "block_mean(sigmoid(frobenius_norm(F1)))",
    "block_mean(to_mean_scalar(matrix_multiplication(F1, F2)))",
    "block_mean(element_wise_sum(to_mean_scalar(F1), l1_norm(F4)))",
    "block_mean(to_std_scalar(element_wise_product(to_mean_scalar(F1), F2g)))",
    "block_mean(to_mean_scalar(element_wise_difference(F4, to_std_scalar(F4g))))",
    "block_mean(element_wise_log(element_wise_abs(element_wise_normalized_sum(softmax(F3)))))",
    NAN_GENOME,
    MATMUL_MISMATCH,
]


def names(tree) -> list[str]:
    return [node.name for node in tree]


# ------------------------------------------------------------------ primitive set


def test_primitive_set_has_the_statistics_and_every_form_of_every_op():
    pset, kernels = primitive_set(), kernel_map()
    # the eight statistics and the spread ones (drawn only in spaces with spread_terminals)
    assert sorted(t.name for t in pset.terminals[Matrix]) == sorted(STAT_NAMES + SPREAD_NAMES)
    assert len(STAT_NAMES) == 8
    assert len(UNARY) == 24 and len(BINARY) == 4
    for name, prim in UNARY.items():
        matrix_form, scalar_form = pset.mapping[name], pset.mapping[name + ".s"]
        assert matrix_form.args == [Matrix]
        assert matrix_form.ret is (Scalar if prim.output_kind == "scalar" else Matrix)
        assert scalar_form.args == [Scalar] and scalar_form.ret is Scalar
        assert kernels[name] is prim.function and kernels[name + ".s"] is prim.function
    for name, prim in BINARY.items():
        expected = {
            name: ([Matrix, Matrix], Matrix),
            name + ".s": ([Scalar, Scalar], Scalar),
            name + ".ms": ([Matrix, Scalar], Matrix),
            name + ".sm": ([Scalar, Matrix], Matrix),
        }
        for typed, (args, ret) in expected.items():
            assert pset.mapping[typed].args == args and pset.mapping[typed].ret is ret, typed
            assert kernels[typed] is prim.function
    assert [p.name for p in pset.primitives[Score]] == ["block_mean", "block_sum", "block_wmean", "block_std"]
    assert sorted(t.name for t in pset.terminals[Scalar]) == sorted((*ARCH_TERMINALS, *ZOO_TERMINALS))
    # 24 unary x 2 forms + 4 binary x 4 forms + the four aggregations, nothing else
    assert sum(len(v) for v in pset.primitives.values()) == 24 * 2 + 4 * 4 + 4
    assert primitive_set() is pset  # built once


# -------------------------------------------------------------------- text form


@pytest.mark.parametrize("seed", range(0, 300, 3))
def test_random_templates_round_trip(seed):
    tree = random_template(random.Random(seed))
    text = genome_to_string(tree)
    again = parse_genome(text)
    assert genome_to_string(again) == text
    assert names(again) == names(tree)
    # the canonical form is itself a genome, and canonicalising it changes nothing
    canonical = canonical_string(tree)
    assert canonical_string(parse_genome(canonical)) == canonical


@pytest.mark.parametrize("text", HAND_WRITTEN)
def test_hand_written_strings_round_trip(text):
    assert genome_to_string(parse_genome(text)) == text
    spaced = "  " + text.replace("(", " ( ").replace(",", " ,\n\t").replace(")", " ) ") + "\n"
    assert genome_to_string(parse_genome(spaced)) == text


def test_typed_forms_are_inferred_from_arguments():
    assert names(parse_genome("sigmoid(frobenius_norm(F1))")) == ["block_mean", "sigmoid.s", "frobenius_norm", "F1"]
    assert names(parse_genome("to_mean_scalar(sigmoid(F1))")) == ["block_mean", "to_mean_scalar", "sigmoid", "F1"]
    published = names(parse_genome(PUBLISHED))
    assert published == [
        "block_mean", "to_mean_scalar", "element_wise_sum.sm", "frobenius_norm", "min_max_normalize", "F2",
        "element_wise_sqrt", "sigmoid", "F4g",
    ]
    cases = {
        "to_mean_scalar(element_wise_sum(F1, F1g))": "element_wise_sum",
        "element_wise_sum(to_mean_scalar(F1), l1_norm(F2))": "element_wise_sum.s",
        "to_mean_scalar(element_wise_product(F1, to_mean_scalar(F2)))": "element_wise_product.ms",
        "to_mean_scalar(element_wise_difference(to_mean_scalar(F2), F1))": "element_wise_difference.sm",
        "matrix_multiplication(to_mean_scalar(F1), l1_norm(F2))": "matrix_multiplication.s",
    }
    for text, typed in cases.items():
        tree = parse_genome(text)
        assert typed in names(tree), text
        assert all(isinstance(n, gp.Primitive) or n.name in STAT_NAMES for n in tree)


def test_explicit_typed_names_must_fit_their_arguments():
    # the written typed form is accepted where it is the one the arguments imply...
    tree = parse_genome("block_mean(sigmoid.s(frobenius_norm(F1)))")
    assert names(tree) == ["block_mean", "sigmoid.s", "frobenius_norm", "F1"]
    assert genome_to_string(tree) == "block_mean(sigmoid(frobenius_norm(F1)))"
    # ...and refused where it is not, or where no such form exists
    with pytest.raises(GenomeError, match=r"sigmoid\.s does not fit"):
        parse_genome("to_mean_scalar(sigmoid.s(F1))")
    with pytest.raises(GenomeError, match=r"unknown token 'sigmoid\.bogus'"):
        parse_genome("sigmoid.bogus(to_mean_scalar(F1))")
    with pytest.raises(GenomeError, match=r"unknown token 'block_mean\.s'"):
        parse_genome("block_mean.s(to_mean_scalar(F1))")


def test_a_bare_per_block_expression_is_wrapped_in_block_mean():
    tree = parse_genome("to_mean_scalar(F1)")
    assert tree[0].name == "block_mean" and tree[0].ret is Score
    assert genome_to_string(tree) == "block_mean(to_mean_scalar(F1))"
    assert tree_size(tree) == 3
    assert names(parse_genome("block_mean(to_mean_scalar(F1))")) == names(tree)


@pytest.mark.parametrize(
    "text, message",
    [
        ("block_mean(to_mean_scalar(F9))", r"unknown token 'F9'"),
        ("foo(F1)", r"unknown token 'foo'"),
        ("to_mean_scalar(F1.real)", r"unknown token 'F1\.real'"),
        ("block_mean(to_mean_scalar(element_wise_sum(F1)))", r"element_wise_sum takes 2 argument\(s\), got 1"),
        ("to_mean_scalar(sigmoid(F1, F2))", r"sigmoid takes 1 argument\(s\), got 2"),
        ("to_mean_scalar()", r"unexpected '\)'"),
        ("block_mean(to_mean_scalar(F1)", r"missing '\)'"),
        ("to_mean_scalar F1", r"needs its arguments in parentheses"),
        ("block_mean(to_mean_scalar(F1", r"missing '\)'|ends too early"),
        ("block_mean(to_mean_scalar(F1)) F2", r"unexpected 'F2' after the end"),
        ("block_mean(to_mean_scalar(F1)))", r"unexpected '\)' after the end"),
        ("sigmoid(F1)", r"reduce each block to a scalar"),
        ("F1", r"reduce each block to a scalar"),
        ("block_mean(F1)", r"block_mean cannot take \(Matrix\)"),
        ("block_mean(block_mean(to_mean_scalar(F1)))", r"block_mean cannot take \(Score\)"),
        ("", r"empty genome"),
        ("   \n", r"empty genome"),
        ("to_mean_scalar(F1); to_mean_scalar(F2)", r"unexpected character ';'"),
        ('__import__("os")', r"unexpected character '\"'"),
        ("__import__(F1)", r"unknown token '__import__'"),
        ("to_mean_scalar(F1).__class__", r"unexpected character '\.'"),
        ("to_mean_scalar(F1 + F2)", r"unexpected character '\+'"),
        ("to_mean_scalar(element_wise_sum(F1 F2))", r"expected ',' or '\)'"),
        ("to_mean_scalar(1.5)", r"unexpected character '1'"),
    ],
)
def test_bad_strings_raise_genome_error_naming_the_problem(text, message):
    with pytest.raises(GenomeError, match=message):
        parse_genome(text)


def test_strings_are_never_evaluated(monkeypatch):
    import builtins

    def refuse(*args, **kwargs):
        raise AssertionError("a genome string reached eval/exec")

    monkeypatch.setattr(builtins, "eval", refuse)
    monkeypatch.setattr(builtins, "exec", refuse)
    for text in ['__import__("os").system("true")', "exec(F1)", "eval(F1)", "to_mean_scalar(F1);import os"]:
        with pytest.raises(GenomeError):
            parse_genome(text)
    assert genome_to_string(parse_genome(PUBLISHED)) == PUBLISHED  # parsing itself needs neither


def test_deep_nesting_and_non_strings_are_genome_errors():
    deep = "sigmoid(" * 5000 + "to_mean_scalar(F1)" + ")" * 5000
    with pytest.raises(GenomeError, match="nested deeper"):
        parse_genome(deep)
    moderate = "sigmoid(" * 40 + "to_mean_scalar(F1)" + ")" * 40
    assert tree_size(parse_genome(moderate)) == 43
    with pytest.raises(GenomeError, match="must be a string"):
        parse_genome(None)
    with pytest.raises(GenomeError, match="must be a string"):
        parse_genome(b"to_mean_scalar(F1)")


# ---------------------------------------------------------------- canonical form


def test_canonical_form_sorts_commutative_operands_only():
    a, b = "sigmoid(F1)", "element_wise_abs(F2)"

    def genome(op, x, y):
        return parse_genome(f"block_mean(to_mean_scalar({op}({x}, {y})))")

    for op in ("element_wise_sum", "element_wise_product"):
        assert canonical_string(genome(op, a, b)) == canonical_string(genome(op, b, a))
        assert genome_to_string(genome(op, a, b)) != genome_to_string(genome(op, b, a))
    for op in ("element_wise_difference", "matrix_multiplication"):
        assert canonical_string(genome(op, a, b)) != canonical_string(genome(op, b, a))
    # a scalar and a matrix swap typed forms (.sm <-> .ms) and still canonicalise equally
    mixed = parse_genome("to_mean_scalar(element_wise_sum(to_mean_scalar(F1), F2))")
    swapped = parse_genome("to_mean_scalar(element_wise_sum(F2, to_mean_scalar(F1)))")
    assert "element_wise_sum.sm" in names(mixed) and "element_wise_sum.ms" in names(swapped)
    assert canonical_string(mixed) == canonical_string(swapped)


def test_canonical_form_drops_no_op():
    plain = parse_genome("block_mean(to_mean_scalar(element_wise_sum(F1, F2)))")
    padded = parse_genome("block_mean(no_op.s(to_mean_scalar(no_op(element_wise_sum(no_op(no_op(F2)), F1)))))")
    assert canonical_string(padded) == canonical_string(plain) == "block_mean(to_mean_scalar(element_wise_sum(F1, F2)))"
    assert "no_op" in genome_to_string(padded)  # the plain string keeps what was written


# -------------------------------------------------------------------- template


def test_template_genes_read_back():
    rng = random.Random(7)
    for _ in range(50):
        genes = TemplateGenes(**{name: rng.choice(choices) for name, choices in GENE_CHOICES.items()})
        tree = template_tree(genes)
        assert template_genes(tree) == genes
        assert tree_size(tree) == 9
        assert template_genes(parse_genome(genome_to_string(tree))) == genes
    published = template_genes(parse_genome(PUBLISHED))
    assert published == TemplateGenes("F2", "min_max_normalize", "frobenius_norm", "F4g", "sigmoid",
                                      "element_wise_sqrt", "element_wise_sum")


@pytest.mark.parametrize(
    "text",
    [
        "block_mean(to_mean_scalar(F1))",
        "block_mean(to_mean_scalar(element_wise_sum(sigmoid(element_wise_abs(F1)), element_wise_sum(F2, F3))))",
        "block_mean(to_std_scalar(element_wise_sum(sigmoid(element_wise_abs(F1)), sigmoid(element_wise_abs(F2)))))",
        "block_mean(to_mean_scalar(element_wise_sum(sigmoid(F1), sigmoid(element_wise_abs(F2)))))",
    ],
)
def test_non_template_trees_are_refused(text):
    with pytest.raises(GenomeError, match="not a template genome"):
        template_genes(parse_genome(text))
    with pytest.raises(GenomeError, match="not a template genome"):
        mutate_template(parse_genome(text), random.Random(0))


def changed_genes(parent, child) -> int:
    a, b = template_genes(parent), template_genes(child)
    return sum(getattr(a, name) != getattr(b, name) for name in GENE_CHOICES)


def test_mutation_is_seeded_and_always_changes_a_gene():
    parent = parse_genome(PUBLISHED)
    for seed in range(100):
        child = mutate_template(parent, random.Random(seed))
        assert genome_to_string(mutate_template(parent, random.Random(seed))) == genome_to_string(child)
        assert changed_genes(parent, child) >= 1
        assert template_genes(child).aggregation == "block_mean"
    children = {genome_to_string(mutate_template(parent, random.Random(s))) for s in range(100)}
    assert len(children) > 90  # different seeds, different children
    assert genome_to_string(parent) == PUBLISHED  # the parent is left alone


def test_mutation_probability_controls_how_many_genes_change():
    rng = random.Random(1)
    parent = random_template(rng)
    draws = 300
    # probability 1: every gene redrawn; it keeps its value only by drawing it again
    # (1/8 for the inputs, 1/24 for the unary ops, 1/4 for the binary op): ~6.4 of 7 change
    full = [changed_genes(parent, mutate_template(parent, rng, 1.0)) for _ in range(draws)]
    assert sum(full) / draws > 6.0
    # tiny probability: a change is rare, so a child almost always differs in one gene
    tiny = [changed_genes(parent, mutate_template(parent, rng, 1e-3)) for _ in range(draws)]
    assert min(tiny) == 1
    assert tiny.count(1) >= 0.97 * draws
    # the paper's 0.5 lies between the two
    half = [changed_genes(parent, mutate_template(parent, rng, 0.5)) for _ in range(draws)]
    assert 2.5 < sum(half) / draws < 4.5


def test_mutation_ends_for_a_vanishing_probability_and_refuses_a_bad_one():
    parent = parse_genome(PUBLISHED)
    rng = random.Random(3)
    for _ in range(5):
        assert changed_genes(parent, mutate_template(parent, rng, 1e-12)) == 1
    for bad in (0.0, -0.5, 1.5, float("nan")):
        with pytest.raises(ValueError, match="gene probability"):
            mutate_template(parent, rng, bad)



def test_the_tree_kinds_are_the_registered_ones_a_kind_registered_later_included():
    """TREE_KINDS is the registry's names read live, not a hand-kept list beside it: a kind registered after
    import is accepted by GenomeSpace, offered by --genome and asked which seeds it takes, and refused again once
    it is gone."""
    from autoprox.genome.space import GENOME_KINDS, TREE_KINDS, GenomeSpace
    from autoprox.genome.template import PAPER_SPACE, TemplateSpace
    from autoprox.core.errors import ProxyError
    from autoprox.search.options import OPTIONS, seed_genomes

    assert tuple(TREE_KINDS) == ("template", "free") and PAPER_SPACE.kind == "template"
    with pytest.raises(GenomeError, match="unknown genome kind 'grown'; use template or free"):
        GenomeSpace("grown")
    class Grown(TemplateSpace):
        @staticmethod
        def check_seed(tree):
            raise GenomeError("a grown search starts from nothing")

    GENOME_KINDS.add("grown", Grown)
    try:
        assert GenomeSpace("grown").kind == "grown" and "grown" in OPTIONS["genome"].choices
        assert seed_genomes(["autoprox_a"], kind="template") == seed_genomes(["autoprox_a"], kind="free")
        with pytest.raises(ProxyError, match="autoprox_a cannot seed the search: a grown search starts from nothing"):
            seed_genomes(["autoprox_a"], kind="grown")  # the seed check asks the kind, as the search does
    finally:
        GENOME_KINDS.unregister("grown")
    assert "grown" not in TREE_KINDS and "grown" not in OPTIONS["genome"].choices


def test_each_tree_kind_is_searched_by_its_module_s_operators_bound_to_the_evolution_s_settings():
    """GenomeSpace.bound gives what the evolution draws, varies and parses genomes with, whatever the kind: the
    template's draw and mutation with the evolution's gene_probability (no partners), the free trees' draw and
    variation with the population's partners, each draw for draw what the module's functions give."""
    from autoprox.genome.free import random_tree, vary
    from autoprox.genome.space import GENOME_KINDS, TREE_KINDS, GenomeSpace
    from autoprox.search.evolution import EvolutionConfig

    assert tuple(GENOME_KINDS) == TREE_KINDS
    config = EvolutionConfig(gene_probability=0.2)
    space = GenomeSpace(aggregations=("block_mean", "block_sum"))
    template = space.bound(config)
    assert template.gene_probability == 0.2 and not template.uses_partners and template.bound(EvolutionConfig(
        gene_probability=0.9)).gene_probability == 0.9
    parent = template.random_genome(random.Random(1))
    assert genome_to_string(parent) == genome_to_string(random_template(random.Random(1), space))
    children = [genome_to_string(template.vary(parent, random.Random(seed), [parent])) for seed in range(20)]
    assert children == [genome_to_string(mutate_template(parent, random.Random(seed), 0.2, space))
                        for seed in range(20)]
    assert children != [genome_to_string(mutate_template(parent, random.Random(seed), 0.5, space))
                        for seed in range(20)]
    free_space = GenomeSpace("free")
    free = free_space.bound(config)
    assert free.uses_partners and free.bound(config) is free
    trees = [free.random_genome(random.Random(seed)) for seed in range(2)]
    assert [genome_to_string(t) for t in trees] == [genome_to_string(random_tree(random.Random(s), free_space))
                                                    for s in range(2)]
    assert [genome_to_string(free.vary(trees[0], random.Random(s), trees[1:])) for s in range(20)] == \
        [genome_to_string(vary(trees[0], random.Random(s), free_space, trees[1:])) for s in range(20)]
    assert genome_to_string(free.parse(PUBLISHED)) == PUBLISHED == genome_to_string(template.parse(PUBLISHED))
    assert template.contains(parse_genome(PUBLISHED)) and free.contains(parse_genome(PUBLISHED))
    outside = parse_genome("block_mean(no_op(A_depth))")  # an architecture terminal neither space reads
    assert not template.contains(outside) and not free.contains(outside)
    from autoprox.genome.tree import TreeGenomes

    # the two kinds of trees parse and contain alike, by one definition
    assert type(free).parse is type(template).parse is TreeGenomes.parse
    assert type(free).contains is type(template).contains is TreeGenomes.contains


# ------------------------------------------------------------------- evaluation


@pytest.fixture(scope="module")
def arch_stats(session_cache, small_spec, af_small):
    return session_cache.get(StatsRequest(af_small.archs[0], small_spec, 0, 100))


@pytest.fixture(scope="module")
def other_stats(session_cache, small_spec, af_small):
    return session_cache.get(StatsRequest(af_small.archs[1], small_spec, 0, 100))


def test_score_of_a_simple_genome_equals_a_hand_computation(arch_stats):
    tree = parse_genome("block_mean(to_mean_scalar(element_wise_abs(no_op(F1))))")
    expected = sum(float(block["F1"].abs().mean()) for block in arch_stats) / len(arch_stats)
    assert score_architecture(tree, arch_stats) == pytest.approx(expected, rel=1e-6)
    values = block_values(tree, arch_stats)
    assert len(values) == len(arch_stats) > 1
    assert values == pytest.approx([float(b["F1"].abs().mean()) for b in arch_stats], rel=1e-6)


def test_score_of_the_published_proxy_equals_a_hand_computation(arch_stats, other_stats):
    tree = parse_genome(PUBLISHED)
    for stats in (arch_stats, other_stats):
        per_block = []
        for block in stats:
            f2 = block["F2"]
            minmax = (f2 - f2.min()) / (f2.max() - f2.min())
            per_block.append(float(torch.sqrt((minmax ** 2).sum()) + torch.sqrt(torch.sigmoid(block["F4g"])).mean()))
        assert score_architecture(tree, stats) == pytest.approx(sum(per_block) / len(per_block), rel=1e-5)
    assert score_architecture(tree, arch_stats) != score_architecture(tree, other_stats)


def test_free_form_genomes_evaluate_like_torch(arch_stats):
    matmul = parse_genome("to_mean_scalar(matrix_multiplication(F1, F2))")
    expected = sum(float((b["F1"] @ b["F2"]).mean()) for b in arch_stats) / len(arch_stats)
    assert score_architecture(matmul, arch_stats) == pytest.approx(expected, rel=1e-4, abs=1e-9)
    scalar_chain = parse_genome("element_wise_sum(l1_norm(F3g), sigmoid(frobenius_norm(F4)))")
    expected = sum(float(b["F3g"].abs().mean() + torch.sigmoid(torch.linalg.norm(b["F4"]))) for b in arch_stats)
    assert score_architecture(scalar_chain, arch_stats) == pytest.approx(expected / len(arch_stats), rel=1e-5)


def test_commuted_genomes_score_identically(arch_stats):
    a = parse_genome("to_mean_scalar(element_wise_product(sigmoid(F1g), element_wise_abs(F1)))")
    b = parse_genome("to_mean_scalar(element_wise_product(element_wise_abs(F1), sigmoid(F1g)))")
    assert canonical_string(a) == canonical_string(b)
    assert score_architecture(a, arch_stats) == score_architecture(b, arch_stats)


def test_nan_and_shape_mismatch_raise_invalid_proxy(arch_stats):
    with pytest.raises(InvalidProxy, match="NaN|inf"):
        score_architecture(parse_genome(NAN_GENOME), arch_stats)
    with pytest.raises(InvalidProxy, match="matrix_multiplication"):
        score_architecture(parse_genome(MATMUL_MISMATCH), arch_stats)
    with pytest.raises(InvalidProxy, match="shapes"):  # F1 (3D x D) and F2 (D x D)
        score_architecture(parse_genome("to_mean_scalar(element_wise_sum(F1, F2))"), arch_stats)
    with pytest.raises(InvalidProxy, match="NaN or inf"):  # 1 / 0
        score_architecture(parse_genome("element_wise_invert(to_std_scalar(to_mean_scalar(F1)))"), arch_stats)


def test_evaluation_never_modifies_the_statistics(arch_stats):
    before = [{name: tensor.clone() for name, tensor in block.items()} for block in arch_stats]
    rng = random.Random(11)
    trees = [random_template(rng) for _ in range(30)]
    trees += [parse_genome(t) for t in HAND_WRITTEN]
    outcomes = {"valid": 0, "invalid": 0}
    for tree in trees:
        try:
            score_architecture(tree, arch_stats)
            outcomes["valid"] += 1
        except InvalidProxy:
            outcomes["invalid"] += 1
    assert outcomes["valid"] > 0 and outcomes["invalid"] > 0
    for block, saved in zip(arch_stats, before):
        assert block.keys() == saved.keys()
        for name in STAT_NAMES:
            assert torch.equal(block[name], saved[name]), name
