"""The evaluation protocol (issue 13, item 1): outer folds, a search per fold, baselines chosen on the
search part only, resume, parallel folds, the summary and the command line."""

from __future__ import annotations

import json
import math
import shutil
from dataclasses import replace

import numpy as np
import pytest
from scipy import stats as sps

from autoprox.apps.protocols.outer_folds import (
    fold_figures,
    fold_settings,
    outer_folds,
    run_protocol,
)
from autoprox.apps.protocols.summary import (
    format_protocol,
    kendall_batch,
    summarise,
    t_interval,
)
from autoprox.cli.main import main
from autoprox.core.atomic import json_safe
from autoprox.core.correlation import correlate
from autoprox.search.rundir import PROTOCOL as PROTOCOL_FILE
from autoprox.core.errors import ConfigError, RunDirError
from autoprox.data.benchmark import load_benchmark
from autoprox.genome.tree import parse_genome
from autoprox.proxies.baselines import choose_baselines
from autoprox.proxies.proxy import Proxy
from autoprox.search.context import RunContext
from autoprox.search.engine import run_search
from autoprox.search.rundir import RunDirectory
from autoprox.search.settings import SearchSettings
from autoprox.spaces.descriptors import descriptor_columns
from tests.conftest import PROTOCOL_EVOLUTION, PROTOCOL_FOLDS, PROTOCOL_TARGETS, REPO
from tests.commands import run_cli

pytestmark = pytest.mark.slow

TARGETS = PROTOCOL_TARGETS
EVOLUTION = PROTOCOL_EVOLUTION
FOLDS = PROTOCOL_FOLDS


@pytest.fixture(scope="module")
def settings(protocol_settings):
    return protocol_settings


@pytest.fixture(scope="module")
def protocol(finished_protocol):
    """conftest's protocol, the one test_bagging reuses the searches of (one run per session)."""
    return finished_protocol


def figures_of(result: dict) -> tuple:
    """What must not depend on how the protocol was run: every fold's indices and figures, and the summary."""
    return [{k: v for k, v in f.items() if k != "seconds"} for f in result["folds"]], result["summary"]


# ------------------------------------------------------------------ the split

def test_outer_folds_are_disjoint_and_cover_every_architecture():
    made = outer_folds(23, 5, repeats=2, seed=7)
    assert len(made) == 10
    for repeat in (0, 1):
        folds = [f for f in made if f.repeat == repeat]
        tests = [set(f.test) for f in folds]
        assert sorted(i for t in tests for i in t) == list(range(23))
        assert {len(t) for t in tests} == {4, 5}
        for fold in folds:
            assert set(fold.search) == set(range(23)) - set(fold.test)
    assert [f.test for f in made[:5]] != [f.test for f in made[5:]]  # repeats shuffle differently
    assert outer_folds(23, 5, repeats=2, seed=7) == made
    assert [f.test for f in outer_folds(23, 5, seed=8)] == [f.test for f in made[5:]]  # repeat r uses seed + r
    with pytest.raises(ConfigError, match="at least 2"):
        outer_folds(23, 1)
    with pytest.raises(ConfigError, match="more than the benchmark's 23"):
        outer_folds(23, 24)
    with pytest.raises(ConfigError, match="--repeats"):
        outer_folds(23, 2, repeats=0)


def test_split_indices_setting_is_honoured_and_old_configs_read_as_before(af_small):
    settings = SearchSettings(bench="unused", targets=TARGETS, split_indices=(7, 1, 3))
    context = RunContext.from_settings(settings, bench=af_small)
    assert context.split.search == (1, 3, 7)
    assert context.split.test == tuple(i for i in range(16) if i not in (1, 3, 7))
    assert context.settings.to_json()["split_indices"] == [1, 3, 7]
    assert SearchSettings.from_json(context.settings.to_json()).split_indices == (1, 3, 7)
    plain = RunContext.from_settings(replace(settings, split_indices=None), bench=af_small)
    assert "split_indices" not in plain.settings.to_json()
    # a committed run's config.json (written before the field existed) reads and writes back unchanged
    recorded = json.loads((REPO / "runs" / "pit-best" / "config.json").read_text())["settings"]
    assert SearchSettings.from_json(recorded).split_indices is None
    assert SearchSettings.from_json(recorded).to_json() == recorded
    for bad, message in (((1, 1), "twice"), ((16,), "outside"), (tuple(range(16)), "between 1 and 15")):
        with pytest.raises(ConfigError, match=message):
            RunContext.from_settings(replace(settings, split_indices=bad), bench=af_small)


