"""Zoo proxies' values as genome terminals (the ``zoo`` terminal set, ``--terminals stats,zoo``).

On the real PiT benchmark cut to its smallest architectures (batch 2): each terminal is its
zoo proxy's raw value on the statistics' network and batch, kept in the score cache; a genome
that reads one scores through ``rank`` as the search scored it; a search that reads them runs,
records its terminals and is refused where its values would not be of one network; a formula
reading them is shown but not exported as a standalone module.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest
from scipy.stats import kendalltau

from autoprox.core.errors import ConfigError, ExportError
from autoprox.genome.terminals import TERMINAL_SETS, TerminalSource, computed_sets, terminal_table
from autoprox.genome.tree import genome_computed_sets, parse_genome
from autoprox.genome.space import GenomeSpace
from autoprox.proxies.zoo_scores import ZOO_TERMINALS, raw_value
from autoprox.proxies.proxy import Proxy, resolve_proxy
from autoprox.reports.export import export_source
from autoprox.reports.simplify import readable_formula
from autoprox.reports.formula_check import statistics_for_check
from autoprox.search.context import RunContext
from autoprox.search.engine import run_search
from autoprox.search.evolution import EvolutionConfig
from autoprox.search.settings import SearchSettings
from autoprox.spaces.descriptors import terminal_values
from tests.conftest import benchmark_jsonl

#: A template genome that multiplies a statistic by SNIP's value, and one of the zoo alone.
WITH_SNIP = "block_mean(to_mean_scalar(element_wise_product(element_wise_abs(F1), Z_snip)))"
SNIP_ALONE = "block_mean(Z_snip)"


@pytest.fixture(scope="module")
def pit_tiny(pit_small):
    """The six smallest PiT architectures (zoo passes of a fraction of a second each)."""
    return pit_small.subset(list(range(6)))


@pytest.fixture(scope="module")
def pit_tiny_file(pit_tiny, tmp_path_factory):
    return benchmark_jsonl(pit_tiny, tmp_path_factory, "pit6.jsonl")


@pytest.fixture(scope="module")
def zoo_settings(pit_tiny_file, session_cache) -> SearchSettings:
    return SearchSettings(bench=str(pit_tiny_file), batch_size=2, cache_dir=str(session_cache.root),
                          search_fraction=1.0, genome=GenomeSpace(terminals=("stats", "zoo")).to_json(),
                          evolution=EvolutionConfig(population_size=4, iterations=2, retry_cap=3, top_k=2, seed=1),
                          seed_proxies=(WITH_SNIP,))


def test_the_zoo_sets_name_each_terminal_after_its_proxy_and_are_computed_from_networks():
    zoo, rest = TERMINAL_SETS["zoo"], TERMINAL_SETS["zoo_rest"]
    assert zoo.names == ("Z_snip", "Z_nwot", "Z_zico", "Z_log_synflow", "Z_grad_norm")  # what --terminals zoo draws
    assert rest.names == ("Z_grasp", "Z_fisher", "Z_plain", "Z_jacov", "Z_l2_norm", "Z_zen")
    assert (*zoo.names, *rest.names) == tuple(ZOO_TERMINALS)
    assert all(ts.computed and ts.values is None for ts in (zoo, rest))
    assert computed_sets(["stats", "arch"]) == () and computed_sets(["Z_nwot", "F1"]) == ("zoo",)
    assert computed_sets(["Z_grasp", "Z_snip"]) == ("zoo", "zoo_rest") and computed_sets(["zoo_rest"]) == ("zoo_rest",)
    assert genome_computed_sets(parse_genome(WITH_SNIP)) == ("zoo",)
    assert genome_computed_sets(parse_genome("element_wise_revert(Z_l2_norm)")) == ("zoo_rest",)
    assert genome_computed_sets(parse_genome("block_mean(to_mean_scalar(F1))")) == ()


def test_zoo_terminals_are_the_raw_values_of_the_statistics_network_and_are_cached(pit_tiny, small_spec, tmp_path):
    archs = pit_tiny.archs[:3]
    source = TerminalSource(small_spec, 0, 100, tmp_path)
    rows = terminal_table(archs, source, ("zoo",))
    for arch, row in zip(archs, rows):
        assert row["Z_snip"] == raw_value("snip", arch, small_spec, 0, 100)
        assert row["Z_log_synflow"] == math.log(raw_value("synflow", arch, small_spec, 0, 100))
        assert row["A_params"] == terminal_values(arch)["A_params"]  # the architecture's own come along
        assert set(row) == set(TERMINAL_SETS["zoo"].names) | set(terminal_values(arch))  # the zoo set's alone
    assert len(list((tmp_path / "zoo").rglob("*.json"))) == 3 * len(TERMINAL_SETS["zoo"].names)
    assert terminal_table(archs, source, ("zoo",)) == rows  # read back from the score cache
    other_seed = terminal_table(archs, replace(source, seed=1), ("zoo",))
    assert all(a["Z_snip"] != b["Z_snip"] for a, b in zip(rows, other_seed))  # one seed, one network
    with pytest.raises(ValueError, match="needs a TerminalSource"):
        terminal_table(archs, None, ("zoo",))
    rest = terminal_table(archs, replace(source, names=("Z_l2_norm",)), ("zoo_rest",))
    for arch, row in zip(archs, rest):  # a set computes only the terminals asked for, and those it holds
        assert row["Z_l2_norm"] == raw_value("l2_norm", arch, small_spec, 0, 100) and "Z_zen" not in row


def test_a_genome_of_snip_alone_ranks_exactly_as_the_zoo_proxy_snip(zoo_settings):
    context = RunContext.from_settings(zoo_settings)
    alone = context.score(Proxy(SNIP_ALONE, parse_genome(SNIP_ALONE)), "all")[100]
    snip = context.score(resolve_proxy("snip"), "all")[100]
    for target, accuracies in context.accuracies("all").items():
        assert kendalltau(alone, accuracies).statistic == pytest.approx(kendalltau(snip, accuracies).statistic,
                                                                         abs=1e-12)


def test_a_search_reading_zoo_terminals_scores_its_proxy_as_rank_does(zoo_settings, tmp_path):
    out = tmp_path / "run"
    report = run_search(zoo_settings, out, quiet=True)
    config = json.loads((out / "config.json").read_text())
    assert config["settings"]["genome"]["terminals"] == ["stats", "zoo"]
    records = [json.loads(line) for line in (out / "evaluations.jsonl").read_text().splitlines()]
    seeded = next(r for r in records if r["genome"] == WITH_SNIP)
    context = RunContext.from_settings(zoo_settings)
    scores = context.score(Proxy(WITH_SNIP, parse_genome(WITH_SNIP)), "search")[100]
    for target, accuracies in context.accuracies("search").items():
        assert seeded["kendall"][target] == pytest.approx(kendalltau(scores, accuracies).statistic, abs=1e-9)
    assert report["finished"]


def test_zoo_terminals_with_several_statistics_sets_are_refused(zoo_settings):
    context = RunContext.from_settings(replace(zoo_settings, stat_seeds=(0, 1)))
    with pytest.raises(ConfigError, match="one network per architecture"):
        context.scalar_terminals(context.archs("search"))


def test_a_formula_reading_a_zoo_terminal_is_shown_and_checked_but_not_exported(pit_tiny):
    formula = readable_formula(WITH_SNIP, check_stats=statistics_for_check(None, "pit", count=2))
    assert "Z_snip" in formula.text and formula.status in ("simplified", "original (not smaller)"), formula.note
    with pytest.raises(ExportError, match="zoo terminals"):
        export_source(WITH_SNIP, formula)


def test_a_genome_reading_one_zoo_terminal_runs_that_proxy_alone(pit_tiny, small_spec, tmp_path):
    from autoprox.data.cache import StatisticsCache
    from autoprox.proxies.scorers import scorer_for

    archs = pit_tiny.archs[:2]
    results = scorer_for(SNIP_ALONE, parse_genome(SNIP_ALONE)).raw_values(archs, small_spec, 0, 100,
                                                                          StatisticsCache(tmp_path))
    for result, arch in zip(results, archs):
        assert result.ok and result.raw == pytest.approx(raw_value("snip", arch, small_spec, 0, 100), rel=1e-6)
    cached = {json.loads(path.read_text())["proxy"] for path in (tmp_path / "zoo").rglob("*.json")}
    assert cached == {"snip"}  # not the other four zoo terminals' passes
