"""Exact speed levers: statistics held as stored, scalar subtrees memoised, the same numbers.

Every lever here must leave results bitwise unchanged: the committed runs reproduce
their figures to the last digit and a search makes the same proxies.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from autoprox.data.cache import StatsPlan, StatsRequest, load_statistics
from autoprox.data.entries import EncodedBlock
from autoprox.genome.free import random_tree
from autoprox.genome.memo import SubtreeMemo
from autoprox.genome.tree import InvalidProxy, parse_genome, score_architecture
from autoprox.genome.template import mutate_template, random_template
from autoprox.core.errors import GenomeError
from autoprox.genome.space import GenomeSpace
from autoprox.networks.statistics import STAT_NAMES
from autoprox.search.context import stats_plan
from autoprox.search.engine import run_search
from autoprox.search.evolution import EvolutionConfig
from autoprox.search.fitness import FitnessEvaluator
from autoprox.search.settings import SearchSettings
from autoprox.spaces.descriptors import terminal_values
from tests.genome_corpus import best_genomes
from tests.conftest import REPO

pytestmark = pytest.mark.slow

DATA = REPO / "tests" / "fixtures" / "speed"
TARGETS = ("c100_kd", "flower_kd", "chaoyang_kd", "imagenet_super")
ALL_100 = {t: 100 for t in TARGETS}


def committed_genomes() -> list[str]:
    return best_genomes()


def _outcome(tree, stats, terminals, memo=None):
    """The score's bits, or the reason the proxy is invalid."""
    try:
        return ("value", struct_bits(score_architecture(tree, stats, terminals, memo)))
    except (InvalidProxy, GenomeError) as exc:
        return ("invalid", str(exc))


def struct_bits(value: float) -> str:
    return "nan" if math.isnan(value) else float(value).hex()


@pytest.mark.parametrize("bench_name", ["af_small", "pit_small"])
def test_encoded_statistics_decode_to_the_float32_tensors(request, session_cache, small_spec, bench_name):
    bench = request.getfixturevalue(bench_name)
    arch = bench.archs[0]
    plain = session_cache.get(StatsRequest(arch, small_spec, 0, 100))
    encoded = session_cache.get(StatsRequest(arch, small_spec, 0, 100), encoded=True)
    assert all(isinstance(block, EncodedBlock) for block in encoded)
    held = sum(block.nbytes for block in encoded)
    assert held * 2 == sum(t.numel() * 4 for block in plain for t in block.values())  # float16: half
    for plain_block, encoded_block in zip(plain, encoded):
        assert list(encoded_block) == list(plain_block)
        for name, tensor in plain_block.items():
            decoded = encoded_block[name]
            assert decoded.dtype == torch.float32 and decoded.shape == tensor.shape
            assert torch.equal(decoded.view(torch.int32), tensor.view(torch.int32))


@pytest.mark.parametrize("bench_name", ["af_small", "pit_small"])
def test_every_committed_proxy_scores_bitwise_the_same_on_encoded_statistics(request, session_cache, small_spec,
                                                                              bench_name):
    bench = request.getfixturevalue(bench_name)
    archs = bench.archs[:3]
    plan = StatsPlan(small_spec, (0,), ALL_100).with_extras(("spread",))  # for genomes with spread terminals
    plain = load_statistics(session_cache, plan, archs, encoded=False)[(0, 100)]
    encoded = load_statistics(session_cache, plan, archs)[(0, 100)]
    genomes = committed_genomes()
    assert len(genomes) >= 10
    valid = 0
    for genome in genomes:
        tree = parse_genome(genome)
        for arch, a, b in zip(archs, plain, encoded):
            terminals = terminal_values(arch, 100)
            expected = _outcome(tree, a, terminals)
            assert _outcome(tree, b, terminals) == expected, genome
            assert _outcome(tree, b, terminals, SubtreeMemo(len(b))) == expected, genome
            valid += expected[0] == "value"
    assert valid > len(genomes)  # most committed proxies are valid on these architectures


@pytest.fixture(scope="module")
def af_stats(session_cache, small_spec, af_small):
    plan = StatsPlan(small_spec, (0,), ALL_100)
    return load_statistics(session_cache, plan, af_small.archs[:6])


