"""Transfer across targets (issue 6, item 6): search on all targets but one, report the held-out one."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from autoprox.apps.protocols.transfer import (
    fold_directory,
    fold_settings,
    format_transfer,
    run_transfer,
)
from autoprox.cli.main import main
from autoprox.data.benchmark import load_benchmark, split_benchmark
from autoprox.data.cache import StatisticsCache
from autoprox.genome.tree import parse_genome
from autoprox.proxies.figures import figures
from autoprox.proxies.proxy import Proxy, score_archs
from autoprox.search.engine import run_search
from autoprox.search.evolution import EvolutionConfig
from autoprox.search.rundir import RunDirectory
from autoprox.core.errors import RunDirError
from autoprox.search.context import stats_plan
from autoprox.search.settings import SearchSettings

pytestmark = pytest.mark.slow

TARGETS = ("c100_kd", "flower_kd", "chaoyang_kd")
EVOLUTION = EvolutionConfig(population_size=4, iterations=3, retry_cap=3, top_k=2, seed=5)


@pytest.fixture(scope="module")
def settings(af_small_file, session_cache):
    return SearchSettings(
        bench=str(af_small_file), targets=TARGETS, weights={"c100_kd": 2.0}, batch_size=2,
        cache_dir=str(session_cache.root), workers=1, search_fraction=0.75, evolution=EVOLUTION,
    )


@pytest.fixture(scope="module")
def study(settings, tmp_path_factory):
    out = tmp_path_factory.mktemp("transfer") / "study"
    return out, run_transfer(settings, out, quiet=True)


def test_each_target_is_held_out_once_and_never_searched_on(study):
    out, result = study
    assert result["finished"] is True
    assert [fold["held_out"] for fold in result["folds"]] == list(TARGETS)
    for fold in result["folds"]:
        config = RunDirectory(fold_directory(out, fold["held_out"])).config()
        searched = config["settings"]["targets"]
        assert fold["held_out"] not in searched
        assert sorted(searched + [fold["held_out"]]) == sorted(TARGETS)
        assert fold["searched_on"] == searched
        # the held-out target's weight is dropped with it
        assert set(config["settings"]["weights"]) <= set(searched)
    assert json.loads((out / "transfer.json").read_text()) == result


def test_held_out_figures_are_the_proxy_ranked_on_that_target(study, settings):
    """The reported held-out Kendall equals ranking the fold's genome on that target directly."""
    _, result = study
    bench = load_benchmark(settings.bench)
    split = split_benchmark(len(bench), settings.split_seed, settings.search_fraction)
    cache = StatisticsCache(settings.cache_dir)
    for fold in result["folds"]:
        target = fold["held_out"]
        plan = stats_plan(settings, [target])
        proxy = Proxy(fold["genome"], parse_genome(fold["genome"]))
        for name, indices in (("search", split.search), ("test", split.test)):
            archs, accuracies = [bench.archs[i] for i in indices], {target: bench.accuracies[target][list(indices)]}
            direct = figures(score_archs(proxy, archs, cache, plan), accuracies, [target],
                             plan.target_classes)["targets"][target]
            params = figures(score_archs(Proxy("params"), archs, cache, plan), accuracies, [target],
                             plan.target_classes)["targets"][target]
            reported = fold["held_out_figures"][name]
            assert reported["proxy"]["kendall"] == pytest.approx(direct["kendall"])
            assert reported["params"]["kendall"] == pytest.approx(params["kendall"])
            assert reported["beats_params"] == (direct["kendall"] > params["kendall"])
            bar = reported["beyond_size"]["bar"]
            assert bar["descriptor"] in ("params", "depth", "width", "macs")
            assert bar["kendall"] >= params["kendall"] - 1e-12


def test_fold_search_is_the_search_of_the_other_targets(study, settings, tmp_path):
    """A fold is an ordinary search: running it by hand gives the same proxy."""
    _, result = study
    fold = result["folds"][1]
    alone = run_search(fold_settings(settings, TARGETS, fold["held_out"]), tmp_path / "alone", quiet=True)
    assert alone["genome"] == fold["genome"]
    assert alone["targets"] == fold["searched_on"]


def test_resume_keeps_finished_folds_and_finishes_an_interrupted_one(study, settings, tmp_path, monkeypatch):
    out, result = study
    partial = tmp_path / "partial"
    first = TARGETS[0]
    run_search(fold_settings(settings, TARGETS, first), fold_directory(partial, first), stop_after=1, quiet=True)
    resumed = run_transfer(settings, partial, quiet=True)
    assert resumed["finished"] is True
    assert [f["genome"] for f in resumed["folds"]] == [f["genome"] for f in result["folds"]]
    log_before = (fold_directory(partial, first) / "log.jsonl").read_text()

    def scored_again(*args, **kwargs):
        raise AssertionError("a finished fold's held-out figures were computed again on resume")

    monkeypatch.setattr("autoprox.apps.protocols.transfer.held_out_report", scored_again)
    again = run_transfer(None, partial, resume=True, quiet=True)
    assert (fold_directory(partial, first) / "log.jsonl").read_text() == log_before
    assert again["folds"] == resumed["folds"]


def test_refusals(settings, study, tmp_path):
    out, _ = study
    with pytest.raises(ValueError, match="at least two targets"):
        run_transfer(replace(settings, targets=("c100_kd",), weights={}), tmp_path / "one", quiet=True)
    with pytest.raises(RunDirError, match="--resume"):
        run_transfer(settings, out, quiet=True)
    clash = tmp_path / "clash"
    other = replace(fold_settings(settings, TARGETS, TARGETS[0]), evolution=replace(EVOLUTION, seed=6))
    run_search(other, fold_directory(clash, TARGETS[0]), stop_after=0, quiet=True)
    with pytest.raises(RunDirError, match="other settings"):
        run_transfer(settings, clash, quiet=True)
    finished = tmp_path / "finished-clash"  # a finished fold is checked too, not taken as it is
    run_search(replace(other, evolution=replace(EVOLUTION, seed=6, iterations=0)), fold_directory(finished, TARGETS[0]),
               quiet=True)
    with pytest.raises(RunDirError, match="other settings"):
        run_transfer(settings, finished, quiet=True)


def test_table_and_cli(study, af_small_file, session_cache, tmp_path, capsys):
    _, result = study
    table = format_transfer(result)
    for target in TARGETS:
        assert target in table
    code = main(["transfer", "--bench", str(af_small_file), "--targets", "c100_kd,flower_kd",
                 "--out", str(tmp_path / "cli"), "--batch-size", "2", "--workers", "1", "--population", "4",
                 "--iterations", "1", "--retry-cap", "2", "--search-fraction", "0.75", "--quiet",
                 "--cache-dir", str(session_cache.root)])
    printed = capsys.readouterr().out
    assert code == 0
    assert "held-out target" in printed and "flower_kd" in printed
    assert (tmp_path / "cli" / "holdout-c100_kd" / "best.json").is_file()
    assert main(["transfer", "--bench", str(af_small_file), "--targets", "c100_kd", "--out",
                 str(tmp_path / "cli1")]) == 2
