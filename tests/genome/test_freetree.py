"""Free-form typed trees: ramped half-and-half generation, the variation operators,
the static limits, the excluded scalar forms, the token round trip, and evaluation
on real (small) statistics."""

from __future__ import annotations

import json
import math
import random
from collections import Counter

import pytest
from deap import gp

from autoprox.data.cache import StatsRequest
from autoprox.genome.free import (
    DEFAULT_LIMITS,
    EXCLUDED_FORMS,
    FreeTreeLimits,
    check_tree,
    cx_one_point,
    free_set,
    mut_insert,
    mut_node_replacement,
    mut_shrink,
    mut_subtree,
    random_tree,
    vary,
    within_limits,
)
from autoprox.genome.tree import (
    ARCH_TERMINALS,
    InvalidProxy,
    Matrix,
    Scalar,
    canonical_string,
    genome_to_string,
    parse_genome,
    primitive_set,
    score_architecture,
    uses_arch_terminals,
)
from autoprox.core.errors import GenomeError
from autoprox.genome.space import AGGREGATIONS, GenomeSpace
from autoprox.networks.runtime import SPREAD_NAMES
from autoprox.proxies.zoo_scores import ZOO_TERMINALS
from autoprox.spaces.descriptors import terminal_values
from tests.commands import run_cli, small_search_argv

STATS_ONLY = GenomeSpace("free", AGGREGATIONS, arch_terminals=False)
WITH_ARCH = GenomeSpace("free", AGGREGATIONS, arch_terminals=True)
SPACES = pytest.mark.parametrize("space", [STATS_ONLY, WITH_ARCH], ids=["stats", "arch"])


def names(tree) -> list[str]:
    return [node.name for node in tree]


def signature(tree) -> list[tuple]:
    return [(node.arity, node.ret, tuple(getattr(node, "args", ()))) for node in tree]


def assert_good(tree, space, limits=DEFAULT_LIMITS) -> None:
    check_tree(tree, space, limits)
    assert within_limits(tree, limits)
    assert names(parse_genome(genome_to_string(tree))) == names(tree)
    assert not EXCLUDED_FORMS & set(names(tree))


def trees(space, count, seed=0):
    rng = random.Random(seed)
    return [random_tree(rng, space) for _ in range(count)]


# ------------------------------------------------------------------------ generation


@SPACES
def test_ramped_half_and_half_gives_valid_trees(space):
    made = trees(space, 600, seed=1)
    for tree in made:
        assert_good(tree, space)
        assert tree[0].name in space.aggregations
        assert tree[1].ret is Scalar
    depths = Counter(t.height for t in made)
    # every depth of the initial range appears (ramped), and no deeper tree
    assert set(range(DEFAULT_LIMITS.init_min_depth, DEFAULT_LIMITS.init_max_depth + 1)) <= set(depths)
    assert max(depths) <= DEFAULT_LIMITS.init_max_depth
    assert set(Counter(t[0].name for t in made)) == set(AGGREGATIONS)
    used_arch = any(uses_arch_terminals(t) for t in made)
    assert used_arch == space.arch_terminals
    # both statistics and matrix / scalar material appear
    all_names = {n for t in made for n in names(t)}
    assert set(all_names) & {"F1", "F4g"}
    assert any(node.ret is Matrix and isinstance(node, gp.Primitive) for t in made for node in t)


def test_space_restricts_aggregations_and_terminals():
    space = GenomeSpace("free", ("block_sum",), arch_terminals=False)
    for tree in trees(space, 200, seed=2):
        assert_good(tree, space)
        assert tree[0].name == "block_sum"
        assert not set(names(tree)) & set(ARCH_TERMINALS)
        with pytest.raises(GenomeError):
            check_tree(tree, GenomeSpace("free", ("block_mean",)))