def test_subtree_memo_gives_bitwise_identical_records(af_stats, af_small):
    accuracies = {t: af_small.accuracies[t][:6] for t in TARGETS}
    terminals = [terminal_values(a, 100) for a in af_small.archs[:6]]
    memoised = FitnessEvaluator.from_statistics(af_stats, accuracies, TARGETS, ALL_100, terminals=terminals)
    plain = FitnessEvaluator.from_statistics(af_stats, accuracies, TARGETS, ALL_100, terminals=terminals, subtree_memo=False)
    rng = random.Random(12)
    free_space = GenomeSpace("free", ("block_mean", "block_sum"), arch_terminals=True)
    trees, tree = [], random_template(rng)
    for index in range(240):
        # Children of earlier genomes share their branches, as in a search.
        tree = mutate_template(tree, rng) if index % 4 else random_template(rng)
        trees.append(tree)
    trees += [random_tree(rng, free_space) for _ in range(120)]
    hits = 0
    for tree in trees:
        before = sum(v is not None for m in memoised.evaluator.subtree_memos[(0, 100)] for vs in m.table.values() for v in vs)
        a, b = memoised.evaluate(tree).to_json(), plain.evaluate(tree).to_json()
        assert json.dumps(a) == json.dumps(b)
        after = sum(v is not None for m in memoised.evaluator.subtree_memos[(0, 100)] for vs in m.table.values() for v in vs)
        hits += after == before and a["valid"]
    assert hits > 0  # some genomes were answered from kept subtrees
    assert any(memo.table for memo in memoised.evaluator.subtree_memos[(0, 100)])


@pytest.mark.parametrize("threads", [2, 4])
def test_scoring_threads_give_bitwise_identical_records_and_the_same_first_failure(af_stats, af_small, threads):
    """Architectures scored side by side in threads: every record (figures, validity and the reason of
    an invalid genome, which names the first architecture that failed) is the one-thread record."""
    accuracies = {t: af_small.accuracies[t][:6] for t in TARGETS}
    terminals = [terminal_values(a, 100) for a in af_small.archs[:6]]
    threaded = FitnessEvaluator.from_statistics(af_stats, accuracies, TARGETS, ALL_100, terminals=terminals, threads=threads)
    single = FitnessEvaluator.from_statistics(af_stats, accuracies, TARGETS, ALL_100, terminals=terminals)
    rng = random.Random(21)
    free_space = GenomeSpace("free", ("block_mean", "block_sum"), arch_terminals=True)
    trees = [random_template(rng) for _ in range(60)] + [random_tree(rng, free_space) for _ in range(60)]
    valid = 0
    try:
        for tree in trees:
            a, b = threaded.evaluate(tree).to_json(), single.evaluate(tree).to_json()
            assert json.dumps(a) == json.dumps(b)
            valid += a["valid"]
    finally:
        threaded.close()
    assert 0 < valid < len(trees)  # both valid and invalid genomes were compared


def test_subtree_memo_is_bounded(af_stats):
    memo = SubtreeMemo(len(af_stats[(0, 100)][0]), limit=3)
    rng = random.Random(5)
    for _ in range(30):
        _outcome(random_template(rng), af_stats[(0, 100)][0], None, memo)
        assert len(memo.table) <= 6  # the limit, or one template genome's own scalar subtrees (at most 6)


def _records(path: Path) -> list[dict]:
    return [{k: v for k, v in json.loads(line).items() if k != "elapsed"} for line in path.read_text().splitlines()]


def _short_search(af_small_file, session_cache, out: Path, kind: str, workers: int) -> SearchSettings:
    """The short search the recorded logs of ``tests/fixtures/speed`` were made with; returns its settings."""
    genome = {} if kind == "template" else {"kind": "free", "aggregations": ["block_mean"], "arch_terminals": False}
    settings = SearchSettings(
        bench=str(af_small_file), batch_size=2, cache_dir=str(session_cache.root), workers=workers,
        search_fraction=0.75,
        evolution=EvolutionConfig(population_size=6, iterations=10, retry_cap=4, top_k=2, seed=3), genome=genome,
    )
    run_search(settings, out, quiet=True)
    return settings