# ------------------------------------------------------------------ a whole protocol

def test_each_fold_run_records_exactly_the_outer_split(protocol, settings):
    out, result = protocol
    assert result["finished"] is True
    assert [(f["repeat"], f["fold"]) for f in result["folds"]] == [(0, k) for k in range(FOLDS)]
    tests = [f["test"] for f in result["folds"]]
    assert sorted(i for t in tests for i in t) == list(range(16))
    for fold in result["folds"]:
        assert sorted(fold["search"] + fold["test"]) == list(range(16))
        config = RunDirectory(out / fold["run"]).config()
        assert config["split"]["search"] == fold["search"] and config["split"]["test"] == fold["test"]
        assert config["settings"]["split_indices"] == fold["search"]
        best = json.loads((out / fold["run"] / "best.json").read_text())
        assert best["genome"] == fold["result"]["genome"] == fold["result"]["proxy"]
        # the proxy's test figures are the fold search's own test-split figures
        for target in TARGETS:
            recorded = best["test"]["targets"][target]["kendall"]
            assert fold["result"]["kendall"]["proxy"][target] == pytest.approx(recorded)
        assert fold["result"]["jcm"]["proxy"] == pytest.approx(best["test"]["jcm"])
    assert json.loads((out / PROTOCOL_FILE).read_text()) == result
    assert result["settings"]["weights"] == {"c100_kd": 2.0} and "split_indices" not in result["settings"]


def test_baselines_are_chosen_on_the_search_part_only(protocol, settings):
    """The recorded choices are those made with every test accuracy rewritten (so they never read one),
    and choosing with the test part in would have given other ones."""
    _, result = protocol
    bench = load_benchmark(settings.bench)
    columns = descriptor_columns(bench.archs)
    for fold in result["folds"]:
        test = fold["test"]
        rewritten = {t: a.copy() for t, a in bench.accuracies.items()}
        for target in TARGETS:
            rewritten[target][test] = -1000.0 * columns["width"][test] + columns["depth"][test]
        recorded = json.loads(json.dumps(fold["result"]["choices"]))
        assert json.loads(json.dumps(choose_baselines(columns, rewritten, fold["search"], TARGETS))) == recorded
        leaked = choose_baselines(columns, rewritten, range(16), TARGETS)
        assert leaked["blend"]["c100_kd"]["coef"] != recorded["blend"]["c100_kd"]["coef"]
        # and the recorded test Kendall is that choice scored on the test part
        for target in TARGETS:
            descriptor = recorded["coarse"][target]["descriptor"]
            expected = correlate(columns[descriptor][test], bench.accuracies[target][test])["kendall"]
            assert fold["result"]["kendall"]["coarse"][target] == pytest.approx(expected, nan_ok=True)
            params = correlate(columns["params"][test], bench.accuracies[target][test])["kendall"]
            assert fold["result"]["kendall"]["params"][target] == pytest.approx(params, nan_ok=True)


