"""Selection rules: which proxy of a finished search the protocol scores."""

from __future__ import annotations

import numpy as np
import pytest

from autoprox.apps.protocol import run_protocol
from autoprox.apps.selection import (
    SELECTIONS,
    inner_fold_jcms,
    lower_bound,
    select_cv_lower_bound,
)
from autoprox.core.errors import ConfigError
from autoprox.genome.tree import parse_genome
from autoprox.proxies.proxy import Proxy
from autoprox.search.context import RunContext
from autoprox.search.engine import run_search
from autoprox.search.evolution import EvolutionConfig
from autoprox.search.halloffame import load_hall_of_fame
from autoprox.search.settings import SearchSettings

TARGETS = ("c100_kd", "flower_kd")


@pytest.fixture(scope="module")
def run_dir(af_small_file, session_cache, tmp_path_factory):
    out = tmp_path_factory.mktemp("selection") / "run"
    settings = SearchSettings(bench=str(af_small_file), targets=TARGETS, batch_size=2, cache_dir=str(session_cache.root),
                              workers=1, search_fraction=0.75,
                              evolution=EvolutionConfig(population_size=6, iterations=4, retry_cap=3, seed=1))
    run_search(settings, out, quiet=True)
    return out


def test_lower_bound():
    assert lower_bound([0.5, 0.5, 0.5]) == pytest.approx(0.5)
    assert lower_bound([0.2, 0.6]) == pytest.approx(0.4 - np.std([0.2, 0.6], ddof=1))
    assert lower_bound([0.3, float("nan")]) == float("-inf")


def test_cv_lcb_picks_the_hall_of_fame_entry_with_the_best_lower_bound(run_dir):
    context = RunContext.open(run_dir)
    entries = load_hall_of_fame(run_dir).hall.entries[:10]
    assert len(entries) >= 2
    bounds = {e.genome: lower_bound(inner_fold_jcms(Proxy(e.genome, parse_genome(e.genome)), context))
              for e in entries}
    chosen = select_cv_lower_bound(run_dir)
    assert bounds[chosen.name] == max(bounds.values())


def test_protocol_takes_a_selection_by_name(af_small_file, session_cache, tmp_path):
    settings = SearchSettings(bench=str(af_small_file), targets=TARGETS, batch_size=2, cache_dir=str(session_cache.root),
                              workers=1, evolution=EvolutionConfig(population_size=4, iterations=2, retry_cap=3, seed=5))
    result = run_protocol(settings, tmp_path / "p", folds=2, selection="cv-lcb", bootstrap=50, quiet=True)
    assert result["finished"] and {"best", "cv-lcb"} <= set(SELECTIONS)
    for fold in result["folds"]:
        hall = load_hall_of_fame(tmp_path / "p" / fold["run"]).hall
        assert fold["result"]["proxy"] in [e.genome for e in hall.entries[:10]]
    with pytest.raises(ConfigError, match="unknown selection"):
        run_protocol(settings, tmp_path / "q", folds=2, selection="vote", quiet=True)
