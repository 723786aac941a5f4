"""Bagging in the evaluation protocol (issue 13, item 2): searches on seeded subsamples of each outer
fold's search part, their best proxies rank-averaged into one ensemble per fold."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from autoprox.apps.protocols.bagging import (
    BAGGED,
    bag_settings,
    bag_size,
    bag_subsample,
    bagged_file,
    check_bagging,
)
from autoprox.apps.protocols.outer_folds import (
    fold_settings,
    outer_folds,
    run_protocol,
)
from autoprox.cli.main import main
from autoprox.core.errors import ConfigError, RunDirError
from autoprox.search.rundir import PROTOCOL as PROTOCOL_FILE
from autoprox.genome.tree import parse_genome
from autoprox.proxies.ensemble import JOINT, ensemble_from_json, load_ensemble
from autoprox.proxies.proxy import Proxy
from autoprox.search.context import RunContext
from autoprox.search.rundir import RunDirectory
from tests.conftest import PROTOCOL_EVOLUTION, PROTOCOL_FOLDS, PROTOCOL_TARGETS, REPO, unpacked_protocol

pytestmark = pytest.mark.slow

TARGETS = PROTOCOL_TARGETS
EVOLUTION = PROTOCOL_EVOLUTION
FOLDS, BAGS = PROTOCOL_FOLDS, 2


@pytest.fixture(scope="module")
def settings(protocol_settings):
    return protocol_settings


@pytest.fixture(scope="module")
def plain(finished_protocol):
    """A protocol without bags (its fold searches are reused below): conftest's, which test_protocol reads too."""
    return finished_protocol


@pytest.fixture(scope="module")
def bagged(settings, tmp_path_factory):
    out = tmp_path_factory.mktemp("bagged") / "out"
    return out, run_protocol(settings, out, folds=FOLDS, bootstrap=200, bags=BAGS, quiet=True)


def figures_of(result: dict) -> tuple:
    return [{k: v for k, v in f.items() if k != "seconds"} for f in result["folds"]], result["summary"]


def _snapshot(folder):
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# ------------------------------------------------------------------ the subsamples

def test_bag_subsamples_are_seeded_subsets_of_the_search_part():
    fold = outer_folds(40, 4, seed=3)[1]
    draw = bag_subsample(fold.search, 0.5, 3, 0, 1, 0)
    assert len(draw) == 15 and list(draw) == sorted(set(draw))
    assert set(draw) <= set(fold.search) and not set(draw) & set(fold.test)
    assert bag_subsample(reversed(fold.search), 0.5, 3, 0, 1, 0) == draw  # the same whatever the order given
    others = [bag_subsample(fold.search, 0.5, *key) for key in ((3, 0, 1, 1), (3, 0, 2, 0), (3, 1, 1, 0),
                                                                  (4, 0, 1, 0))]
    assert all(other != draw for other in others)  # bag, fold, repeat and protocol seed each change it
    # the documented derivation, so that anyone can draw a bag again
    import random

    assert draw == tuple(sorted(random.Random("autoprox-bag/3/0/1/0").sample(sorted(fold.search), 15)))
    assert bag_subsample(fold.search, 1.0, 3, 0, 1, 0) == fold.search
    assert bag_size(11, 0.5) == 6 and bag_size(10, 0.25) == 3  # rounded half up
    with pytest.raises(ConfigError, match="at least 2"):
        bag_subsample(fold.search, 0.02, 3, 0, 1, 0)
    for bags, fraction, message in ((-1, 0.5, "--bags"), (2, 0.0, "--bag-fraction"), (2, 1.5, "--bag-fraction")):
        with pytest.raises(ConfigError, match=message):
            check_bagging(bags, fraction)


def test_bag_settings_change_only_the_search_part_and_the_seed(settings):
    fold = outer_folds(16, FOLDS)[0]
    base = fold_settings(settings, fold)
    bag = bag_settings(base, (1, 4, 9), 2)
    assert bag.split_indices == (1, 4, 9) and bag.evolution.seed == EVOLUTION.seed + 3
    assert replace(bag, split_indices=base.split_indices, evolution=base.evolution) == base


