"""Proxies by name, genome string or JSON file, and scoring architectures with them."""

from __future__ import annotations

import json

import numpy as np
import pytest

from autoprox.data.cache import StatsPlan, StatsRequest, load_statistics
from autoprox.genome.tree import (
    InvalidProxy,
    genome_to_string,
    parse_genome,
    score_architecture,
)
from autoprox.networks.statistics import torch_threads
from autoprox.proxies.proxy import BUILTIN_PROXIES, Proxy, resolve_proxy, score_archs
from autoprox.core.errors import ProxyError
from autoprox.proxies.scorers import ARCHITECTURE_PROXIES
from autoprox.search.fitness import FitnessEvaluator
from autoprox.spaces.architectures import count_macs, count_params
from tests.conftest import REPO

PUBLISHED = (
    "block_mean(to_mean_scalar(element_wise_sum(frobenius_norm(min_max_normalize(F2)), "
    "element_wise_sqrt(sigmoid(F4g)))))"
)
NAN_GENOME = "block_mean(to_mean_scalar(element_wise_log(element_wise_revert(element_wise_abs(F1)))))"


@pytest.mark.parametrize("name", ["params", "flops"])
def test_builtin_proxies(name):
    proxy = resolve_proxy(name)
    assert proxy == Proxy(name)
    assert proxy.genome is None and not proxy.needs_statistics
    assert set(ARCHITECTURE_PROXIES) == {"params", "flops"}


def test_genome_string_proxy():
    proxy = resolve_proxy(PUBLISHED)
    assert proxy.needs_statistics
    assert proxy.name == PUBLISHED == genome_to_string(proxy.genome)
    bare = resolve_proxy("to_mean_scalar(F1)")
    assert bare.name == "block_mean(to_mean_scalar(F1))"


def test_json_proxy_file(tmp_path):
    path = tmp_path / "best.json"
    path.write_text(json.dumps({"genome": PUBLISHED, "run": "run-7", "jcm": 0.41, "split": {"seed": 0}}))
    proxy = resolve_proxy(str(path))
    assert proxy.needs_statistics and proxy.name == PUBLISHED
    assert proxy.provenance == {"file": str(path), "run": "run-7", "split": {"seed": 0}}
    assert [n.name for n in proxy.genome] == [n.name for n in parse_genome(PUBLISHED)]
    # a file that does not end in .json is still read as one
    other = tmp_path / "proxy.txt"
    other.write_text(json.dumps({"genome": "to_mean_scalar(F2g)"}))
    assert resolve_proxy(str(other)).name == "block_mean(to_mean_scalar(F2g))"


def test_unknown_name_is_a_clear_error():
    # a mistyped name is one short line with a suggestion, not the genome's list of every token (1,900 characters)
    with pytest.raises(ProxyError, match=r"unknown proxy 'synflowx'.*params, flops, snip.*did you mean 'synflow'\?$") as exc:
        resolve_proxy("synflowx")
    assert len(str(exc.value)) < 400 and "known tokens" not in str(exc.value)
    with pytest.raises(ProxyError, match=r"not a genome.*unexpected|not a genome.*unknown token 'synflowx'"):
        resolve_proxy("to_mean_scalar(synflowx)")
    # the genome's problem leads, before the list of built-ins (it used to come last, past 300 characters)
    with pytest.raises(ProxyError, match=r"^unknown proxy 'block_mean\(to_mean_scalar\(frobenius_norm\(F1\)\)': "
                                         r"not a genome \(missing '\)'.*; nor a built-in \(params, .*\) or a file$"):
        resolve_proxy("block_mean(to_mean_scalar(frobenius_norm(F1))")
    with pytest.raises(ProxyError, match="unknown proxy"):
        resolve_proxy("")
    with pytest.raises(ProxyError, match="unexpected character"):
        resolve_proxy('__import__("os")')


