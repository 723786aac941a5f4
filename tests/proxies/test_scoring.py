"""One scoring path for every proxy kind (:class:`autoprox.proxies.scoring.ScoringProxy`): a proxy and an
ensemble take the same calls with the same signatures, those calls give what each kind's own path gives, and an
ensemble scores by name through the Python API as ``autoprox score`` writes it."""

from __future__ import annotations

import csv
import inspect
from dataclasses import replace

import numpy as np
import pytest

from autoprox.cli.main import main
from autoprox.core.errors import ConfigError, ProxyError
from autoprox.data.cache import StatsPlan
from autoprox.proxies.ensemble import JOINT, EnsembleProxy, member
from autoprox.proxies.proxy import AUTOPROX_A, Proxy, resolve_proxy
from autoprox.proxies.scoring import ScoringProxy
from autoprox.spaces.descriptors import descriptor_columns

TARGETS = ("c100_kd", "flower_kd")
FIT = list(range(10))
#: The methods every proxy kind implements with one signature.
INTERFACE = ("scoring_plan", "target_scores", "scores", "candidate_scores", "score_architectures")


def test_every_proxy_kind_has_the_one_scoring_interface_with_the_same_signatures():
    ensemble = EnsembleProxy("e", {JOINT: (member("descriptor", "depth", [1.0, 2.0]),)})
    for proxy in (resolve_proxy("params"), resolve_proxy(AUTOPROX_A), resolve_proxy("snip"), ensemble):
        assert isinstance(proxy, ScoringProxy)
    for name in INTERFACE:
        expected = inspect.signature(getattr(ScoringProxy, name))
        assert inspect.signature(getattr(Proxy, name)) == expected, name
        assert inspect.signature(getattr(EnsembleProxy, name)) == expected, name
    assert resolve_proxy("params").targets == () and ensemble.targets == ()


@pytest.fixture(scope="module")
def per_target(af_small, session_cache, small_spec):
    """A per-target ensemble of a genome and a descriptor, its references scored with ``small_spec``."""
    archs = [af_small.archs[i] for i in FIT]
    genome = resolve_proxy(AUTOPROX_A)
    raw = genome.score(archs, session_cache, StatsPlan(small_spec, (0,), {"c100_kd": 100}))[100]
    members = {"c100_kd": (member("proxy", genome.name, raw, 0.7),
                           member("descriptor", "depth", descriptor_columns(archs)["depth"], 0.3)),
               "flower_kd": (member("descriptor", "depth", descriptor_columns(archs)["depth"], 1.0),)}
    return EnsembleProxy("one-path", members, {"input": small_spec.to_json(), "seeds": [0]})


@pytest.mark.slow
def test_a_proxy_and_an_ensemble_scored_through_one_call_give_what_their_own_paths_gave(
        small_settings, per_target, small_spec):
    from autoprox.search.context import RunContext

    # flower_kd's statistics have 102 classes: a proxy's per-target scores are its class count's
    context = RunContext.from_settings(replace(small_settings, targets=TARGETS, per_target_stats=True,
                                               batch_size=4))
    genome = resolve_proxy(AUTOPROX_A)
    per_classes = context.score(genome, "test")
    scores, keyed = context.target_scores(genome, "test")
    assert keyed.targets == TARGETS and set(scores) == set(TARGETS)
    for target in TARGETS:
        assert np.array_equal(scores[target], per_classes[context.plan.target_classes[target]])
    assert not np.array_equal(scores["c100_kd"], scores["flower_kd"])
    assert keyed.figures(scores, "test", weights={})["targets"] == context.figures(per_classes, "test",
                                                                                   weights={})["targets"]
    # an ensemble: its recorded statistics (batch 2), not the context's (batch 4)
    scores, keyed = context.target_scores(per_target, "test")
    recorded = StatsPlan(small_spec, (0,), context.plan.target_classes)
    assert per_target.scoring_plan(context.plan) == recorded
    expected = per_target.target_scores(context.archs("test"), context.cache, recorded, TARGETS)
    for target in TARGETS:
        assert np.array_equal(scores[target], expected[target])
    # scores(target): a proxy's at the target's class count, an ensemble's with the target's members
    archs = context.archs("test")
    assert np.array_equal(genome.scores(archs, context.cache, context.plan, "flower_kd"), per_classes[102])
    assert np.array_equal(genome.scores(archs, context.cache, context.plan), per_classes[100])
    assert np.array_equal(per_target.scores(archs, context.cache, recorded, "flower_kd"), expected["flower_kd"])
    with pytest.raises(ConfigError, match="no class count for target 'chaoyang_kd'"):
        genome.target_scores(archs, context.cache, context.plan, ["chaoyang_kd"])


@pytest.mark.slow
def test_an_ensembles_score_architectures_is_what_autoprox_score_writes(per_target, af_small, af_small_file,
                                                                         session_cache, tmp_path, capsys):
    path = per_target.save(tmp_path / "ens.json")
    ensemble = resolve_proxy(str(path))
    for target in TARGETS:
        out = tmp_path / f"{target}.csv"
        assert main(["score", "--bench", str(af_small_file), "--proxy", str(path), "--targets", target,
                     "--cache-dir", str(session_cache.root), "--out", str(out)]) == 0
        with out.open() as handle:
            written = [float(row["score"]) for row in csv.DictReader(handle)]
        by_name = ensemble.score_architectures(str(af_small_file), cache_dir=str(session_cache.root), target=target)
        assert by_name.tolist() == pytest.approx(written, rel=1e-12, abs=0)
        configs = ensemble.score_architectures(list(af_small.archs), cache=session_cache, target=target)
        assert configs.tolist() == pytest.approx(written, rel=1e-12, abs=0)
    # the recommended form: one target's members, a joint ensemble that needs no target
    cut = ensemble.for_target("flower_kd")
    assert cut.score_architectures(list(af_small.archs), cache=session_cache).tolist() == pytest.approx(
        ensemble.score_architectures(list(af_small.archs), cache=session_cache, target="flower_kd").tolist(),
        rel=1e-12, abs=0)
    capsys.readouterr()