def test_summary_is_the_per_fold_figures_summarised(protocol):
    _, result = protocol
    summary = result["summary"]
    assert summary["folds"] == FOLDS and summary["methods"] == ["proxy", "params", "coarse", "blend"]
    for target in TARGETS:
        proxy = [f["result"]["kendall"]["proxy"][target] for f in result["folds"]]
        coarse = [f["result"]["kendall"]["coarse"][target] for f in result["folds"]]
        row = summary["targets"][target]
        assert row["test"]["proxy"]["mean"] == pytest.approx(np.mean(proxy))
        assert row["test"]["coarse"]["sd"] == pytest.approx(np.std(coarse, ddof=1))
        difference = row["difference"]["coarse"]
        assert difference["mean"] == pytest.approx(np.mean(proxy) - np.mean(coarse))
        assert difference["ci"][0] < difference["mean"] < difference["ci"][1]
        assert difference["corrected_ci"][0] < difference["ci"][0]  # the correction only widens
        assert difference["bootstrap"]["samples"] > 0
    weights = {"c100_kd": 2.0, "flower_kd": 1.0, "chaoyang_kd": 1.0}
    for fold in result["folds"]:
        k = fold["result"]["kendall"]["blend"]
        assert fold["result"]["jcm"]["blend"] == pytest.approx(sum(weights[t] * k[t] for t in TARGETS) / 4)
    table = format_protocol(result)
    assert "c100_kd" in table and "JCM" in table and "- coarse" in table and "3 of 3 folds finished" in table


def test_resume_after_an_interrupted_fold_gives_the_same_figures(protocol, settings, tmp_path, monkeypatch, capsys):
    _, whole = protocol
    out = tmp_path / "interrupted"
    started = ["autoprox", "evaluate", "--folds", str(FOLDS), "--out", str(out)]
    monkeypatch.setattr("sys.argv", started)
    stopped = run_protocol(settings, out, folds=FOLDS, bootstrap=200, stop_after=1, quiet=True)
    assert stopped["finished"] is False and not any(f["result"] for f in stopped["folds"])
    assert RunDirectory(out / "repeat-0/fold-0").checkpoint()["iteration"] == 1
    with pytest.raises(RunDirError, match="other protocol options"):
        run_protocol(None, out, folds=4, resume=True, quiet=True)
    with pytest.raises(RunDirError, match="other search settings"):
        run_protocol(replace(settings, evolution=replace(EVOLUTION, seed=6)), out, resume=True, quiet=True)
    monkeypatch.setattr("sys.argv", ["autoprox", "evaluate", "--resume", "--out", str(out)])
    resumed = run_protocol(settings, out, resume=True, quiet=True)
    assert figures_of(resumed) == figures_of(whole)
    # the command that started it stays (the report's "made by"; it used to be replaced by the resume's)
    assert resumed["command"] == started and resumed["resumed_with"] == ["autoprox", "evaluate", "--resume", "--out",
                                                                           str(out)]

    # finished folds are kept: nothing is searched again, and a fold whose search finished but whose
    # figures never reached protocol.json is scored from its run directory
    def searched_again(*args, **kwargs):
        raise AssertionError("a finished fold was searched again")

    monkeypatch.setattr("autoprox.apps.protocols.jobs.run_search", searched_again)
    record = json.loads((out / PROTOCOL_FILE).read_text())
    for fold in record["folds"][1:]:
        fold["result"] = None
    (out / PROTOCOL_FILE).write_text(json.dumps(record))
    capsys.readouterr()
    again = run_protocol(None, out, resume=True, quiet=False)
    assert figures_of(again) == figures_of(whole)
    assert f"1 fold finished, {FOLDS - 1} to run" in capsys.readouterr().err  # one fold, not "1 folds"


def test_fold_workers_do_not_change_the_figures(protocol, settings, tmp_path):
    _, whole = protocol
    parallel = run_protocol(settings, tmp_path / "parallel", folds=FOLDS, bootstrap=200, fold_workers=2, quiet=True)
    assert figures_of(parallel) == figures_of(whole)
    config = RunDirectory(tmp_path / "parallel" / "repeat-0" / "fold-0").config()
    assert config["settings"]["workers"] == 1