@pytest.mark.parametrize(
    "content, message",
    [
        (json.dumps({"jcm": 0.4}), r"no 'genome' string"),
        (json.dumps({"genome": 42}), r"no 'genome' string"),
        (json.dumps([PUBLISHED]), r"no 'genome' string"),
        (json.dumps({"genome": "block_mean(to_mean_scalar(F7))"}), r"unknown token 'F7'"),
        (json.dumps({"genome": "sigmoid(F1)"}), r"reduce each block"),
        ("{not json", r"not a JSON proxy file"),
    ],
)
def test_bad_json_files_are_clear_errors(tmp_path, content, message):
    path = tmp_path / "proxy.json"
    path.write_text(content)
    with pytest.raises(ProxyError, match=message) as info:
        resolve_proxy(str(path))
    assert str(path) in str(info.value)


#: A run's recorded split of a 10-architecture benchmark, as best.json holds it.
SPLIT = {"seed": 0, "search_fraction": 0.6, "search": [0, 2, 3, 5, 7, 8], "test": [1, 4, 6, 9]}


@pytest.mark.parametrize(
    "split, message",
    [
        (SPLIT | {"test": [1, 4, 6, 500]}, r"'split': 'search' and 'test' are no split of a benchmark"),
        (SPLIT | {"test": [-1, -2, 4]}, r"'split': 'search' and 'test' are no split"),
        (SPLIT | {"test": []}, r"'split': 'search' and 'test' are no split"),
        (SPLIT | {"test": [1, 4, 6, 9, 9]}, r"'split': 'search' and 'test' are no split"),
        (SPLIT | {"search": []}, r"'split': 'search' and 'test' are no split"),
        ({"search": [1, 2], "test": "x"}, r"'split': 'test' must be a list of architecture indices, got 'x'"),
        ({"search": [0, 1]}, r"'split': 'test' must be a list"),
        (SPLIT | {"test": [1, 4.0, 6, 9]}, r"'test' must be a list of architecture indices"),
        (SPLIT | {"seed": "x"}, r"'split': 'seed' must be an integer"),
        (SPLIT | {"search_fraction": 7}, r"'split': 'search_fraction' must be a number in \(0, 1\]"),
        ("all", r"'split' must be an object"),
        ([SPLIT], r"'split'\[0\] must name its benchmark's 'space'"),
        ([SPLIT | {"space": "pit"}, SPLIT | {"space": "af", "test": [1]}], r"'split'\[1\]: 'search' and 'test'"),
    ],
)
def test_a_proxy_file_whose_split_no_run_records_is_refused(tmp_path, split, message):
    """A hand-edited split no longer says which architectures the search saw: ``rank`` would fall back to ranking
    every architecture, in-sample, without a word; the file is refused instead, naming the field."""
    path = tmp_path / "best.json"
    path.write_text(json.dumps({"genome": PUBLISHED, "split": split}))
    with pytest.raises(ProxyError, match=message) as info:
        resolve_proxy(str(path))
    assert str(info.value).startswith(f"{path}: ") and "\n" not in str(info.value)


@pytest.mark.parametrize("split", [SPLIT, {"seed": 3}, None, SPLIT | {"search": list(range(10)), "test": [],
                                                                        "search_fraction": 1.0},
                                   [SPLIT | {"space": "pit"}, SPLIT | {"space": "autoformer"}]])
def test_a_proxy_file_whose_split_a_run_records_is_read(tmp_path, split):
    path = tmp_path / "best.json"
    path.write_text(json.dumps({"genome": PUBLISHED, "split": split}))
    assert resolve_proxy(str(path)).name == PUBLISHED


@pytest.mark.parametrize("name, message", [
    ("something-else/1", r"unknown proxy file format 'something-else/1'; this autoprox reads autoprox-ensemble/1"),
    ("autoprox-hall-of-fame", r"unknown proxy file format 'autoprox-hall-of-fame'"),
    (3, r"'format' must be a string naming a proxy file format"),
    (None, r"'format' must be a string"),
])
def test_a_genome_file_with_a_format_no_autoprox_writes_is_refused(tmp_path, name, message):
    """A ``format`` autoprox does not write is refused, not read past to the genome as if it were none."""
    path = tmp_path / "best.json"
    path.write_text(json.dumps({"genome": PUBLISHED, "format": name}))
    with pytest.raises(ProxyError, match=message):
        resolve_proxy(str(path))


