"""--patience: a search ends after N iterations without a better best proxy, and resumes to the same end."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from autoprox.core.errors import ConfigError
from autoprox.search.engine import run_search
from autoprox.search.evolution import EvolutionConfig, stalled
from autoprox.search.settings import SearchSettings
from tests.commands import run_cli, small_search_argv

pytestmark = pytest.mark.slow

EVOLUTION = EvolutionConfig(population_size=5, iterations=60, retry_cap=3, top_k=2, seed=3, patience=3)


def test_stalled():
    assert not stalled([0.1, 0.2, 0.3], None)
    assert not stalled([0.1, 0.2, 0.2], 3)  # not enough iterations yet
    assert stalled([0.1, 0.2, 0.2, 0.2, 0.2], 3)
    assert not stalled([0.1, 0.2, 0.2, 0.2, 0.25], 3)
    with pytest.raises(ConfigError, match="patience"):
        EvolutionConfig(patience=0)


@pytest.fixture(scope="module")
def settings(af_small_file, session_cache):
    return SearchSettings(bench=str(af_small_file), targets=("c100_kd", "flower_kd"), batch_size=2,
                          cache_dir=str(session_cache.root), workers=1, search_fraction=0.75, evolution=EVOLUTION)


def _log(run) -> list[dict]:
    return [{k: v for k, v in json.loads(line).items() if k != "elapsed"} for line in (run / "log.jsonl").open()]


def test_a_stalled_search_stops_early_and_says_so(settings, tmp_path):
    report = run_search(settings, tmp_path / "run", quiet=True)
    log = _log(tmp_path / "run")
    assert report["finished"] is True and report["iteration"] == len(log) < EVOLUTION.iterations
    assert report["stopped_early"] == {"iteration": len(log), "patience": 3}
    best = [r["best_jcm"] for r in log]
    assert max(best[-3:]) <= best[-4] and stalled(best, 3) and not stalled(best[:-1], 3)
    # resumed from the middle, it stops at the same iteration with the same proxy
    run_search(settings, tmp_path / "resumed", quiet=True, stop_after=2)
    again = run_search(None, tmp_path / "resumed", resume=True, quiet=True)
    assert again["genome"] == report["genome"] and again["iteration"] == report["iteration"]
    assert _log(tmp_path / "resumed") == log


def test_without_patience_the_configuration_records_none(settings, tmp_path):
    plain = replace(settings, evolution=replace(EVOLUTION, patience=None, iterations=2))
    run_search(plain, tmp_path / "plain", quiet=True)
    recorded = json.loads((tmp_path / "plain" / "config.json").read_text())["settings"]["evolution"]
    assert "patience" not in recorded and recorded["iterations"] == 2


@pytest.mark.slow
def test_patience_says_why_the_search_stopped(capsys, tmp_path, af_small_file, session_cache):
    out = tmp_path / "patient"
    code, _, err = run_cli(capsys, *small_search_argv(tmp_path, af_small_file, session_cache.root, "--iterations", "60",
                                                  "--patience", "1", "--out", str(out)))
    assert code == 0
    best = json.loads((out / "best.json").read_text())
    stopped = best["stopped_early"]["iteration"]
    assert stopped < 60
    assert f"no better proxy in 1 iterations (--patience 1): stopped at iteration {stopped} of 60" in err
    code, shown, _ = run_cli(capsys, "show", str(out), "--top", "1", "--no-simplify")
    assert (f"iteration {stopped} of 60 (stopped early: no better proxy in 1 iterations (--patience))"
            in shown.splitlines()[0])