def test_free_set_excludes_matrix_only_scalar_forms():
    pset = primitive_set()
    assert EXCLUDED_FORMS <= set(pset.mapping)
    # derived from the primitive table (Primitive.not_generated)
    assert EXCLUDED_FORMS == {"normalize.s", "min_max_normalize.s", "softmax.s", "logsoftmax.s", "to_std_scalar.s",
                              "matrix_multiplication.s", "matrix_multiplication.ms", "matrix_multiplication.sm"}
    for space in (STATS_ONLY, WITH_ARCH):
        allowed = free_set(space).names
        assert not allowed & EXCLUDED_FORMS
        # everything else of the primitive set is there (aggregations and inputs of the space)
        expected = {n for n in pset.mapping if n not in EXCLUDED_FORMS
                    and (n not in ARCH_TERMINALS or space.arch_terminals)
                    and (n not in SPREAD_NAMES or space.spread_terminals)
                    and (n not in ZOO_TERMINALS or "zoo" in space.terminals)}
        assert allowed == expected


@SPACES
def test_seeded_reproducibility(space):
    first = [genome_to_string(t) for t in trees(space, 50, seed=7)]
    assert first == [genome_to_string(t) for t in trees(space, 50, seed=7)]
    assert first != [genome_to_string(t) for t in trees(space, 50, seed=8)]
    rng_a, rng_b = random.Random(3), random.Random(3)
    parent_a, parent_b = random_tree(rng_a, space), random_tree(rng_b, space)
    partners = trees(space, 3, seed=4)
    for _ in range(100):
        parent_a = vary(parent_a, rng_a, space, partners)
        parent_b = vary(parent_b, rng_b, space, partners)
        assert names(parent_a) == names(parent_b)


def test_global_random_state_untouched():
    random.seed(12345)
    state = random.getstate()
    rng = random.Random(0)
    for space in (STATS_ONLY, WITH_ARCH):
        made = [random_tree(rng, space) for _ in range(100)]
        for tree in made:
            vary(tree, rng, space, made[:5])
            mut_subtree(tree, rng, space)
            mut_node_replacement(tree, rng, space)
            mut_insert(tree, rng, space)
            mut_shrink(tree, rng)
            cx_one_point(tree, made[0], rng)
    assert random.getstate() == state


def test_limits_are_configurable_and_checked():
    tight = FreeTreeLimits(max_depth=4, max_size=8, init_min_depth=2, init_max_depth=4)
    rng = random.Random(5)
    tree = random_tree(rng, STATS_ONLY, tight)
    for _ in range(300):
        assert_good(tree, STATS_ONLY, tight)
        tree = vary(tree, rng, STATS_ONLY, [random_tree(rng, STATS_ONLY, tight)], tight)
    big = parse_genome("block_mean(to_mean_scalar(" + "element_wise_abs(" * 8 + "F1" + ")" * 10)
    check_tree(big, STATS_ONLY)
    with pytest.raises(GenomeError, match="over the limits"):
        check_tree(big, STATS_ONLY, DEFAULT_LIMITS)
    with pytest.raises(ValueError):
        FreeTreeLimits(init_max_depth=9, max_depth=8)


def test_check_tree_rejects_bad_trees():
    pset = primitive_set()
    good = parse_genome("block_mean(to_mean_scalar(F1))")
    check_tree(good, STATS_ONLY)
    bad_types = gp.PrimitiveTree([pset.mapping["block_mean"], pset.mapping["sigmoid"], pset.mapping["F1"]])
    with pytest.raises(GenomeError, match="returns Matrix"):
        check_tree(bad_types, STATS_ONLY)
    with pytest.raises(GenomeError, match="missing"):
        check_tree(gp.PrimitiveTree([pset.mapping["block_mean"], pset.mapping["to_mean_scalar"]]), STATS_ONLY)
    with pytest.raises(GenomeError, match="past the end"):
        check_tree(gp.PrimitiveTree(list(good) + [pset.mapping["F2"]]), STATS_ONLY)
    with pytest.raises(GenomeError, match="not allowed"):
        check_tree(parse_genome("block_mean(A_params)"), STATS_ONLY)
    check_tree(parse_genome("block_mean(A_params)"), WITH_ARCH)
    excluded = parse_genome("block_mean(softmax(to_mean_scalar(F1)))")
    with pytest.raises(GenomeError, match="not allowed"):
        check_tree(excluded, STATS_ONLY)
    check_tree(excluded, STATS_ONLY, allow_excluded=True)
    with pytest.raises(GenomeError, match="root"):
        check_tree(gp.PrimitiveTree([pset.mapping["to_mean_scalar"], pset.mapping["F1"]]), STATS_ONLY)


