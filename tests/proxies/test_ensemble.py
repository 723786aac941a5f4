"""Ensemble proxies (issue 13, item 2): the file, quantile scoring, per-target and joint members,
resolution by the commands, and refusals of bad files."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from autoprox.cli.main import main
from autoprox.core.errors import ProxyError
from autoprox.data.cache import StatsPlan
from autoprox.proxies.baselines import blend_features, blend_scores, fit_rank_blend
from autoprox.proxies.ensemble import (
    ENSEMBLE_FORMAT,
    JOINT,
    EnsembleProxy,
    load_ensemble,
    member,
    quantile,
)
from autoprox.proxies.proxy import AUTOPROX_A, Proxy, resolve_proxy
from autoprox.spaces.descriptors import descriptor_columns

pytestmark = pytest.mark.slow

TARGETS = ("c100_kd", "flower_kd")
FIT = list(range(10))  # the architectures members are fitted on (references, blend)


def test_quantile_is_the_empirical_distribution_at_the_reference_and_strictly_increasing():
    reference = [3.0, 1.0, 2.0, 2.0, 5.0]
    at = quantile(reference, [1.0, 2.0, 3.0, 5.0])
    assert at.tolist() == (np.searchsorted(np.sort(reference), [1.0, 2.0, 3.0, 5.0], side="right") / 5).tolist()
    assert quantile(reference, [4.0])[0] == pytest.approx((0.8 + 1.0) / 2)  # linear between 3 and 5
    grid = np.linspace(-50, 50, 2001)
    values = quantile(reference, grid)
    assert np.all(np.diff(values) > 0)  # no ties: a one-member ensemble ranks as its member
    assert values.min() > 0 and values.max() < 1 + 1 / 5
    assert np.isnan(quantile(reference, [np.nan])[0])
    # one value alone gets what it gets within any set
    assert quantile(reference, [4.2])[0] == quantile(reference, [0.0, 4.2, 9.0])[1]


@pytest.fixture(scope="module")
def plan(small_spec):
    return StatsPlan(small_spec, (0,), {t: 100 for t in TARGETS})


@pytest.fixture(scope="module")
def parts(af_small, session_cache, plan):
    """Raw scores of the members on the fitting architectures."""
    archs = [af_small.archs[i] for i in FIT]
    genome = resolve_proxy(AUTOPROX_A)
    columns = descriptor_columns(archs)
    blends = {t: fit_rank_blend(blend_features(columns), af_small.accuracies[t][FIT]) for t in TARGETS}
    return {"genome": genome.name, "genome_raw": genome.score(archs, session_cache, plan)[100],
            "blends": blends, "blend_raw": {t: blend_scores(blends[t], columns) for t in TARGETS},
            "depth_raw": columns["depth"]}


@pytest.fixture(scope="module")
def per_target(parts, small_spec):
    members = {
        "c100_kd": (member("proxy", parts["genome"], parts["genome_raw"], 0.5),
                    member("blend", parts["blends"]["c100_kd"], parts["blend_raw"]["c100_kd"], 0.5)),
        "flower_kd": (member("descriptor", "depth", parts["depth_raw"], 1.0),),
    }
    return EnsembleProxy("test-ensemble", members, {"input": small_spec.to_json(), "seeds": [0]})


def test_file_round_trip_and_resolution(per_target, tmp_path):
    path = per_target.save(tmp_path / "ens.json")
    data = json.loads(path.read_text())
    assert data["format"] == ENSEMBLE_FORMAT and set(data["targets"]) == set(TARGETS)
    loaded = resolve_proxy(str(path))
    assert isinstance(loaded, EnsembleProxy) and loaded.provenance["file"] == str(path)
    assert loaded.members == per_target.members and loaded.to_json() == per_target.to_json()
    assert load_ensemble(path).to_json() == data


def test_scores_are_weighted_quantiles_and_one_architecture_alone_scores_as_within_the_set(
        per_target, parts, af_small, session_cache, plan):
    archs = list(af_small.archs)
    scores = per_target.target_scores(archs, session_cache, plan, TARGETS)
    genome = resolve_proxy(parts["genome"]).score(archs, session_cache, plan)[100]
    columns = descriptor_columns(archs)
    expected = 0.5 * quantile(parts["genome_raw"], genome) + 0.5 * quantile(
        parts["blend_raw"]["c100_kd"], blend_scores(parts["blends"]["c100_kd"], columns))
    assert np.allclose(scores["c100_kd"], expected, rtol=0, atol=1e-12)
    # flower_kd: one member, so it ranks exactly as depth does
    order = np.argsort(columns["depth"], kind="stable")
    assert np.all(np.diff(scores["flower_kd"][order]) >= 0)
    for i in (0, 7, 15):
        alone = per_target.target_scores([archs[i]], session_cache, plan, TARGETS)
        assert alone["c100_kd"][0] == scores["c100_kd"][i] and alone["flower_kd"][0] == scores["flower_kd"][i]
    with pytest.raises(ProxyError, match="per-target ensemble"):
        per_target.scores(archs, session_cache, plan)
    with pytest.raises(ProxyError, match="no members for target 'chaoyang_kd'"):
        per_target.target_scores(archs, session_cache, plan, ["chaoyang_kd"])


def test_joint_ensemble_scores_every_target_alike(parts, af_small, session_cache, plan):
    joint = EnsembleProxy("joint", {JOINT: (member("proxy", parts["genome"], parts["genome_raw"], 1.0),
                                            member("proxy", "params", parts["genome_raw"] * 0 + np.arange(10), 0.0))})
    archs = list(af_small.archs[:6])
    scores = joint.target_scores(archs, session_cache, plan, TARGETS)
    assert np.array_equal(scores["c100_kd"], scores["flower_kd"])
    assert np.array_equal(joint.scores(archs, session_cache, plan), scores["c100_kd"])
    genome = Proxy(parts["genome"], resolve_proxy(parts["genome"]).genome).score(archs, session_cache, plan)[100]
    assert np.array_equal(np.argsort(scores["c100_kd"]), np.argsort(genome))


def _write(tmp_path, data) -> str:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    return str(path)


GOOD_MEMBER = {"descriptor": "depth", "weight": 1.0, "reference": [1.0, 2.0]}


@pytest.mark.parametrize("data, message", [
    ({"format": ENSEMBLE_FORMAT}, "exactly one of 'members'"),
    ({"format": ENSEMBLE_FORMAT, "members": []}, "'members' must be a non-empty list"),
    ({"format": ENSEMBLE_FORMAT, "members": [GOOD_MEMBER], "targets": {}}, "exactly one of 'members'"),
    ({"format": ENSEMBLE_FORMAT, "members": [GOOD_MEMBER | {"weight": -1}]}, r"members\[0\].weight"),
    ({"format": ENSEMBLE_FORMAT, "members": [GOOD_MEMBER | {"weight": 0}]}, "no member with a positive weight"),
    ({"format": ENSEMBLE_FORMAT, "members": [GOOD_MEMBER | {"reference": [2.0, 1.0]}]}, "must be sorted"),
    ({"format": ENSEMBLE_FORMAT, "members": [GOOD_MEMBER | {"reference": "x"}]}, "list of numbers"),
    ({"format": ENSEMBLE_FORMAT, "members": [GOOD_MEMBER | {"descriptor": "colour"}]}, "unknown descriptor"),
    ({"format": ENSEMBLE_FORMAT, "members": [{"proxy": "nonsense(", "reference": [1.0]}]}, r"members\[0\].proxy"),
    ({"format": ENSEMBLE_FORMAT, "members": [{"blend": {"coef": [1]}, "reference": [1.0]}]},
     r"members\[0\].blend"),
    ({"format": ENSEMBLE_FORMAT, "members": [{"descriptor": "depth", "blend": {}, "reference": [1.0]}]},
     "exactly one of proxy, blend, descriptor"),
    ({"format": ENSEMBLE_FORMAT, "targets": {"c100_kd": {"members": [GOOD_MEMBER | {"classes": 0,
                                                                                     "proxy": "params"}]}}},
     "exactly one of"),
    ({"format": ENSEMBLE_FORMAT, "targets": {"c100_kd": {"members": [{"proxy": "params", "classes": 0,
                                                                      "reference": [1.0]}]}}},
     r"targets.c100_kd.members\[0\].classes"),
    ({"format": ENSEMBLE_FORMAT, "plan": {"input": {"kind": "noise"}, "seeds": [0]}, "members": [GOOD_MEMBER]},
     "plan.input"),
])
def test_bad_files_are_refused_naming_file_and_field(tmp_path, data, message):
    path = _write(tmp_path, data)
    with pytest.raises(ProxyError, match=message) as info:
        resolve_proxy(path)
    assert path in str(info.value)


def test_a_member_may_not_be_a_file(tmp_path, per_target):
    inner = per_target.save(tmp_path / "inner.json")
    path = _write(tmp_path, {"format": ENSEMBLE_FORMAT, "members": [{"proxy": str(inner), "reference": [1.0]}]})
    with pytest.raises(ProxyError, match="not a file"):
        resolve_proxy(path)


def test_rank_scores_an_ensemble_per_target(per_target, af_small_file, session_cache, tmp_path, capsys):
    path = per_target.save(tmp_path / "ens.json")
    code = main(["rank", "--bench", str(af_small_file), "--proxy", str(path), "--targets", ",".join(TARGETS),
                 "--batch-size", "2", "--cache-dir", str(session_cache.root), "--json"])
    assert code == 0
    figures = json.loads(capsys.readouterr().out)
    assert set(figures) == set(TARGETS)
    assert figures["flower_kd"]["kendall"] != figures["c100_kd"]["kendall"]


CHILD = textwrap.dedent('''
    import importlib.util, json, sys

    job = json.loads(sys.argv[1])
    spec = importlib.util.spec_from_file_location("ensemble_module", job["file"])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    leaked = sorted(m for m in sys.modules if m.split(".")[0] in ("autoprox", "primitives", "deap", "scipy"))

    import torch
    torch.set_num_threads(1)
    from autoprox.networks.models import build_model
    from autoprox.networks.statistics import InputSpec, derived_seed, make_batch

    out = []
    for config in job["configs"]:
        model = build_model(config, num_classes=100, seed=derived_seed(0, "model"))
        images, labels = make_batch(InputSpec("gaussian", 2), 100, 0)
        out.append(module.scores(model, images, labels))
    print(json.dumps({"scores": out, "leaked": leaked}))
''')


def test_exported_ensemble_scores_as_the_engine(per_target, parts, af_small, plan, tmp_path, capsys):
    """The exported module's scores equal ``target_scores`` (with float32 statistics, as the module
    computes them) on real small models, in a fresh interpreter that imports nothing of autoprox."""
    from autoprox.data.cache import StatisticsCache
    from autoprox.spaces.architectures import arch_to_config

    with_params = EnsembleProxy("export-test", {**per_target.members, "flower_kd": (
        member("descriptor", "depth", parts["depth_raw"], 0.3),
        member("proxy", "params", np.sort(parts["depth_raw"] * 1e6), 0.7))}, per_target.plan)
    source = with_params.save(tmp_path / "ens.json")
    out = tmp_path / "ensemble_proxy.py"
    assert main(["export", str(source), "--out", str(out)]) == 0
    assert "per target" in capsys.readouterr().out
    archs = [af_small.archs[i] for i in (0, 11, 15)]
    job = {"file": str(out), "configs": [arch_to_config(a) for a in archs]}
    result = subprocess.run([sys.executable, "-c", CHILD, json.dumps(job)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["leaked"] == []
    engine = with_params.target_scores(archs, StatisticsCache(tmp_path / "f32", "float32"), plan, TARGETS)
    for i in range(len(archs)):
        for target in TARGETS:
            assert answer["scores"][i][target] == pytest.approx(engine[target][i], rel=1e-6, abs=1e-9)


def test_zoo_members_are_refused_for_export(tmp_path, capsys):
    path = _write(tmp_path, {"format": ENSEMBLE_FORMAT, "members": [{"proxy": "zico", "reference": [1.0, 2.0]}]})
    assert main(["export", path, "--out", str(tmp_path / "x.py")]) == 2
    assert f"autoprox: error: {path}: member 'zico' is a hand-crafted zoo proxy" in capsys.readouterr().err
    assert not (tmp_path / "x.py").exists()


def test_vit_search_takes_a_joint_ensemble_or_a_target(per_target, parts, af_small, af_small_file, session_cache,
                                                       plan, tmp_path, capsys):
    from autoprox.spaces.architectures import parse_arch

    joint = EnsembleProxy("size", {JOINT: (member("descriptor", "depth", parts["depth_raw"], 0.5),
                                           member("proxy", "params", np.sort(parts["depth_raw"]) * 1e6, 0.5))})
    path = joint.save(tmp_path / "joint.json")
    out = tmp_path / "vit"
    assert main(["vit-search", "--space", "autoformer", "--proxy", str(path), "--samples", "4", "--top", "4",
                 "--out", str(out), "--cache-dir", str(session_cache.root), "--workers", "1"]) == 0
    top = json.loads((out / "top.json").read_text())["top"]
    archs = [parse_arch(row["arch"], "autoformer") for row in top]
    expected = joint.scores(archs, session_cache, plan)
    assert [row["score"] for row in top] == pytest.approx(expected.tolist(), rel=1e-12)
    # a per-target ensemble needs --target; with it, the pick is the target's members' best
    ensemble = per_target.save(tmp_path / "per-target.json")
    bench = ["vit-search", "--on-bench", str(af_small_file), "--proxy", str(ensemble), "--batch-size", "2",
             "--cache-dir", str(session_cache.root), "--targets", "c100_kd", "--json"]
    assert main(bench) == 2
    assert "name one target (--target)" in capsys.readouterr().err
    assert main([*bench, "--target", "c100_kd"]) == 0
    picks = json.loads(capsys.readouterr().out)
    scores = per_target.target_scores(list(af_small.archs), session_cache, plan, ["c100_kd"])["c100_kd"]
    assert picks[0]["index"] == int(np.argmax(scores))


@pytest.mark.parametrize("plan, says", [
    ({"input": {"kind": "gaussian", "batch_size": 8}, "seeds": [-1]}, "plan.seeds must be distinct statistics seeds"),
    ({"input": {"kind": "gaussian", "batch_size": 8}, "seeds": ["x"]}, "plan.seeds must be distinct statistics seeds"),
    ({"input": {"kind": "gaussian", "batch_size": 8}, "seeds": [None]}, "plan.seeds must be distinct statistics seeds"),
    ({"input": {"kind": "gaussian", "batch_size": 8}, "seeds": [0, 0]}, "plan.seeds must be distinct statistics seeds"),
    ({"input": {"kind": "gaussian", "batch_size": float("nan")}, "seeds": [0]},
     "plan.input: batch size must be an integer of at least 1, got nan"),
], ids=["negative", "string", "null", "twice", "batch-nan"])
def test_an_ensemble_file_s_plan_is_checked_before_any_statistics(tmp_path, capsys, plan, says):
    """An ensemble file whose ``plan`` named a seed of -1, "x" or null, or a batch size of NaN, was read, and
    ``rank --proxy FILE`` then failed inside the statistics workers (``ValueError: expected non-negative integer``,
    ``TypeError: randn() received an invalid combination of arguments``); it is refused when the file is read."""
    path = tmp_path / "ensemble.json"
    path.write_text(json.dumps({"format": "autoprox-ensemble/1", "name": "e", "plan": plan,
                                "members": [{"proxy": "params", "weight": 1.0, "reference": [1.0, 2.0, 3.0]}]}))
    with pytest.raises(ProxyError, match="^" + str(path) + ": " + says.replace("(", r"\(").replace(")", r"\)")):
        resolve_proxy(str(path))
    assert main(["rank", "--proxy", str(path), "--space", "pit"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


@pytest.mark.parametrize("split, says", [
    ("x", "'split' must be an object with the run's search and test parts, got 'x'"),
    ({"seed": [1], "search_fraction": 0.6}, "'split': 'seed' must be an integer, got [1]"),
    ({"seed": 0, "search_fraction": "x"}, "'split': 'search_fraction' must be a number in (0, 1], got 'x'"),
], ids=["string", "seed-list", "fraction-string"])
def test_an_ensemble_file_s_recorded_split_is_checked_as_a_genome_file_s(tmp_path, capsys, split, says):
    """``select`` records the run's split in an ensemble's provenance, which ``rank --proxy FILE`` reads as the
    split to rank on; one edited to the wrong type ended rank in an AttributeError or TypeError traceback, where a
    genome file's is checked when read."""
    path = tmp_path / "ensemble.json"
    path.write_text(json.dumps({"format": "autoprox-ensemble/1", "name": "e", "provenance": {"split": split},
                                "members": [{"proxy": "params", "weight": 1.0, "reference": [1.0, 2.0, 3.0]}]}))
    with pytest.raises(ProxyError) as refused:
        resolve_proxy(str(path))
    assert str(refused.value) == f"{path}: {says}"
    assert main(["rank", "--proxy", str(path), "--space", "pit"]) == 2
    assert capsys.readouterr().err == f"autoprox: error: {path}: {says}\n"