# ------------------------------------------------------------------ a protocol with bags

def test_each_fold_records_and_runs_its_bags(bagged, settings):
    out, result = bagged
    assert result["finished"] and result["protocol"]["bags"] == BAGS and result["protocol"]["bag_fraction"] == 0.5
    for entry in result["folds"]:
        assert [b["run"] for b in entry["bags"]] == [f"{entry['run']}-bag-{b}" for b in range(BAGS)]
        for bag in entry["bags"]:
            assert tuple(bag["search"]) == bag_subsample(entry["search"], 0.5, 0, entry["repeat"], entry["fold"],
                                                         bag["bag"])
            assert set(bag["search"]) <= set(entry["search"]) and not set(bag["search"]) & set(entry["test"])
            config = RunDirectory(out / bag["run"]).config()  # a sibling of the fold's run directory
            assert config["split"]["search"] == bag["search"]
            assert config["settings"]["evolution"]["seed"] == EVOLUTION.seed + 1 + bag["bag"]
            assert json.loads((out / bag["run"] / "best.json").read_text())["finished"]
        assert [s["search"] for s in entry["bags"]][0] != [s["search"] for s in entry["bags"]][1]
        assert RunDirectory(out / entry["run"]).config()["settings"]["evolution"]["seed"] == EVOLUTION.seed
    assert json.loads((out / PROTOCOL_FILE).read_text()) == result


def test_the_ensemble_rank_averages_the_best_genomes_with_search_part_references(bagged):
    out, result = bagged
    for entry in result["folds"]:
        recorded = entry["result"]
        assert recorded["proxy"] == BAGGED
        ensemble = ensemble_from_json(recorded["ensemble"])
        runs = [entry["run"], *(b["run"] for b in entry["bags"])]
        genomes = {run: json.loads((out / run / "best.json").read_text())["genome"] for run in runs}
        members = ensemble.provenance["members"]
        left_out = ensemble.provenance.get("left_out", [])
        assert [m["run"] for m in members] == [r for r in runs if r not in {x["run"] for x in left_out}]
        assert members[0]["run"] == entry["run"] and recorded["genome"] == genomes[entry["run"]]
        assert ensemble.joint and len(ensemble.members[JOINT]) == len(members)
        context = RunContext.open(out / entry["run"])
        assert context.indices("search") == entry["search"]
        for item, described in zip(ensemble.members[JOINT], members):
            assert item.value == genomes[described["run"]] and item.weight == pytest.approx(1 / len(members))
            raw = context.score(Proxy(item.value, parse_genome(item.value)), "search", workers=1)[item.classes]
            assert list(item.reference) == sorted(raw.tolist())  # the fold's whole search part, nothing else
            assert len(item.reference) == len(entry["search"])


def test_the_ensemble_file_loads_and_scores_like_the_recorded_figures(bagged):
    out, result = bagged
    for entry in result["folds"]:
        path = out / bagged_file(entry["run"])
        ensemble = load_ensemble(path)
        assert ensemble.to_json() == entry["result"]["ensemble"]
        context = RunContext.open(out / entry["run"])
        scores = ensemble.target_scores(context.archs("test"), context.cache, context.plan, list(TARGETS))
        for target in TARGETS:
            assert np.array_equal(scores[target], entry["result"]["scores"]["proxy"][target])


def test_bags_leave_the_fold_searches_and_baselines_as_without(bagged, plain):
    _, with_bags = bagged
    _, without = plain
    for a, b in zip(with_bags["folds"], without["folds"]):
        assert a["result"]["genome"] == b["result"]["genome"]
        for method in ("params", "coarse", "blend"):
            assert a["result"]["kendall"][method] == b["result"]["kendall"][method]