def test_refusals(protocol, settings, tmp_path):
    out, _ = protocol
    with pytest.raises(RunDirError, match="--resume"):
        run_protocol(settings, out, folds=FOLDS, quiet=True)
    occupied = tmp_path / "occupied"
    occupied.mkdir()
    (occupied / "notes.txt").write_text("mine")
    with pytest.raises(RunDirError, match="not empty"):
        run_protocol(settings, occupied, folds=FOLDS, quiet=True)
    assert (occupied / "notes.txt").read_text() == "mine"
    # a fold directory holding another search is refused, not taken or overwritten
    clash = tmp_path / "clash"
    shutil.copytree(out, clash)
    record = json.loads((clash / PROTOCOL_FILE).read_text())
    record["folds"][0]["result"] = None
    (clash / PROTOCOL_FILE).write_text(json.dumps(record))
    shutil.rmtree(clash / "repeat-0" / "fold-0")
    fold = outer_folds(16, FOLDS)[0]
    other = fold_settings(replace(settings, evolution=replace(EVOLUTION, seed=6)), fold)
    run_search(other, clash / "repeat-0" / "fold-0", stop_after=0, quiet=True)
    with pytest.raises(RunDirError, match="other settings"):
        run_protocol(None, clash, resume=True, quiet=True)
    with pytest.raises(ConfigError, match="fold-workers"):
        run_protocol(settings, tmp_path / "w", folds=FOLDS, fold_workers=0, quiet=True)
    with pytest.raises(ConfigError, match="unknown selection"):
        run_protocol(settings, tmp_path / "s", folds=FOLDS, selection="vote", quiet=True)
    with pytest.raises(ConfigError, match="unknown baseline 'zico'"):
        run_protocol(settings, tmp_path / "b", folds=FOLDS, baselines=["params", "zico"], quiet=True)
    assert not (tmp_path / "s").exists() and not (tmp_path / "b").exists()


def test_a_proxy_invalid_on_a_test_part_counts_as_undefined(protocol, settings):
    """The log of a weight's negation is NaN somewhere in every block: the proxy's test figures are
    undefined, the baselines' are untouched, and the summary leaves that fold out of the proxy's."""
    out, result = protocol
    fold = result["folds"][0]
    context = RunContext.open(out / fold["run"])
    genome = "block_mean(to_mean_scalar(element_wise_sum(element_wise_log(element_wise_revert(F1)), no_op(no_op(F2)))))"
    bench = load_benchmark(settings.bench)
    figures = fold_figures(Proxy(genome, parse_genome(genome)), context, fold["result"]["choices"],
                           descriptor_columns(bench.archs))
    assert "invalid" in figures
    assert all(math.isnan(k) for k in figures["kendall"]["proxy"].values()) and math.isnan(figures["jcm"]["proxy"])
    for target in TARGETS:
        assert figures["kendall"]["blend"][target] == pytest.approx(fold["result"]["kendall"]["blend"][target])
    entries = [dict(fold, result=json_safe(figures)), *result["folds"][1:]]
    summary = summarise(entries, bench.accuracies, TARGETS, settings.weights, ["proxy", "params"], samples=50)
    assert summary["invalid_folds"] == 1
    assert summary["targets"]["c100_kd"]["test"]["proxy"]["n"] == FOLDS - 1
    assert summary["targets"]["c100_kd"]["test"]["params"]["n"] == FOLDS
    assert summary["jcm"]["difference"]["params"]["n"] == FOLDS - 1
    assert "invalid on the test part of 1 fold" in format_protocol(result | {"summary": json_safe(summary)})


# ------------------------------------------------------------------ the statistics

def test_kendall_batch_is_tau_b():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 4, size=(30, 12)).astype(float)  # ties on both sides
    y = rng.integers(0, 5, size=(30, 12)).astype(float)
    y[3, :4] = np.nan
    x[5] = 1.0  # constant
    expected = [correlate(a, b)["kendall"] for a, b in zip(x, y)]
    assert np.allclose(kendall_batch(x, y), expected, equal_nan=True)
    assert math.isnan(kendall_batch(x[:1, :2], y[:1, :2])[0])


