"""Evolution, run directory, resume and interruption, on a small slice of the real benchmark."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace

import pytest

from autoprox.search.engine import run_search
from autoprox.search.evolution import EvolutionConfig
from autoprox.search.rundir import RunDirectory
from autoprox.core.errors import RunDirError
from autoprox.search.settings import SearchSettings

EVOLUTION = EvolutionConfig(population_size=5, iterations=6, retry_cap=4, top_k=2, seed=3)


@pytest.fixture(scope="module")
def small_bench_file(af_small_file):
    return af_small_file


@pytest.fixture(scope="module")
def settings(small_bench_file, session_cache):
    return SearchSettings(
        bench=str(small_bench_file), batch_size=2, cache_dir=str(session_cache.root), workers=1,
        search_fraction=0.75, evolution=EVOLUTION,
    )


def _without_timing(records):
    return [{k: v for k, v in r.items() if k not in ("elapsed",)} for r in records]


@pytest.fixture(scope="module")
def full_run(settings, tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "full"
    report = run_search(settings, out, quiet=True)
    return out, report


def test_run_directory_holds_config_log_checkpoint_and_best(full_run, small_bench_file):
    out, report = full_run
    run = RunDirectory(out)
    config = run.config()
    assert len(config["benchmark"]["sha256"]) == 64
    assert config["split"]["search"] == report["split"]["search"]
    assert set(config["split"]["search"]).isdisjoint(config["split"]["test"])
    assert config["settings"]["targets"] == ["c100_kd", "flower_kd", "chaoyang_kd", "imagenet_super"]
    assert config["stats"]["seeds"] == [0] and config["stats"]["input"]["batch_size"] == 2
    log = run.log()
    assert [r["iteration"] for r in log] == list(range(1, EVOLUTION.iterations + 1))
    for record in log:
        assert {"best_jcm", "mean_jcm", "best_kendall", "evaluations", "invalid", "accepted", "elapsed"} <= set(record)
    best_jcms = [r["best_jcm"] for r in log]
    assert best_jcms == sorted(best_jcms), "elitism: the best JCM never drops"
    checkpoint = run.checkpoint()
    assert checkpoint["iteration"] == EVOLUTION.iterations
    assert len(checkpoint["population"]) == EVOLUTION.population_size
    assert len({m["canonical"] for m in checkpoint["population"]}) == EVOLUTION.population_size
    best = json.loads((out / "best.json").read_text())
    assert best["finished"] is True
    assert best["search"]["jcm"] == pytest.approx(max(m["jcm"] for m in checkpoint["population"]))
    for split in ("search", "test"):
        assert set(best[split]["targets"]) == set(best["targets"])
        assert set(best["params"][split]["targets"]["c100_kd"]) == {"kendall", "spearman", "pearson", "n"}
    assert best["test"]["targets"]["c100_kd"]["n"] == 4
    assert best["params"]["search"]["targets"]["c100_kd"]["n"] == 12


def test_accepted_children_beat_their_parent_by_the_margin(full_run):
    out, _ = full_run
    for record in RunDirectory(out).log():
        if record["accepted"]:
            assert record["child_jcm"] - record["parent_jcm"] >= EVOLUTION.margin - 1e-12
        else:
            assert record["child_jcm"] is None and record["attempts"] == EVOLUTION.retry_cap


def test_same_seed_same_run_and_another_seed_differs(settings, full_run, tmp_path):
    out, report = full_run
    again = run_search(settings, tmp_path / "again", quiet=True)
    assert _without_timing(RunDirectory(tmp_path / "again").log()) == _without_timing(RunDirectory(out).log())
    assert again["genome"] == report["genome"]
    other = replace(settings, evolution=replace(EVOLUTION, seed=4))
    run_search(other, tmp_path / "other", quiet=True)
    assert _without_timing(RunDirectory(tmp_path / "other").log()) != _without_timing(RunDirectory(out).log())


def test_resumed_run_ends_identical_to_uninterrupted(settings, full_run, tmp_path):
    out, report = full_run
    stopped = run_search(settings, tmp_path / "resumed", stop_after=2, quiet=True)
    assert stopped["finished"] is False and stopped["iteration"] == 2
    resumed = run_search(None, tmp_path / "resumed", resume=True, quiet=True)
    assert resumed["finished"] is True
    run_a, run_b = RunDirectory(out), RunDirectory(tmp_path / "resumed")
    assert _without_timing(run_b.log()) == _without_timing(run_a.log())
    state_a, state_b = run_a.checkpoint(), run_b.checkpoint()
    assert state_b["population"] == state_a["population"]
    assert state_b["rng_state"] == state_a["rng_state"]
    assert resumed["genome"] == report["genome"]
    assert resumed["test"] == report["test"]


def test_existing_run_directory_is_not_overwritten(settings, full_run):
    out, _ = full_run
    before = (out / "log.jsonl").read_text()
    with pytest.raises(RunDirError, match="--resume"):
        run_search(settings, out, quiet=True)
    assert (out / "log.jsonl").read_text() == before


def test_resume_of_a_directory_that_is_not_a_run(tmp_path):
    with pytest.raises(RunDirError, match="not a run directory"):
        run_search(None, tmp_path, resume=True, quiet=True)


def test_seed_proxies_enter_the_initial_population(settings, tmp_path):
    published = ("block_mean(to_mean_scalar(element_wise_sum(frobenius_norm(min_max_normalize(F2)), "
                 "element_wise_sqrt(sigmoid(F4g)))))")
    seeded = replace(settings, seed_proxies=(published,), evolution=replace(EVOLUTION, iterations=0))
    run_search(seeded, tmp_path / "seeded", quiet=True)
    population = RunDirectory(tmp_path / "seeded").checkpoint()["population"]
    assert population[0]["genome"] == published


def test_ctrl_c_saves_and_the_run_resumes(small_bench_file, session_cache, tmp_path):
    """A real SIGINT to the CLI: exit 130, best.json written, and --resume finishes the run."""
    out = tmp_path / "interrupted"
    env = dict(os.environ, AUTOPROX_CACHE=str(session_cache.root))
    command = [sys.executable, "-m", "autoprox.cli", "search", "--bench", str(small_bench_file), "--out", str(out),
               "--batch-size", "2", "--workers", "1", "--population", "5", "--iterations", "1000000",
               "--retry-cap", "4", "--search-fraction", "0.75", "--quiet"]
    # A shell that runs the tests in the background (as CI may) ignores SIGINT, and children
    # inherit that; give the search the default disposition so Python turns it into Ctrl-C.
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.time() + 300
        while time.time() < deadline:
            checkpoint = out / "checkpoint.json"
            if checkpoint.is_file() and json.loads(checkpoint.read_text())["iteration"] >= 2:
                break
            time.sleep(0.2)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=300)
    finally:
        if process.poll() is None:  # never leave a million-iteration search running
            process.kill()
            process.wait()
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr
    best = json.loads((out / "best.json").read_text())
    assert best["finished"] is False and best["iteration"] >= 2
    log = RunDirectory(out).log()
    assert [r["iteration"] for r in log] == list(range(1, best["iteration"] + 1))
    finish = subprocess.run(
        [sys.executable, "-m", "autoprox.cli", "search", "--resume", "--out", str(out), "--iterations",
         str(best["iteration"] + 2), "--quiet"],
        env=env, capture_output=True, text=True, timeout=300,
    )
    assert finish.returncode == 0, finish.stderr
    assert json.loads((out / "best.json").read_text())["iteration"] == best["iteration"] + 2