def test_every_committed_proxy_file_is_read(monkeypatch):
    """The stricter checks of a proxy file's ``format`` and ``split`` refuse none of the proxy files committed
    (runs' best.json and the files they export, the packaged proxies, the test fixtures)."""
    from tests.conftest import REPO, tracked_files

    monkeypatch.chdir(REPO)
    read = 0
    for path in tracked_files("**/*.json"):
        try:
            data = json.loads(path.read_text(encoding="utf-8-sig"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            continue
        if isinstance(data, dict) and ("genome" in data or str(data.get("format")).startswith(
                ("autoprox-ensemble/", "autoprox-rank-formula/", "autoprox-weighted-formula/"))):
            resolve_proxy(str(path))
            read += 1
    assert read >= 30


def test_missing_json_file(tmp_path):
    path = tmp_path / "nowhere" / "best.json"
    with pytest.raises(ProxyError, match="proxy file not found"):
        resolve_proxy(str(path))


@pytest.fixture(scope="module")
def plan(small_spec):
    return StatsPlan(small_spec, (0,), {"c100_kd": 100})


def test_score_archs_for_builtins(af_small, session_cache, small_spec):
    plan = StatsPlan(small_spec, (0,), {"c100_kd": 100, "chaoyang_kd": 4})
    archs = af_small.archs
    params = score_archs(resolve_proxy("params"), archs, session_cache, plan)
    assert set(params) == {4, 100}
    expected = np.array([count_params(a) for a in archs], dtype=np.float64)
    np.testing.assert_array_equal(params[100], expected)
    np.testing.assert_array_equal(params[4], expected)  # the built-ins use the 100-class head
    params[4][0] = -1.0  # each class count has its own array
    assert params[100][0] == expected[0]
    flops = score_archs(resolve_proxy("flops"), archs, session_cache, plan)
    np.testing.assert_array_equal(flops[100], [count_macs(a) for a in archs])
    assert not np.array_equal(flops[100], params[100])


def test_score_archs_for_a_genome(af_small, session_cache, small_spec, plan):
    proxy = resolve_proxy(PUBLISHED)
    archs = af_small.archs[:4]
    scores = score_archs(proxy, archs, session_cache, plan)
    assert set(scores) == {100}
    with torch_threads(1):
        expected = [score_architecture(proxy.genome, session_cache.get(StatsRequest(a, small_spec, 0, 100)))
                    for a in archs]
    np.testing.assert_array_equal(scores[100], expected)
    assert np.ptp(scores[100]) > 0
    # the very numbers fitness works with, whatever the caller's thread count
    stats = load_statistics(session_cache, plan, archs)
    evaluator = FitnessEvaluator.from_statistics(stats, {"c100_kd": af_small.accuracies["c100_kd"][:4]}, ["c100_kd"], {"c100_kd": 100})
    for threads in (1, 2):
        with torch_threads(threads):
            np.testing.assert_array_equal(evaluator.architecture_scores(proxy.genome)[100], scores[100])


def test_score_archs_averages_seeds(af_small, session_cache, small_spec):
    proxy = resolve_proxy("block_mean(frobenius_norm(F1g))")
    archs = af_small.archs[:2]
    plan = StatsPlan(small_spec, (0, 1), {"c100_kd": 100})
    scores = score_archs(proxy, archs, session_cache, plan)[100]
    with torch_threads(1):
        per_seed = np.array([[score_architecture(proxy.genome, session_cache.get(StatsRequest(a, small_spec, seed, 100)))
                              for a in archs] for seed in (0, 1)])
    assert not np.allclose(per_seed[0], per_seed[1])
    np.testing.assert_array_equal(scores, (per_seed[0] + per_seed[1]) / 2)


def test_score_archs_raises_invalid_proxy(af_small, session_cache, plan):
    with pytest.raises(InvalidProxy):
        score_archs(resolve_proxy(NAN_GENOME), af_small.archs[:2], session_cache, plan)


# ------------------------------------------------------------ one path for every proxy


@pytest.mark.slow
@pytest.mark.parametrize("name", BUILTIN_PROXIES)
def test_every_registered_proxy_scores_a_tiny_benchmark(name, pit_small, session_cache, small_spec):
    """Each registered proxy (architecture, zoo, published genome) through Proxy.score, and the
    ViT search's path (its raw values per architecture, then its final scores) gives the same."""
    from autoprox.apps.vitsearch import VitSearchSettings, final_scores, raw_scores

    archs = pit_small.archs[:4]
    classes = 1 if name == "epe_nas" else 100  # EPE-NAS needs two images of one label: one class gives them
    plan = StatsPlan(small_spec, (0, 1), {"c100_kd": classes})
    proxy = resolve_proxy(name)
    scores = proxy.score(archs, session_cache, plan)
    assert set(scores) == {classes} and scores[classes].shape == (4,)
    assert np.isfinite(scores[classes]).all() and np.ptp(scores[classes]) > 0, scores
    assert score_archs(proxy, archs, session_cache, plan)[classes].tolist() == scores[classes].tolist()
    settings = VitSearchSettings(space="pit", proxy=name, batch_size=small_spec.batch_size, stat_seeds=(0, 1),
                                 cache_dir=str(session_cache.root), workers=1, classes=classes)
    outcomes = raw_scores(proxy, archs, settings, small_spec)
    assert [error for _, _, error in outcomes] == [""] * 4
    assert final_scores(proxy, [raw for raw, _, _ in outcomes]).tolist() == scores[classes].tolist()


def test_the_registries_hold_every_builtin_once():
    from autoprox.proxies.zoo import ZOO
    from autoprox.proxies.proxy import PUBLISHED, register_published_genome
    from autoprox.proxies.scorers import register_architecture_proxy

    assert BUILTIN_PROXIES == ("params", "flops", *ZOO, "autoprox_a", "autoprox_p")
    kinds = {name: resolve_proxy(name).kind for name in BUILTIN_PROXIES}
    assert {n for n, k in kinds.items() if k == "architecture"} == set(ARCHITECTURE_PROXIES)
    assert {n for n, k in kinds.items() if k == "zoo"} == set(ZOO)
    assert {n for n, k in kinds.items() if k == "genome"} == set(PUBLISHED)
    with pytest.raises(ValueError, match="already registered"):
        register_published_genome("snip", PUBLISHED["autoprox_a"].genome, "a clash with the zoo")
    with pytest.raises(ValueError, match="already registered"):
        register_architecture_proxy("params", "again")(lambda arch, num_classes=100: 0)


def test_a_registered_architecture_proxy_is_scored_like_the_builtins(af_small, session_cache, small_spec):
    from autoprox.proxies.scorers import ARCHITECTURE_PROXIES as registry
    from autoprox.proxies.scorers import register_architecture_proxy

    @register_architecture_proxy("test_depth", "the number of blocks")
    def depth(arch, num_classes=100):
        return sum(arch.depths)

    try:
        archs = af_small.archs[:5]
        plan = StatsPlan(small_spec, (0,), {"c100_kd": 100, "chaoyang_kd": 4})
        scores = resolve_proxy("test_depth").score(archs, session_cache, plan)
        assert scores[100].tolist() == scores[4].tolist() == [float(sum(a.depths)) for a in archs]
    finally:
        registry.unregister("test_depth")


def test_unknown_proxy_objects_are_refused_clearly():
    with pytest.raises(ProxyError, match="unknown proxy 'nonesuch'"):
        Proxy("nonesuch").kind
    with pytest.raises(ProxyError, match="unknown proxy 'nonesuch'"):
        Proxy("x", zoo="nonesuch").score([], None, None)


#: The 278-character genome of runs/ablation/autoformer-free-gene-arch-cv/hall_of_fame.json (issue 11, bug 1).
LONG_GENOME = ("block_sum(element_wise_product(element_wise_sum(element_wise_sum(element_wise_sum(element_wise_sum("
               "A_log_heads, to_std_scalar(min_max_normalize(F1))), A_depth), element_wise_sum(element_wise_sum("
               "A_log_heads, to_std_scalar(min_max_normalize(F1))), A_depth)), A_depth), A_params))")


def test_a_genome_longer_than_a_file_name_is_a_genome_everywhere(capsys, tmp_path, af_small_file, session_cache):
    """rank, export and --seed-proxies probed the genome text as a path: OSError File name too long."""
    from pathlib import Path

    from autoprox.cli.main import main

    assert len(LONG_GENOME) == 278
    hall = REPO / "runs/ablation/autoformer-free-gene-arch-cv/hall_of_fame.json"
    if hall.is_file():
        assert LONG_GENOME in hall.read_text()
    assert resolve_proxy(LONG_GENOME).name == LONG_GENOME
    assert resolve_proxy(LONG_GENOME + " ").name == LONG_GENOME

    code = main(["rank", "--proxy", LONG_GENOME, "--bench", str(af_small_file), "--json", "--batch-size", "2",
                 "--cache-dir", str(session_cache.root), "--targets", "c100_kd"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert json.loads(out)["c100_kd"]["n"] == 16

    target = tmp_path / "long.py"
    code = main(["export", LONG_GENOME, "--out", str(target), "--no-simplify"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert LONG_GENOME in target.read_text()

    # a free tree cannot seed the template search: one line saying so, not a traceback
    code = main(["search", "--bench", str(af_small_file), "--seed-proxies", LONG_GENOME, "--out", str(tmp_path / "run"),
                 "--iterations", "1", "--cache-dir", str(session_cache.root), "--batch-size", "2"])
    out, err = capsys.readouterr()
    assert code == 2 and err.startswith("autoprox: error:") and "template's shape" in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "run").exists()


@pytest.mark.parametrize("space", ["autoformer", "pit"])
def test_a_genome_of_architecture_terminals_alone_is_scored_without_statistics(space, af_small, pit_small,
                                                                               session_cache, small_spec, tmp_path):
    """Such a genome (every fold search of the selected AutoFormer configuration found one) gets the
    values its statistics path gives, from the block count alone: no network pass, no cache entry."""
    from autoprox.data.cache import StatisticsCache
    from autoprox.genome.tree import reads_statistics
    from autoprox.networks.models import build_model
    from autoprox.networks.runtime import find_blocks
    from autoprox.spaces.architectures import transformer_widths
    from autoprox.spaces.descriptors import terminal_values

    bench = af_small if space == "autoformer" else pit_small
    archs = bench.archs[:3]
    genome = ("block_sum(to_mean_scalar(element_wise_product(sigmoid(element_wise_exp(A_depth)), "
              "element_wise_sqrt(frobenius_norm(A_width)))))")
    proxy = resolve_proxy(genome)
    assert not proxy.needs_statistics and not reads_statistics(proxy.genome)
    assert resolve_proxy(PUBLISHED).needs_statistics
    empty = StatisticsCache(tmp_path / "cache")
    plan = StatsPlan(small_spec, (0, 1), {"c100_kd": 100})
    scores = score_archs(proxy, archs, empty, plan)[100]
    assert not any((tmp_path / "cache").rglob("*.npz"))  # nothing computed, nothing cached
    with torch_threads(1):
        expected = [score_architecture(proxy.genome, session_cache.get(StatsRequest(a, small_spec, 0, 100)),
                                       terminal_values(a)) for a in archs]
    np.testing.assert_array_equal(scores, expected)  # block_sum: the block count matters, and is the pass's
    for arch in archs:
        assert len(transformer_widths(arch)) == len(find_blocks(build_model(arch, num_classes=100, seed=0)))