def statistics_digest(settings: SearchSettings, session_cache, archs) -> str:
    """What names this machine's statistics of the short search: the SHA-256 of their bytes as the cache holds
    them. It chooses which recording applies (the one made from these very statistics), and is never compared
    as a result: the search's records are compared field by field."""
    plan = stats_plan(settings, TARGETS)
    stats = load_statistics(session_cache, plan, archs, encoded=False)
    digest = hashlib.sha256()
    for key in sorted(stats):
        for blocks in stats[key]:
            for block in blocks:
                for name in sorted(block):
                    digest.update(name.encode() + block[name].to(torch.float16).numpy().tobytes())
    return digest.hexdigest()[:16]


def recording_for(capability: str, digest: str) -> Path | None:
    """The recording of ``tests/fixtures/speed`` made from statistics like this machine's: the folder whose
    ``machine.json`` names ``digest``, else a folder of this capability recorded before digests were kept
    (``statistics`` null) whose machine this one may be, else none."""
    folders = [(json.loads((f / "machine.json").read_text()), f) for f in sorted(DATA.iterdir())
               if (f / "machine.json").is_file()]
    for machine, folder in folders:
        if machine["statistics"] == digest:
            return folder
    for machine, folder in folders:
        if machine["statistics"] is None and machine["capability"] == capability:
            return folder
    return None


@pytest.mark.parametrize("kind,workers", [("template", 1), ("free", 1), ("template", 2)])
def test_a_short_search_makes_the_log_recorded_before_the_speed_levers(af_small, af_small_file, session_cache,
                                                                        tmp_path, kind, workers):
    """``tests/fixtures/speed/<machine>/<kind>``: the logs of this search made by the code before statistics
    were held encoded and subtrees memoised (commit 52875c2), and before architectures were scored in
    ``workers`` threads side by side, from the same statistics as this machine's. torch's kernels round
    differently from one processor to another (AVX2 and AVX512, and two AVX512 processors too), a
    statistic's float16 then moves a step, and a near tie in a Kendall flips: so each recording names the
    statistics it was made from (``machine.json``), and a machine whose statistics no recording was made
    from skips the replay, saying how to record one. The levers are checked on every machine by the
    bitwise tests above and the threads test below."""
    capability = torch.backends.cpu.get_cpu_capability().lower()
    settings = _short_search(af_small_file, session_cache, tmp_path / kind, kind, workers)
    digest = statistics_digest(settings, session_cache, af_small.archs)
    folder = recording_for(capability, digest)
    if folder is None:
        pytest.skip(f"no log recorded from statistics like this machine's ({capability}, statistics {digest}); "
                    "tests/fixtures/speed/README.md says how to record one")
    recorded = folder / kind
    pinned = json.loads((folder / "machine.json").read_text())["statistics"] == digest
    for name in ("log.jsonl", "evaluations.jsonl"):
        made, expected = _records(tmp_path / kind / name), _records(recorded / name)
        # Pearson's r is NumPy's sum of products, whose last bit follows the BLAS kernel the processor
        # picks (two AVX512 machines differ there); everything the search decides on is compared exactly.
        for record in made:
            record["pearson"] = record.get("pearson") or {}
        for record in expected:
            record["pearson"] = pytest.approx(record.get("pearson") or {}, rel=1e-12, abs=1e-15)
        if not pinned and made != expected:  # a recording without a digest may be another machine's statistics
            pytest.skip(f"{folder.name}/ (recorded before digests were kept) is not this machine's ({capability}, "
                        f"statistics {digest}): {name} differs; tests/fixtures/speed/README.md says how to record one")
        assert made == expected, name