def test_t_interval():
    stats = t_interval([1.0, 2.0, 3.0, None, math.nan])
    half = sps.t.ppf(0.975, 2) / math.sqrt(3)
    assert (stats["mean"], stats["sd"], stats["n"]) == (2.0, 1.0, 3)
    assert stats["low"] == pytest.approx(2 - half) and stats["high"] == pytest.approx(2 + half)
    wide = t_interval([1.0, 2.0, 3.0], inflation=0.25)
    assert wide["high"] - wide["low"] == pytest.approx(2 * sps.t.ppf(0.975, 2) * math.sqrt(1 / 3 + 0.25))
    assert math.isnan(t_interval([1.0])["low"])


def test_bootstrap_is_seeded_and_paired():
    """Identical methods differ by exactly zero in every resample; the summary repeats itself."""
    rng = np.random.default_rng(1)
    accuracies = {"a": rng.normal(size=12)}
    entries = []
    for test in ([0, 1, 2, 3, 4, 5], [6, 7, 8, 9, 10, 11]):
        scores = {"proxy": {"a": rng.normal(size=6).tolist()}}
        scores["same"] = scores["proxy"]
        kendall = {m: {"a": correlate(s["a"], accuracies["a"][test])["kendall"]} for m, s in scores.items()}
        jcm = {m: k["a"] for m, k in kendall.items()}
        entries.append({"test": test, "search": [i for i in range(12) if i not in test],
                        "result": {"scores": scores, "kendall": kendall, "jcm": jcm}})
    summary = summarise(entries, accuracies, ["a"], {}, ["proxy", "same"], samples=300, seed=3)
    difference = summary["targets"]["a"]["difference"]["same"]
    assert difference["mean"] == 0.0 and difference["bootstrap"]["low"] == difference["bootstrap"]["high"] == 0.0
    assert summarise(entries, accuracies, ["a"], {}, ["proxy", "same"], samples=300, seed=3) == summary


# ------------------------------------------------------------------ the command line