def test_a_fold_is_scored_again_from_its_runs_and_never_reads_a_bags_test_figures(bagged, tmp_path, monkeypatch):
    """A fold whose searches finished but whose figures never reached protocol.json is scored from its
    run directories; the bags' test figures (which hold the outer test part) are rewritten to nonsense
    and the figures do not move."""
    out, whole = bagged
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    record = json.loads((copy / PROTOCOL_FILE).read_text())
    record["folds"][0]["result"] = None
    (copy / PROTOCOL_FILE).write_text(json.dumps(record))
    for bag in record["folds"][0]["bags"]:
        best = copy / bag["run"] / "best.json"
        data = json.loads(best.read_text())
        data["test"] = {"jcm": 99.0, "targets": {t: {"kendall": 99.0} for t in TARGETS}}
        best.write_text(json.dumps(data))

    def searched_again(*args, **kwargs):
        raise AssertionError("a finished search was run again")

    monkeypatch.setattr("autoprox.apps.protocols.jobs.run_search", searched_again)
    again = run_protocol(None, copy, resume=True, quiet=True)
    assert figures_of(again) == figures_of(whole)
    # the ensemble file left by the earlier start is this fold's; another one is refused, not overwritten
    record = json.loads((copy / PROTOCOL_FILE).read_text())
    record["folds"][0]["result"] = None
    (copy / PROTOCOL_FILE).write_text(json.dumps(record))
    (copy / bagged_file("repeat-0/fold-0")).write_text(json.dumps({"format": "autoprox-ensemble/1", "name": "x"}))
    with pytest.raises(RunDirError, match="another ensemble"):
        run_protocol(None, copy, resume=True, quiet=True)


# ------------------------------------------------------------------ reusing searches, resume, parallel

def test_reuse_searches_with_bags_runs_only_the_bags_and_resumes_an_interrupted_bag(plain, bagged, tmp_path, capsys):
    source, _ = plain
    _, whole = bagged
    before = _snapshot(source)
    out = tmp_path / "reused"
    stopped = run_protocol(None, out, bags=BAGS, bootstrap=200, reuse_searches=source, stop_after=1, quiet=True)
    assert stopped["finished"] is False and not any(f["result"] for f in stopped["folds"])
    assert RunDirectory(out / "repeat-0/fold-0-bag-0").checkpoint()["iteration"] == 1
    assert not (out / "repeat-0/fold-0-bag-1").exists() and not (out / bagged_file("repeat-0/fold-0")).exists()
    with pytest.raises(RunDirError, match="other protocol options .bags"):
        run_protocol(None, out, bags=3, resume=True, quiet=True)
    resumed = run_protocol(None, out, resume=True, quiet=False)
    err = capsys.readouterr().err
    assert "repeat-0/fold-0-bag-0 finished in" in err and "repeat-0/fold-0 waits for 1 more search(es)" in err
    assert "repeat-0/fold-2 is scored" in err
    assert figures_of(resumed) == figures_of(whole)  # the same as with the fold searches run here
    assert resumed["protocol"]["searches"] and resumed["protocol"]["bags"] == BAGS
    assert sorted(p.name for p in (out / "repeat-0").iterdir()) == sorted(
        [f"fold-{k}-bag-{b}" for k in range(FOLDS) for b in range(BAGS)] + [f"fold-{k}-bagged.json"
                                                                           for k in range(FOLDS)])
    assert _snapshot(source) == before  # nothing written where the fold searches are read


def test_bags_in_parallel_give_the_same_figures(plain, bagged, tmp_path, recwarn):
    source, _ = plain
    _, whole = bagged
    parallel = run_protocol(None, tmp_path / "parallel", bags=BAGS, bootstrap=200, reuse_searches=source,
                            fold_workers=2, quiet=True)
    assert figures_of(parallel) == figures_of(whole)
    # a fold worker imports torch after its first task; loky must not take that for a leak and stop it
    assert not [w for w in recwarn if "A worker stopped" in str(w.message)]
    assert RunDirectory(tmp_path / "parallel" / "repeat-0" / "fold-1-bag-0").config()["settings"]["workers"] == 1


# ------------------------------------------------------------------ without bags, and refusals

