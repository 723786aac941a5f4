"""The population's bound (``MAX_POPULATION``) held on the command line and in ProxySearch only, where the option
table converts it: ``run_search`` given an ``EvolutionConfig`` built by hand, a table search and a rank-formula
search took a typo's billion genomes and began drawing them one by one. The setting's own check bounds it now."""

from __future__ import annotations

import dataclasses

import pytest

from autoprox.core.errors import ConfigError
from autoprox.search.options import MAX_POPULATION


def test_every_path_that_builds_a_population_is_bounded_by_the_option(tmp_path, af_small_file):
    from autoprox.apps.rank_search import RankSearchSettings
    from autoprox.search.engine import run_search
    from autoprox.search.evolution import EvolutionConfig
    from autoprox.search.settings import SearchSettings
    from autoprox.search.table_search import TableSearchSettings

    too_many = f"^population: expected at most {MAX_POPULATION:,}, got {MAX_POPULATION + 1:,}$"
    assert EvolutionConfig(population_size=MAX_POPULATION).population_size == MAX_POPULATION
    with pytest.raises(ConfigError, match=too_many):
        EvolutionConfig(population_size=MAX_POPULATION + 1)
    with pytest.raises(ConfigError, match=too_many):
        dataclasses.replace(EvolutionConfig(), population_size=MAX_POPULATION + 1)
    with pytest.raises(ConfigError, match=r"^population: expected at least 2, got 1$"):
        EvolutionConfig(population_size=1)
    with pytest.raises(ConfigError, match=too_many):
        TableSearchSettings(population=MAX_POPULATION + 1)
    with pytest.raises(ConfigError, match=too_many):
        RankSearchSettings(population=MAX_POPULATION + 1).check()
    with pytest.raises(ConfigError, match=too_many):  # the settings run_search is given by hand: nothing written
        run_search(SearchSettings(bench=str(af_small_file), evolution=EvolutionConfig(
            population_size=MAX_POPULATION + 1)), tmp_path / "run", quiet=True)
    assert not (tmp_path / "run").exists()
