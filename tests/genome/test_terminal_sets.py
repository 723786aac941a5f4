"""Terminal sets (autoprox.genome.terminals): ``GenomeSpace(terminals=...)`` and ``--terminals``, the old
flags mapping to them, every committed config.json read and written back as it is, and a set registered
by one record taking part in genomes, spaces and scoring while default spaces stay unchanged."""

from __future__ import annotations

import json
import random

import pytest

from autoprox.core.errors import ConfigError, GenomeError
from autoprox.genome.free import free_set, random_tree
from autoprox.genome.terminals import (
    PAPER_TERMINALS,
    SCALAR,
    TERMINAL_SETS,
    TerminalSet,
    architecture_values,
    register_terminal_set,
)
from autoprox.genome.tree import ARCH_TERMINALS, genome_to_string, parse_genome, score_architecture
from autoprox.genome.template import mutate_template, random_template, template_genes
from autoprox.genome.space import GenomeSpace
from autoprox.networks.statistics import STAT_NAMES
from autoprox.networks.runtime import SPREAD_NAMES
from autoprox.search.options import genome_space_of, option_values
from autoprox.search.resume import resume_conflicts
from autoprox.search.settings import settings_from_options
from autoprox.spaces.descriptors import terminal_values
from tests.conftest import tracked_files


def test_the_registered_sets_are_the_paper_statistics_spread_architecture_scalars_and_the_zoo():
    assert list(TERMINAL_SETS) == ["stats", "spread", "arch", "zoo", "zoo_rest"]
    assert TERMINAL_SETS["zoo"].kind == SCALAR and TERMINAL_SETS["zoo"].computed
    assert not any(TERMINAL_SETS[name].computed for name in ("stats", "spread", "arch"))
    assert TERMINAL_SETS["stats"].names == tuple(STAT_NAMES) and PAPER_TERMINALS == ("stats",)
    assert TERMINAL_SETS["spread"].names == tuple(SPREAD_NAMES) and TERMINAL_SETS["spread"].extras == ("spread",)
    assert TERMINAL_SETS["arch"].names == ARCH_TERMINALS and TERMINAL_SETS["arch"].kind == SCALAR
    assert TERMINAL_SETS["stats"].extras == () and TERMINAL_SETS["arch"].extras == ()


@pytest.mark.parametrize("arch, spread", [(False, False), (True, False), (False, True), (True, True)])
def test_terminals_and_the_old_flags_give_one_space_with_the_old_inputs_in_the_old_order(arch, spread):
    sets = ["stats"] + (["spread"] if spread else []) + (["arch"] if arch else [])
    flagged = GenomeSpace(arch_terminals=arch, spread_terminals=spread)
    named = GenomeSpace(terminals=tuple(reversed(sets)))  # any order: kept in registration order
    assert flagged == named and named.terminals == tuple(sets)
    assert (named.arch_terminals, named.spread_terminals) == (arch, spread)
    # what the two booleans gave before terminal sets: the draws of a same-seed search depend on it
    assert named.inputs == tuple(STAT_NAMES) + (tuple(SPREAD_NAMES) if spread else ()) + (ARCH_TERMINALS if arch else ())
    assert named.extras == (("spread",) if spread else ())
    assert GenomeSpace.from_json(named.to_json()) == named and "terminals" not in named.to_json()
    rng_a, rng_b = random.Random(3), random.Random(3)
    assert [genome_to_string(random_template(rng_a, flagged)) for _ in range(20)] == \
           [genome_to_string(random_template(rng_b, named)) for _ in range(20)]


def test_every_committed_genome_record_reads_to_its_flags_and_writes_back_unchanged():
    configs = tracked_files("runs/**/config.json")
    assert len(configs) > 10
    seen = set()
    for path in configs:
        genome = json.loads(path.read_text())["settings"].get("genome")
        if not genome:
            continue
        space = GenomeSpace.from_json(genome)
        assert space.arch_terminals == genome["arch_terminals"]
        assert space.spread_terminals == genome.get("spread_terminals", False)
        assert space.to_json() == genome, path
        seen.add(space.terminals)
    assert ("stats",) in seen and ("stats", "arch") in seen


def test_the_command_line_terminals_option_and_the_flags_make_the_same_settings():
    by_flag = settings_from_options(option_values({"space": "pit", "arch_terminals": True, "spread_terminals": True}))
    by_name = settings_from_options(option_values({"space": "pit", "terminals": "arch,spread,stats"}))
    mixed = settings_from_options(option_values({"space": "pit", "terminals": ["spread", "stats"],
                                                 "arch_terminals": True}))
    assert by_flag == by_name == mixed
    assert by_flag.genome == {"kind": "template", "aggregations": ["block_mean"], "arch_terminals": True,
                              "spread_terminals": True}
    assert genome_space_of(option_values({"space": "pit"})) == GenomeSpace()
    with pytest.raises(ConfigError, match=r"^terminals: unknown terminal set 'zico'; known: stats, spread, arch, zoo, zoo_rest$"):
        option_values({"terminals": "stats,zico"})
    with pytest.raises(ConfigError, match="at least one set of per-block statistics"):
        option_values({"terminals": "arch"})
    with pytest.raises(GenomeError, match="sequence of terminal-set names"):
        GenomeSpace("free", ("block_mean",), True)