def test_an_ensembles_score_architectures_refuses_as_a_proxys_does(af_small, tmp_path):
    depth = descriptor_columns(af_small.archs)["depth"]
    per_target = EnsembleProxy("depths", {t: (member("descriptor", "depth", depth),) for t in TARGETS})
    archs = list(af_small.archs[:1])
    cache = tmp_path / "cache"
    for proxy in (resolve_proxy("params"), per_target):
        with pytest.raises(ConfigError, match=r"^workers: expected at least 1, got 0$"):
            proxy.score_architectures(archs, workers=0, cache_dir=str(cache))
        with pytest.raises(ConfigError, match=r"^no architecture to score$"):
            proxy.score_architectures([], cache_dir=str(cache), target="c100_kd")
        with pytest.raises(ConfigError, match=r"^archs: expected architecture configs"):
            proxy.score_architectures(3, cache_dir=str(cache))
    with pytest.raises(ProxyError, match=r"per-target ensemble \(c100_kd, flower_kd\): name one target"):
        per_target.score_architectures(archs, cache_dir=str(cache))
    with pytest.raises(ProxyError, match="no members for target 'chaoyang_kd'"):
        per_target.score_architectures(archs, cache_dir=str(cache), target="chaoyang_kd")
    assert per_target.score_architectures(archs, cache_dir=str(cache), target="flower_kd").shape == (1,)


def test_an_ensemble_scored_without_a_cache_or_plan_says_so_as_a_proxy_does(af_small, session_cache):
    """``scores`` (and ``target_scores``) with a None plan or cache: the one line a proxy's ``scores`` raises, not
    an AttributeError from inside a member's scoring."""
    archs = list(af_small.archs[:2])
    depth = descriptor_columns(archs)["depth"]
    ensemble = EnsembleProxy("e", {JOINT: (member("proxy", "params", [1.0, 2.0]), member("descriptor", "depth", depth))})
    plan = StatsPlan.default()
    for cache, given, missing in ((session_cache, None, "plan"), (None, plan, "cache")):
        with pytest.raises(ConfigError) as info:
            resolve_proxy("params").scores(archs, cache, given)
        expected = str(info.value)
        assert expected.startswith(f"score: {missing} is None: give a ")
        with pytest.raises(ConfigError) as info:
            ensemble.scores(archs, cache, given)
        assert str(info.value) == expected
        with pytest.raises(ConfigError) as info:
            ensemble.target_scores(archs, cache, given, ["c100_kd"])
        assert str(info.value) == expected
        with pytest.raises(ConfigError) as info:
            resolve_proxy("params").target_scores(archs, cache, given, ["c100_kd"])
        assert str(info.value) == expected
    assert ensemble.scores(archs, session_cache, plan).shape == (2,)


def test_check_target_asks_a_per_target_ensemble_alone_for_one_of_its_targets():
    """The one check of ``--target`` a command makes before scoring (through ``targets``, whatever the kind), and
    the one an ensemble's own ``members_for`` makes."""
    from autoprox.proxies.scoring import check_target

    depth = member("descriptor", "depth", [1.0, 2.0])
    per_target = EnsembleProxy("depths", {t: (depth,) for t in TARGETS})
    for alike in (resolve_proxy("params"), EnsembleProxy("joint", {JOINT: (depth,)})):
        for target in (None, "c100_kd", "chaoyang_kd"):
            check_target(alike, target)
    check_target(per_target, "flower_kd")
    for target, message in ((None, r"^depths is a per-target ensemble \(c100_kd, flower_kd\): name one target "
                                   r"\(--target\)$"),
                            ("chaoyang_kd", r"^depths has no members for target 'chaoyang_kd'; it has: c100_kd, "
                                            r"flower_kd$")):
        with pytest.raises(ProxyError, match=message):
            check_target(per_target, target)
        with pytest.raises(ProxyError, match=message):
            per_target.members_for(target)


def test_a_proxys_candidate_scores_are_the_mean_of_its_raw_values_over_seeds(af_small, session_cache, small_spec):
    """The ViT search's form (one outcome per candidate) through the same call for a proxy as for an ensemble."""
    archs = list(af_small.archs[:3])
    proxy = resolve_proxy("params")
    runs = [proxy.raw_values(archs, small_spec, seed, 10, session_cache, head_classes=10) for seed in (0, 1)]
    outcomes = proxy.candidate_scores(archs, small_spec, (0, 1), session_cache, head_classes=10)
    assert [o[2] for o in outcomes] == ["", "", ""]
    assert [o[0] for o in outcomes] == pytest.approx([np.mean([r[i].raw for r in runs]) for i in range(3)])
    # a head of 10 classes counts fewer parameters than the engine's 100
    hundred = proxy.candidate_scores(archs, small_spec, (0,), session_cache)
    assert all(o[0] < h[0] for o, h in zip(outcomes, hundred))
    depth = descriptor_columns(archs)["depth"]
    joint = EnsembleProxy("depth", {JOINT: (member("descriptor", "depth", depth),)})
    assert [o[0] for o in joint.candidate_scores(archs, small_spec, (0,), session_cache)] == pytest.approx(
        joint.scores(archs, session_cache, StatsPlan(small_spec, (0,), {"c100_kd": 100})).tolist())