def test_a_short_search_in_two_threads_makes_the_log_of_one(af_small_file, session_cache, tmp_path):
    """On any machine: scoring architectures in two threads side by side changes nothing the search records
    (the statistics are this machine's in both, so the logs agree exactly, Pearson's r to its last bits)."""
    for workers in (1, 2):
        _short_search(af_small_file, session_cache, tmp_path / f"w{workers}", "template", workers)
    for name in ("log.jsonl", "evaluations.jsonl"):
        one, two = _records(tmp_path / "w1" / name), _records(tmp_path / "w2" / name)
        for record in two:
            record["pearson"] = pytest.approx(record.get("pearson") or {}, rel=1e-12, abs=1e-15)
        for record in one:
            record["pearson"] = record.get("pearson") or {}
        assert len(one) >= 10 and one == two, name


def test_torch_decoding_equals_the_numpy_reference_at_every_exponent():
    from autoprox.data.entries import decode_array, decode_array_numpy

    array = np.arange(2**16, dtype=np.uint32).astype(np.uint16).view(np.float16)  # every float16
    array = array[np.isfinite(array)]  # a scaled entry holds finite values only
    with np.errstate(over="ignore"):
        pairs = [(e, decode_array_numpy(array, e)) for e in range(-160, 140)]
    for exponent, expected in pairs:
        with np.errstate(over="ignore"):
            got = decode_array(array, exponent).numpy()
        assert np.array_equal(got.view(np.int32), expected.view(np.int32)), exponent


# ----------------------------------------------------------------------------- devices


def test_cpu_device_keeps_keys_and_numbers(af_small, small_spec):
    from autoprox.data.cache import cache_key
    from autoprox.networks.statistics import InputSpec, compute_statistics

    arch = af_small.archs[0]
    explicit = InputSpec("gaussian", 2, device="cpu")
    assert explicit == small_spec and "device" not in explicit.describe() and "device" not in explicit.to_json()
    assert cache_key(StatsRequest(arch, explicit, 0, 100), "float16") == cache_key(
        StatsRequest(arch, small_spec, 0, 100), "float16")
    accelerated = InputSpec("gaussian", 2, device="cuda")
    assert accelerated.describe()["device"] == "cuda" and InputSpec(**accelerated.to_json()) == accelerated
    assert cache_key(StatsRequest(arch, accelerated, 0, 100), "float16") != cache_key(
        StatsRequest(arch, small_spec, 0, 100), "float16")
    a = compute_statistics(arch, explicit, 0, 100)
    b = compute_statistics(arch, small_spec, 0, 100)
    assert all(torch.equal(x[n], y[n]) and x[n].device.type == "cpu" for x, y in zip(a, b) for n in x)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_without_cuda_is_a_one_line_config_error(tmp_path, capsys, monkeypatch):
    from autoprox.core.errors import ConfigError
    from autoprox.networks.statistics import InputSpec, resolve_device
    from tests.commands import run_cli

    with pytest.raises(ConfigError, match="CUDA is not available"):
        resolve_device("cuda")
    with pytest.raises(ConfigError, match="unknown device"):
        InputSpec(device="tpu")
    monkeypatch.chdir(REPO)  # the command, from the checkout, in this process (no fresh interpreter's imports)
    code, _, err = run_cli(capsys, "rank", "--space", "autoformer", "--device", "cuda", "--proxy", "params",
                           "--cache-dir", tmp_path)
    assert code == 2, err
    lines = [line for line in err.splitlines() if line.startswith("autoprox: error:")]
    assert len(lines) == 1 and "--device cuda" in lines[0] and "Traceback" not in err


def test_mapped_statistics_are_the_stored_ones_and_a_flipped_byte_is_caught(af_small, small_spec, session_cache,
                                                                              tmp_path):
    from autoprox.data.cache import StatisticsCache
    from autoprox.data.entries import CacheCorrupt, decode_entry

    request = StatsRequest(af_small.archs[1], small_spec, 0, 100)
    plain = session_cache.get(request)
    mapped = session_cache.get(request, encoded=True, mapped=True)
    for plain_block, mapped_block in zip(plain, mapped):
        for name, tensor in plain_block.items():
            assert torch.equal(mapped_block[name].view(torch.int32), tensor.view(torch.int32))
    copy = StatisticsCache(tmp_path)
    copy.save(request, plain)
    path = copy.path(request)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x40  # inside an array's bytes
    path.write_bytes(bytes(data))
    with pytest.raises(CacheCorrupt):
        decode_entry(path, copy.key(request), encoded=True, mapped=True)