# ------------------------------------------------------------------------- operators


def frozen(tree) -> tuple:
    return tuple(names(tree))


@SPACES
def test_subtree_mutation(space):
    rng = random.Random(11)
    for parent in trees(space, 300, seed=12):
        before = frozen(parent)
        child = mut_subtree(parent, rng, space)
        assert frozen(parent) == before
        check_tree(child, space)
        # the prefix before the mutation point is kept, and the root too
        assert child[0].name == parent[0].name
        prefix = next((i for i, (a, b) in enumerate(zip(parent, child)) if a.name != b.name), None)
        if prefix is not None:
            assert prefix >= 1


@SPACES
def test_node_replacement_keeps_the_shape(space):
    rng = random.Random(13)
    for parent in trees(space, 300, seed=14):
        before = frozen(parent)
        child = mut_node_replacement(parent, rng, space)
        assert frozen(parent) == before
        check_tree(child, space)
        assert signature(child) == signature(parent)
        assert sum(a.name != b.name for a, b in zip(parent, child)) == 1
        assert canonical_string(child) != canonical_string(parent)


def test_node_replacement_changes_the_aggregation():
    rng = random.Random(15)
    parent = parse_genome("block_mean(to_mean_scalar(F1))")
    roots = {mut_node_replacement(parent, rng, STATS_ONLY)[0].name for _ in range(200)}
    assert roots == set(AGGREGATIONS)  # the root is one of the nodes replaced
    single = GenomeSpace("free", ("block_mean",))
    assert {mut_node_replacement(parent, rng, single)[0].name for _ in range(50)} == {"block_mean"}


@SPACES
def test_insert_grows_the_tree(space):
    rng = random.Random(16)
    for parent in trees(space, 300, seed=17):
        before = frozen(parent)
        child = mut_insert(parent, rng, space)
        assert frozen(parent) == before
        if child is None:
            continue
        check_tree(child, space)
        assert len(child) > len(parent)
        assert child.height >= parent.height


@SPACES
def test_shrink_reduces_the_size(space):
    rng = random.Random(18)
    applied = 0
    for parent in trees(space, 300, seed=19):
        before = frozen(parent)
        child = mut_shrink(parent, rng)
        assert frozen(parent) == before
        if child is None:
            continue
        applied += 1
        check_tree(child, space)
        assert len(child) < len(parent)
        assert child.height <= parent.height
        # the kept material comes from the parent
        assert set(names(child)) <= set(names(parent))
    assert applied > 100
    assert mut_shrink(parse_genome("block_mean(to_mean_scalar(F1))"), rng) is None


def _slice(tree, index) -> slice:
    end, total = index + 1, tree[index].arity
    while total > 0:
        total += tree[end].arity - 1
        end += 1
    return slice(index, end)


def is_crossover_child(child, parent, partner) -> bool:
    """Whether child is parent with one subtree below its root replaced by one of the partner's."""
    names_child, names_parent, names_partner = frozen(child), frozen(parent), frozen(partner)
    for i in range(1, len(parent)):
        outer = _slice(parent, i)
        for j in range(1, len(partner)):
            taken = names_partner[_slice(partner, j)]
            if names_parent[:i] + taken + names_parent[outer.stop:] == names_child:
                return True
    return False


@SPACES
def test_crossover_takes_material_from_the_partner(space):
    rng = random.Random(20)
    parents, partners = trees(space, 300, seed=21), trees(space, 300, seed=22)
    for parent, partner in zip(parents, partners):
        before, before_partner = frozen(parent), frozen(partner)
        child = cx_one_point(parent, partner, rng)
        assert frozen(parent) == before and frozen(partner) == before_partner
        check_tree(child, space)
        assert child[0].name == parent[0].name
        assert is_crossover_child(child, parent, partner)