def test_a_resume_compares_terminals_and_flags_as_the_one_set_they_make():
    run = settings_from_options(option_values({"space": "pit", "arch_terminals": True}))
    assert resume_conflicts({"terminals": ("stats", "arch")}, run, "pit") == []
    assert resume_conflicts({"terminals": ("stats",), "arch_terminals": True}, run, "pit") == []
    assert resume_conflicts({"arch_terminals": True}, run, "pit") == []
    assert resume_conflicts({"terminals": ("stats",)}, run, "pit") == \
        ["--terminals stats (the run has --terminals stats,arch)"]
    assert resume_conflicts({"spread_terminals": True}, run, "pit") == \
        ["--spread-terminals (the run has --terminals stats,arch)"]


def test_a_genome_record_with_terminals_reads_back_and_refuses_a_contradiction():
    record = {"kind": "free", "aggregations": ["block_mean"], "arch_terminals": False, "spread_terminals": True,
              "terminals": ["spread"]}
    space = GenomeSpace.from_json(record)
    assert space.terminals == ("spread",) and space.to_json() == record
    with pytest.raises(GenomeError, match="flags"):
        GenomeSpace.from_json({**record, "arch_terminals": True})
    with pytest.raises(GenomeError, match="unknown terminal set"):
        GenomeSpace.from_json({**record, "terminals": ["nope"]})


@pytest.fixture
def blocks_set():
    """A further scalar set registered by one record (the number of blocks and its square root), removed after."""
    def values(arch, num_classes):
        depth = terminal_values(arch, num_classes)["A_depth"]
        return {"Z_blocks": depth, "Z_sqrt_blocks": depth ** 0.5}

    record = register_terminal_set(TerminalSet("blocks", ("Z_blocks", "Z_sqrt_blocks"), SCALAR,
                                               "the number of blocks and its square root", values))
    yield record
    TERMINAL_SETS.unregister("blocks")


def test_a_set_registered_by_one_record_takes_part_in_genomes_spaces_and_scores(blocks_set, af_small):
    genome = "block_mean(to_mean_scalar(element_wise_product(sigmoid(F1), element_wise_log(Z_blocks))))"
    tree = parse_genome(genome)
    assert genome_to_string(tree) == genome
    space = GenomeSpace(terminals=("blocks", "stats"))
    assert space.terminals == ("stats", "blocks") and space.contains(tree) and not GenomeSpace().contains(tree)
    assert space.to_json()["terminals"] == ["stats", "blocks"] and GenomeSpace.from_json(space.to_json()) == space
    drawn = {template_genes(random_template(random.Random(seed), space)).input_a for seed in range(100)}
    assert {"Z_blocks", "Z_sqrt_blocks"} <= drawn
    free = free_set(GenomeSpace("free", terminals=("stats", "blocks")))
    assert {"Z_blocks", "Z_sqrt_blocks"} <= {t.name for ts in free.terminals.values() for t in ts}
    rng = random.Random(0)
    assert all(space.contains(mutate_template(random_template(rng, space), rng, space=space)) for _ in range(20))
    assert all(GenomeSpace("free", terminals=("stats", "blocks")).contains(
        random_tree(rng, GenomeSpace("free", terminals=("stats", "blocks")))) for _ in range(20))
    # its values reach scoring beside the built-in scalars, and the paper's space never draws it
    arch = af_small.archs[0]
    values = architecture_values(arch)
    assert values["Z_blocks"] == terminal_values(arch)["A_depth"] and "A_params" in values
    import torch
    block = {name: torch.ones(4, 4) for name in STAT_NAMES}
    score = score_architecture(tree, [block, block], values)
    assert score == pytest.approx(torch.sigmoid(torch.tensor(1.0)).item() * torch.log(torch.tensor(values["Z_blocks"])).item())
    paper = {template_genes(random_template(random.Random(seed))).input_a for seed in range(100)}
    assert paper <= set(STAT_NAMES)
    with pytest.raises(ValueError, match="already registered"):
        register_terminal_set(TerminalSet("blocks", ("Z_other",), SCALAR, "again", blocks_set.values))
    with pytest.raises(ValueError, match="taken"):
        register_terminal_set(TerminalSet("other", ("F1",), SCALAR, "clash", blocks_set.values))