# ------------------------------------------------------------------ a bug must not delete the cache


@pytest.mark.parametrize("mapped", [False, True])
def test_a_bug_in_the_decoder_propagates_and_deletes_nothing(af_small, small_spec, session_cache, tmp_path,
                                                             monkeypatch, mapped):
    """Only what a damaged file raises marks an entry corrupt (and deletes it); a TypeError
    of the decoder is a bug: it propagates, and the good entry stays as it was."""
    import autoprox.data.entries as cache_module
    from autoprox.data.cache import StatisticsCache
    from autoprox.data.entries import decode_entry

    request = StatsRequest(af_small.archs[2], small_spec, 0, 100)
    copy = StatisticsCache(tmp_path)
    path = copy.save(request, session_cache.get(request))
    good = path.read_bytes()

    def broken_decode(array, exponent):
        raise TypeError("a bug in the decoder")

    monkeypatch.setattr(cache_module, "decode_array", broken_decode)
    with pytest.raises(TypeError, match="a bug in the decoder"):
        copy.load(request)
    with pytest.raises(TypeError, match="a bug in the decoder"):
        copy.get(request)
    stats = copy.load(request, encoded=True, mapped=mapped)  # kept as stored: decoded only when read
    with pytest.raises(TypeError, match="a bug in the decoder"):
        stats[0]["F1"]
    with pytest.raises(TypeError, match="a bug in the decoder"):
        decode_entry(good, copy.key(request))
    assert path.read_bytes() == good  # nothing deleted or rewritten
    monkeypatch.undo()
    assert all(torch.equal(a[n], b[n]) for a, b in zip(copy.load(request), session_cache.get(request)) for n in a)


def test_metadata_of_the_wrong_shape_is_a_corrupt_entry_not_a_type_error(af_small, small_spec):
    from autoprox.data.entries import STATS_VERSION, CacheCorrupt, decode_entry

    key = "k" * 64
    for meta in ({"key": key, "version": STATS_VERSION, "blocks": "1", "shapes": {}, "exponents": {}},
                 {"key": key, "version": STATS_VERSION, "blocks": 1, "shapes": [], "exponents": {}},
                 {"key": key, "version": STATS_VERSION, "blocks": 1, "shapes": {"b0_F1": [2]},
                  "exponents": {"b0_F1": "3"}}):
        buffer = io.BytesIO()
        np.savez(buffer, meta=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8),
                 **{f"b0_{n}": np.zeros(2, dtype=np.float16) for n in STAT_NAMES})
        with pytest.raises(CacheCorrupt):
            decode_entry(buffer.getvalue(), key)


def test_large_searches_memory_map_their_statistics_and_score_the_same(af_stats, af_small, session_cache, small_spec):
    """Above MAP_STATISTICS_ABOVE architectures a search memory-maps its statistics; the mapped
    statistics give bitwise the records the held ones give."""
    from autoprox.search.space_evaluator import MAP_STATISTICS_ABOVE, hold_mapped

    assert not hold_mapped(100) and not hold_mapped(MAP_STATISTICS_ABOVE) and hold_mapped(MAP_STATISTICS_ABOVE + 1)
    assert hold_mapped(80, 3) and not hold_mapped(60, 3)  # sets, not architectures: seeds count
    mapped = load_statistics(session_cache, StatsPlan(small_spec, (0,), ALL_100), af_small.archs[:6], mapped=True)
    accuracies = {t: af_small.accuracies[t][:6] for t in TARGETS}
    terminals = [terminal_values(a, 100) for a in af_small.archs[:6]]
    held = FitnessEvaluator.from_statistics(af_stats, accuracies, TARGETS, ALL_100, terminals=terminals)
    maps = FitnessEvaluator.from_statistics(mapped, accuracies, TARGETS, ALL_100, terminals=terminals)
    rng = random.Random(5)
    for _ in range(12):
        tree = random_template(rng, GenomeSpace(aggregations=("block_mean", "block_sum"), arch_terminals=True))
        assert held.evaluate(tree).to_json() == maps.evaluate(tree).to_json()