def test_without_bags_protocol_json_is_as_before(plain, settings, tmp_path):
    out, result = plain
    assert list(result["protocol"]) == ["folds", "repeats", "seed", "selection", "baselines", "bootstrap"]
    assert all(set(f) == {"repeat", "fold", "run", "search", "test", "result", "seconds"} for f in result["folds"])
    assert not list(out.glob("repeat-0/*-bag*"))
    explicit = run_protocol(None, tmp_path / "zero", bags=0, bootstrap=200, reuse_searches=out, quiet=True)
    assert "bags" not in explicit["protocol"] and figures_of(explicit) == figures_of(result)
    assert run_protocol(None, tmp_path / "zero", bags=0, resume=True, quiet=True)["finished"]
    with pytest.raises(RunDirError, match="other protocol options .bags"):
        run_protocol(None, tmp_path / "zero", bags=2, resume=True, quiet=True)


def test_a_committed_protocol_resumes_unchanged_once_unpacked(tmp_path):
    copy = unpacked_protocol("pit-best", tmp_path)
    committed = json.loads((copy / PROTOCOL_FILE).read_text())
    assert "archive" not in committed and committed["finished"]
    again = run_protocol(None, copy, resume=True, quiet=True)
    for key in ("protocol", "settings", "folds", "summary"):
        assert again[key] == committed[key]


def test_a_committed_protocol_still_packed_says_how_to_unpack(tmp_path):
    """The committed protocol.json beside its archive keeps the figures, not the folds' scores:
    resuming it, or reusing its searches, is one clear line naming the unpack command."""
    packed = Path(shutil.copytree(REPO / "runs" / "protocol" / "pit-best", tmp_path / "pit-best"))
    trimmed = json.loads((packed / PROTOCOL_FILE).read_text())
    assert trimmed["summary"] and all(set(f["result"]) >= {"genome", "jcm", "kendall"} for f in trimmed["folds"])
    unpack = f"python scripts/runs_archive.py unpack {packed}"
    with pytest.raises(RunDirError, match=re.escape(unpack)):
        run_protocol(None, packed, resume=True, quiet=True)
    with pytest.raises(RunDirError, match=re.escape(unpack)):
        run_protocol(None, tmp_path / "new", reuse_searches=packed, selection="cv-pick", quiet=True)
    assert json.loads((packed / PROTOCOL_FILE).read_text()) == trimmed  # nothing written
    assert not (tmp_path / "new").exists()


def test_refusals(plain, settings, tmp_path, capsys):
    source, _ = plain
    with pytest.raises(ConfigError, match="--selection cv-pick cannot be combined with --bags"):
        run_protocol(None, tmp_path / "a", bags=2, selection="cv-pick", reuse_searches=source, quiet=True)
    with pytest.raises(ConfigError, match="--bag-fraction needs --bags"):
        run_protocol(settings, tmp_path / "b", folds=FOLDS, bag_fraction=0.3, quiet=True)
    with pytest.raises(ConfigError, match="a bag needs at least 2"):
        run_protocol(settings, tmp_path / "c", folds=FOLDS, bags=1, bag_fraction=0.1, quiet=True)
    with pytest.raises(ConfigError, match="--bags must be"):
        run_protocol(settings, tmp_path / "d", folds=FOLDS, bags=-1, quiet=True)
    assert not any((tmp_path / name).exists() for name in "abcd")
    code = main(["evaluate", "--reuse-searches", str(source), "--bags", "1", "--selection", "hof-average",
                 "--out", str(tmp_path / "e"), "--quiet"])
    assert code == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "autoprox: error: --selection hof-average cannot be combined with --bags: each fold's proxy is then the "
        "bagged ensemble of the searches' best proxies (leave --selection out)"]


def test_cli_runs_bags_on_reused_searches(plain, tmp_path, capsys):
    source, _ = plain
    out = tmp_path / "cli"
    code = main(["evaluate", "--reuse-searches", str(source), "--bags", "1", "--bag-fraction", "0.6",
                 "--out", str(out), "--quiet"])
    assert code == 0 and f"{FOLDS} of {FOLDS} folds finished" in capsys.readouterr().out
    result = json.loads((out / PROTOCOL_FILE).read_text())
    assert result["protocol"]["bags"] == 1 and result["protocol"]["bag_fraction"] == 0.6
    assert all(len(f["bags"][0]["search"]) == bag_size(len(f["search"]), 0.6) for f in result["folds"])
    assert (out / bagged_file("repeat-0/fold-2")).is_file()
