"""Restarts after a stall, and a search on every architecture (no test part), on the real small benchmark."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from autoprox.cli.main import main
from autoprox.core.errors import ConfigError
from autoprox.search.engine import NO_TEST_PART, run_search
from autoprox.search.evolution import EvolutionConfig
from autoprox.search.settings import SearchSettings

pytestmark = pytest.mark.slow

EVOLUTION = EvolutionConfig(population_size=4, iterations=14, retry_cap=2, top_k=2, seed=5, patience=1, restarts=2)


@pytest.fixture(scope="module")
def settings(af_small_file, session_cache):
    return SearchSettings(bench=str(af_small_file), targets=("c100_kd", "flower_kd"), batch_size=2,
                          cache_dir=str(session_cache.root), workers=1, search_fraction=0.75, evolution=EVOLUTION)


def _rows(path) -> list[dict]:
    return [{k: v for k, v in json.loads(line).items() if k != "elapsed"} for line in path.open()]


def _run_files(run) -> tuple:
    best = json.loads((run / "best.json").read_text())
    best.pop("written"), best.pop("run")
    return (_rows(run / "log.jsonl"), _rows(run / "evaluations.jsonl"),
            json.loads((run / "hall_of_fame.json").read_text()), best)


@pytest.fixture(scope="module")
def restarted(settings, tmp_path_factory):
    out = tmp_path_factory.mktemp("restarts") / "run"
    return out, run_search(settings, out, quiet=True)


def test_a_stalled_population_restarts_and_the_best_of_all_counts(restarted, capsys):
    out, best = restarted
    log = _rows(out / "log.jsonl")
    restarts = [row for row in log if row.get("restart")]
    assert [row["restart"] for row in restarts] == [1, 2], "patience 1 stalls at once: both restarts are used"
    assert best["restarts"]["made"] == 2 and len(best["restarts"]["elites"]) == 2
    assert best["stopped_early"]["iteration"] == len(log) < EVOLUTION.iterations
    evaluated = {r["canonical"]: r for r in _rows(out / "evaluations.jsonl") if r["valid"]}
    # the restart's random population is evaluated in the restart's own iteration
    assert any(r["iteration"] == restarts[0]["iteration"] for r in _rows(out / "evaluations.jsonl"))
    # the result is the best over every population, not the last population's
    assert evaluated[best["canonical"]]["jcm"] >= max(e["fitness"] for e in best["restarts"]["elites"])
    assert evaluated[best["canonical"]]["jcm"] == max(row["best_jcm"] for row in log)
    recorded = json.loads((out / "config.json").read_text())["settings"]["evolution"]
    assert recorded["restarts"] == 2
    capsys.readouterr()
    assert main(["show", str(out), "--no-simplify"]) == 0
    assert "restarts: 2 of 2 made" in capsys.readouterr().out


def test_restarts_are_deterministic(restarted, settings, tmp_path):
    out, _ = restarted
    run_search(settings, tmp_path / "again", quiet=True)
    assert _run_files(tmp_path / "again") == _run_files(out)


@pytest.mark.parametrize("offset", [-1, 0])
def test_a_resumed_run_with_restarts_ends_as_an_uninterrupted_one(restarted, settings, tmp_path, offset):
    out, _ = restarted
    first = next(row["iteration"] for row in _rows(out / "log.jsonl") if row.get("restart"))
    stop = first + offset  # just before the first restart, and just after it
    run_search(settings, tmp_path / "resumed", quiet=True, stop_after=stop)
    run_search(None, tmp_path / "resumed", resume=True, quiet=True)
    assert _run_files(tmp_path / "resumed") == _run_files(out)


def test_restarts_need_a_patience(af_small_file, tmp_path, capsys):
    with pytest.raises(ConfigError, match="patience"):
        EvolutionConfig(restarts=1)
    code = main(["search", "--bench", str(af_small_file), "--out", str(tmp_path / "x"), "--restarts", "1", "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "patience" in err[0]


# ------------------------------------------------------------------ every architecture

@pytest.fixture(scope="module")
def everything(settings, tmp_path_factory):
    out = tmp_path_factory.mktemp("all") / "run"
    plain = replace(settings, search_fraction=1.0, evolution=EvolutionConfig(population_size=4, iterations=2,
                                                                               retry_cap=2, seed=2))
    return out, run_search(plain, out, quiet=True)


def test_a_search_on_every_architecture_has_no_test_part(everything):
    out, best = everything
    config = json.loads((out / "config.json").read_text())
    assert config["split"]["test"] == [] and len(config["split"]["search"]) == 16
    assert best["test"] == {"none": NO_TEST_PART} and best["params"]["test"] == {"none": NO_TEST_PART}
    assert best["beyond_size"]["test"] == {"none": NO_TEST_PART}
    assert best["search"]["targets"]["c100_kd"]["n"] == 16 and "generalisation_gap" not in best


def test_every_command_after_an_all_architecture_search_works(everything, af_small_file, tmp_path, capsys):
    out, best = everything
    capsys.readouterr()
    assert main(["show", str(out), "--no-simplify"]) == 0
    assert "no test part: the search used every architecture" in capsys.readouterr().out
    assert main(["curves", str(out), "--out", str(tmp_path / "c.png")]) == 0 and (tmp_path / "c.png").is_file()
    assert main(["export", str(out), "--out", str(tmp_path / "p.py"), "--no-simplify"]) == 0
    common = ["--bench", str(af_small_file), "--batch-size", "2", "--workers", "1",
              "--cache-dir", json.loads((out / "config.json").read_text())["settings"]["cache_dir"]]
    capsys.readouterr()
    assert main(["rank", "--proxy", str(out / "best.json"), "--split", "search", *common]) == 0
    assert main(["rank", "--proxy", str(out / "best.json"), *common]) == 0  # default: all, not the empty test part
    assert "16 architectures" in capsys.readouterr().out
    assert main(["rank", "--proxy", str(out / "best.json"), "--split", "test", *common]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "every architecture" in err[0]