def test_cli_prints_the_table_and_refuses_bad_options(af_small_file, session_cache, tmp_path, capsys):
    common = ["--bench", str(af_small_file), "--targets", "c100_kd,flower_kd", "--batch-size", "2", "--workers", "1",
              "--population", "4", "--iterations", "1", "--retry-cap", "2", "--quiet",
              "--cache-dir", str(session_cache.root)]
    out = tmp_path / "cli"
    assert main(["evaluate", *common, "--folds", "2", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "evaluation protocol" in printed and "flower_kd" in printed and "- blend" in printed
    assert "2 of 2 folds finished" in printed
    assert (out / "repeat-0" / "fold-1" / "best.json").is_file()
    assert main(["evaluate", "--resume", "--out", str(out), "--quiet"]) == 0
    assert "2 of 2 folds finished" in capsys.readouterr().out
    # given search options must be the recorded ones, but for the statistics workers
    assert common[6:8] == ["--workers", "1"]
    assert main(["evaluate", "--resume", "--out", str(out), *common[:6], "--workers", "2", *common[8:]]) == 0
    capsys.readouterr()
    assert main(["evaluate", "--resume", "--out", str(out), *common, "--seed", "3"]) == 2
    assert "other search settings (evolution)" in capsys.readouterr().err
    for bad, message in ((["--folds", "1"], "--folds must be at least 2, got 1"),
                         (["--folds", "17"], "--folds 17 is more than the benchmark's 16 architectures")):
        assert main(["evaluate", *common, *bad, "--out", str(tmp_path / "bad")]) == 2
        error = capsys.readouterr().err.strip().splitlines()
        assert error == [f"autoprox: error: {message}"]
    assert not (tmp_path / "bad").exists() or not any((tmp_path / "bad").iterdir())
    assert main(["evaluate", "--resume", "--out", str(out), "--folds", "3", "--quiet"]) == 2
    assert "other protocol options (folds)" in capsys.readouterr().err


# ------------------------------------------------------------------ reusing a protocol's searches

def _snapshot(folder):
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_reuse_searches_gives_the_original_figures_and_writes_nothing_there(protocol, tmp_path):
    out, whole = protocol
    before = _snapshot(out)
    again = run_protocol(None, tmp_path / "again", bootstrap=200, reuse_searches=out, quiet=True)
    assert figures_of(again) == figures_of(whole)
    assert _snapshot(out) == before
    assert (tmp_path / "again" / again["protocol"]["searches"]).resolve() == out.resolve()  # recorded relatively
    assert not (tmp_path / "again" / "repeat-0").exists()  # no search was run


def test_reuse_searches_refuses_a_mismatch(protocol, settings, tmp_path):
    out, _ = protocol
    with pytest.raises(RunDirError, match="other settings .*batch_size"):
        run_protocol(replace(settings, batch_size=4), tmp_path / "a", reuse_searches=out, quiet=True)
    with pytest.raises(RunDirError, match="folds 3, not 2"):
        run_protocol(None, tmp_path / "b", folds=2, reuse_searches=out, quiet=True)
    with pytest.raises(RunDirError, match="no protocol.json"):
        run_protocol(None, tmp_path / "c", reuse_searches=tmp_path, quiet=True)
    with pytest.raises(RunDirError, match="its own --out"):
        run_protocol(None, out, reuse_searches=out, quiet=True)
    unfinished = tmp_path / "unfinished"
    shutil.copytree(out, unfinished)
    best = unfinished / "repeat-0" / "fold-1" / "best.json"
    best.write_text(json.dumps(json.loads(best.read_text()) | {"finished": False}))
    with pytest.raises(RunDirError, match="fold-1: its search is not finished"):
        run_protocol(None, tmp_path / "d", reuse_searches=unfinished, quiet=True)
    assert not any((tmp_path / name).exists() for name in "abc")


def test_an_ensemble_selection_is_scored_per_target_and_recorded(protocol, tmp_path, capsys):
    from autoprox.proxies.ensemble import ensemble_from_json

    out, whole = protocol
    code = main(["evaluate", "--reuse-searches", str(out), "--selection", "cv-pick", "--out", str(tmp_path / "cv"),
                 "--quiet"])
    assert code == 0 and "JCM" in capsys.readouterr().out
    result = json.loads((tmp_path / "cv" / PROTOCOL_FILE).read_text())
    assert result["finished"] and result["protocol"]["selection"] == "cv-pick"
    for fold, original in zip(result["folds"], whole["folds"]):
        recorded = fold["result"]
        ensemble = ensemble_from_json(recorded["ensemble"])
        context = RunContext.open(out / fold["run"])
        again = ensemble.target_scores(context.archs("test"), context.cache, context.plan, list(TARGETS))
        for target in TARGETS:
            assert np.array_equal(again[target], recorded["scores"]["proxy"][target])
            chosen = ensemble.provenance["chosen"][target]
            if chosen == "blend":  # the blend refitted on the whole search part: the blend baseline's ranking
                assert recorded["kendall"]["proxy"][target] == pytest.approx(original["result"]["kendall"]["blend"][target])
            if chosen == "best":
                assert recorded["kendall"]["proxy"][target] == pytest.approx(original["result"]["kendall"]["proxy"][target])


def test_more_repeats_on_resume_extend_a_finished_protocol(protocol, settings, tmp_path, monkeypatch):
    out, whole = protocol
    grown = tmp_path / "grown"
    shutil.copytree(out, grown)
    rescored = tmp_path / "rescored"
    run_protocol(None, rescored, bootstrap=200, reuse_searches=grown, quiet=True)
    with pytest.raises(RunDirError, match="has 1 repeats; extend that protocol to 2 repeats first"):
        run_protocol(None, rescored, repeats=2, resume=True, quiet=True)

    extended = run_protocol(None, grown, repeats=2, resume=True, quiet=True)
    assert extended["finished"] and extended["protocol"]["repeats"] == 2
    assert [f["run"] for f in extended["folds"]] == [f"repeat-{r}/fold-{k}" for r in range(2) for k in range(FOLDS)]
    assert extended["folds"][:FOLDS] == whole["folds"]  # finished folds kept as they were
    fresh = run_protocol(settings, tmp_path / "fresh", folds=FOLDS, repeats=2, bootstrap=200, quiet=True)
    assert figures_of(extended) == figures_of(fresh)
    assert extended["summary"]["jcm"]["test"]["proxy"]["n"] == 2 * FOLDS
    first, second = extended["repeat_summaries"]  # each repeat alone: the first is the one-repeat protocol's
    assert first["jcm"]["test"] == whole["summary"]["jcm"]["test"]
    assert first["targets"]["c100_kd"]["difference"]["blend"]["ci"] == \
        whole["summary"]["targets"]["c100_kd"]["difference"]["blend"]["ci"]
    assert second["folds"] == FOLDS and "repeat_summaries" not in whole
    with pytest.raises(RunDirError, match="holds 2 repeats; --repeats 1 would drop finished folds"):
        run_protocol(None, grown, repeats=1, resume=True, quiet=True)

    # the re-scoring protocol now grows as far as the searches it reads, and searches nothing itself
    monkeypatch.setattr("autoprox.apps.protocols.jobs.run_search", lambda *a, **k: pytest.fail("searched again"))
    grown_too = run_protocol(None, rescored, repeats=2, resume=True, quiet=True)
    assert figures_of(grown_too) == figures_of(fresh)
    assert not (rescored / "repeat-1").exists()


@pytest.mark.slow
@pytest.mark.parametrize("folds", ["100", "6"])
def test_evaluate_refuses_folds_too_small_to_rank(capsys, tmp_path, af_small_file, folds):
    out = tmp_path / "protocol"
    code, _, err = run_cli(capsys, "evaluate", "--bench", str(af_small_file), "--folds", folds, "--iterations", "1",
                           "--batch-size", "2", "--workers", "1", "--quiet", "--cache-dir", str(tmp_path / "cache"),
                           "--out", str(out))
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("autoprox: error: --folds ")
    if folds == "6":  # 16 architectures: 2 per fold
        assert "leaves 2 test architecture(s) in a fold" in lines[0] and "give at most --folds 5" in lines[0]
    assert not out.exists() or not any(out.iterdir())
    assert not (tmp_path / "cache").exists() or not list((tmp_path / "cache").rglob("*.npz"))


def _protocol_settings(af_small_file, session_cache):
    from autoprox.search.evolution import EvolutionConfig
    from autoprox.search.settings import SearchSettings

    return SearchSettings(bench=str(af_small_file), targets=("c100_kd", "flower_kd"), batch_size=2,
                          cache_dir=str(session_cache.root), workers=1,
                          evolution=EvolutionConfig(population_size=4, iterations=2, retry_cap=3, top_k=2, seed=5))


@pytest.mark.slow
def test_an_interrupted_evaluate_gives_its_own_quoted_resume_hint(capsys, tmp_path, af_small_file, session_cache):
    import shlex

    from autoprox.apps.protocols.outer_folds import run_protocol

    out = tmp_path / "my protocol"
    stopped = run_protocol(_protocol_settings(af_small_file, session_cache), out, folds=2, stop_after=1, quiet=False)
    assert not stopped["finished"]
    err = capsys.readouterr().err
    assert f"continue with: autoprox evaluate --resume --out {shlex.quote(str(out))}" in err
    assert "autoprox search --resume" not in err  # the inner fold's own hint is not the way to continue


@pytest.mark.slow
def test_the_protocol_folder_has_its_own_lock(capsys, tmp_path, af_small_file, session_cache):
    from autoprox.search.rundir import hold_lock

    out = tmp_path / "protocol"
    out.mkdir()
    with hold_lock(out / ".autoprox.lock", "held by this test"):
        code, _, err = run_cli(capsys, "evaluate", "--bench", str(af_small_file), "--folds", "2", "--iterations", "1",
                               "--batch-size", "2", "--workers", "1", "--quiet", "--cache-dir",
                               str(session_cache.root), "--out", str(out))
    assert code == 2
    assert err.strip().splitlines() == [f"autoprox: error: {out} is being written by another autoprox process "
                                        f"(pid {__import__('os').getpid()}, lock {out / '.autoprox.lock'}); wait for "
                                        "it to end or stop it, then try again"]
    assert list(out.iterdir()) == []  # nothing written, the lock released