def test_crossover_inserts_a_partner_subtree():
    rng = random.Random(23)
    parent = parse_genome("block_mean(to_mean_scalar(element_wise_abs(F1)))")
    partner = parse_genome("block_sum(frobenius_norm(element_wise_sum(F2g, F3)))")
    children = {genome_to_string(cx_one_point(parent, partner, rng)) for _ in range(200)}
    assert "block_mean(frobenius_norm(element_wise_sum(F2g, F3)))" in children
    assert "block_mean(to_mean_scalar(element_wise_sum(F2g, F3)))" in children
    assert "block_mean(to_mean_scalar(element_wise_abs(F2g)))" in children
    assert all(c.startswith("block_mean(") for c in children)


# ----------------------------------------------------------------------------- vary


@SPACES
def test_vary_stays_typed_within_limits_and_new(space):
    rng = random.Random(30)
    population = trees(space, 20, seed=31)
    seen_forms = set()
    for step in range(2000):
        parent = population[step % len(population)]
        before = frozen(parent)
        child = vary(parent, rng, space, population[:5])
        assert frozen(parent) == before
        assert_good(child, space)
        assert canonical_string(child) != canonical_string(parent)
        seen_forms |= set(names(child))
        population[step % len(population)] = child
    assert not seen_forms & EXCLUDED_FORMS
    assert len(seen_forms & set(AGGREGATIONS)) >= 2


def test_vary_without_partners_and_on_the_smallest_tree():
    rng = random.Random(32)
    smallest = parse_genome("block_mean(to_mean_scalar(F1))")
    for _ in range(200):
        child = vary(smallest, rng, STATS_ONLY, [])
        assert_good(child, STATS_ONLY)
        assert canonical_string(child) != canonical_string(smallest)


def test_vary_falls_back_to_node_replacement_at_the_limits():
    tight = FreeTreeLimits(max_depth=2, max_size=3, init_min_depth=2, init_max_depth=2)
    parent = parse_genome("block_mean(to_mean_scalar(F1))")
    rng = random.Random(33)
    for _ in range(100):
        child = vary(parent, rng, STATS_ONLY, [parse_genome("block_sum(l1_norm(F2))")], tight)
        assert_good(child, STATS_ONLY, tight)
        assert signature(child) == signature(parent)


def test_vary_ignores_partners_outside_the_space():
    rng = random.Random(34)
    partner = parse_genome("block_mean(element_wise_sum(A_params, to_mean_scalar(F1)))")
    for parent in trees(STATS_ONLY, 200, seed=35):
        child = vary(parent, rng, STATS_ONLY, [partner])
        assert not uses_arch_terminals(child)


# ------------------------------------------------------------------------ evaluation


@pytest.fixture(scope="module")
def small_stats(session_cache, af_small, small_spec):
    arch = af_small.archs[0]
    stats = session_cache.get(StatsRequest(arch, small_spec, 0, 100))
    return stats[:3], terminal_values(arch)  # three blocks keep it fast on a busy machine


@SPACES
def test_random_free_trees_evaluate(space, small_stats):
    stats, terminals = small_stats
    finite = invalid = 0
    for tree in trees(space, 40, seed=40):
        try:
            value = score_architecture(tree, stats, terminals if space.arch_terminals else None)
        except InvalidProxy:
            invalid += 1
            continue
        assert math.isfinite(value)
        finite += 1
    assert finite >= 20, (finite, invalid)


@pytest.mark.slow
def test_a_free_tree_seeds_a_free_genome_search(capsys, tmp_path, af_small_file, session_cache):
    tree = "block_mean(to_mean_scalar(F1))"  # not the template's shape
    out = tmp_path / "free"
    code, _, err = run_cli(capsys, *small_search_argv(tmp_path, af_small_file, session_cache.root, "--iterations", "1",
                                                  "--genome", "free", "--seed-proxies", tree, "--quiet",
                                                  "--out", str(out)))
    assert code == 0, err
    config = json.loads((out / "config.json").read_text())
    assert config["settings"]["seed_proxies"] == [tree]
    first = json.loads((out / "evaluations.jsonl").read_text().splitlines()[0])
    assert first["genome"] == tree  # the seed was the first genome evaluated
    code, _, err = run_cli(capsys, *small_search_argv(tmp_path, af_small_file, session_cache.root, "--iterations", "1",
                                                  "--seed-proxies", tree, "--out", str(tmp_path / "template")))
    assert code == 2 and "does not have the template's shape" in err  # the template search still refuses it
