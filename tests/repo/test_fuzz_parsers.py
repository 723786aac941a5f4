"""Property-based tests (hypothesis) of every parser of outside input.

Genome strings, benchmark files (JSON Lines, JSON, ``.pth`` written by ``torch.save``),
run files (``config.json``, ``best.json``, ``hall_of_fame.json``, ``checkpoint.json``,
``log.jsonl``, ``evaluations.jsonl``) and statistics cache entries (``.npz`` bytes):
each generated input either parses to what it should or raises the project's
:class:`~autoprox.core.errors.AutoproxError`, never another exception (a cache entry
is never an error: it is recomputed with a warning).

The budget is bounded: the ``ci`` profile (the default) runs 60 derandomised examples
per test, so the file takes well under a minute and never flakes;
``AUTOPROX_FUZZ_PROFILE=thorough`` runs 2000 random ones per test.
"""

from __future__ import annotations

import io
import json
import math
import os
import random
import shutil
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autoprox.core.errors import AutoproxError, GenomeError
from autoprox.data.benchmark import (
    ACCURACY_RANGE,
    MIN_ARCHITECTURES,
    load_benchmark,
    write_benchmark_jsonl,
)
from autoprox.data.cache import StatisticsCache, StatsRequest
from autoprox.data.entries import CacheCorrupt, decode_entry, encode_entry
from autoprox.genome.tree import canonical_string, genome_to_string, parse_genome
from autoprox.genome.template import random_template
from autoprox.networks.statistics import STAT_NAMES
from autoprox.search.context import RunContext
from autoprox.search.evolution import EvolutionState
from autoprox.search.halloffame import HallOfFame, load_hall_of_fame
from autoprox.search.rundir import RunDirectory
from autoprox.search.settings import SearchSettings
from autoprox.spaces.architectures import arch_key, arch_to_config

pytestmark = [pytest.mark.fuzz, pytest.mark.slow]

_COMMON = dict(deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                                    HealthCheck.function_scoped_fixture])
settings.register_profile("ci", max_examples=60, derandomize=True, **_COMMON)
settings.register_profile("thorough", max_examples=2000, **_COMMON)
FUZZ = settings(settings.get_profile(os.environ.get("AUTOPROX_FUZZ_PROFILE", "ci")))

# ------------------------------------------------------------------------------ strategies
JSON_SCALARS = (st.none() | st.booleans() | st.integers(-10**12, 10**12) | st.floats(allow_nan=True, allow_infinity=True)
                | st.text(max_size=12))
JSON_VALUES = st.recursive(JSON_SCALARS, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=10), inner, max_size=4), max_leaves=16)
ACCURACIES = st.one_of(st.floats(0, 100), st.floats(0, 100), st.none(), st.integers(-5, 105),
                       st.floats(allow_nan=True, allow_infinity=True), st.booleans(), st.text(max_size=4))


def _files() -> Path:
    """A fresh folder per example (hypothesis calls a test many times with one fixture)."""
    return Path(tempfile.mkdtemp(prefix="autoprox-fuzz-"))


@pytest.fixture(scope="module")
def pit_configs(pit_bench) -> list[dict]:
    return [arch_to_config(a) for a in pit_bench.archs]


@st.composite
def mutated(draw, value):
    """``value`` (a JSON-like structure) with one part replaced by an arbitrary JSON value, or removed."""
    value = json.loads(json.dumps(value))
    if not isinstance(value, (dict, list)) or not value or draw(st.booleans()):
        return draw(JSON_VALUES) if draw(st.integers(0, 3)) == 0 else value
    path, node = [], value
    while isinstance(node, (dict, list)) and node:
        key = draw(st.sampled_from(sorted(node) if isinstance(node, dict) else range(len(node))))
        path.append(key)
        if draw(st.booleans()) or not isinstance(node[key], (dict, list)) or not node[key]:
            break
        node = node[key]
    parent = value
    for key in path[:-1]:
        parent = parent[key]
    if isinstance(parent, dict) and draw(st.booleans()):
        del parent[path[-1]]
    else:
        parent[path[-1]] = draw(JSON_VALUES)
    return value


# ------------------------------------------------------------------------------ genomes
GENOME_TOKENS = ["block_mean", "block_sum", "to_mean_scalar", "element_wise_sum", "element_wise_product",
                 "matrix_multiplication", "frobenius_norm", "sigmoid", "no_op", "element_wise_log", "F1", "F2g",
                 "F4", "A_params", "(", ")", ",", " ", "x", "1.5", "((", "))"]


@FUZZ
@given(st.one_of(st.text(max_size=80), st.lists(st.sampled_from(GENOME_TOKENS), max_size=40).map("".join)))
def test_genome_strings_parse_or_raise_genome_error(text):
    try:
        tree = parse_genome(text)
    except GenomeError:
        return
    again = parse_genome(genome_to_string(tree))  # what parses prints back to an equal genome
    assert canonical_string(again) == canonical_string(tree)


@FUZZ
@given(st.integers(0, 2**32), st.data())
def test_valid_genomes_round_trip_and_their_damaged_copies_are_refused_cleanly(seed, data):
    text = genome_to_string(random_template(random.Random(seed)))
    assert genome_to_string(parse_genome(text)) == text
    position = data.draw(st.integers(0, len(text)))
    damaged = text[:position] + data.draw(st.sampled_from(["", "(", ")", ",", "F9", "(" * 200])) + \
        text[position + data.draw(st.integers(0, 3)):]
    try:
        parse_genome(damaged)
    except GenomeError:
        pass


# ------------------------------------------------------------------------------ benchmark files
def _check_parsed(bench) -> None:
    """What any successfully parsed benchmark must be."""
    assert len(bench) >= MIN_ARCHITECTURES
    assert len({arch_key(a) for a in bench.archs}) == len(bench)
    low, high = ACCURACY_RANGE
    for values in bench.accuracies.values():
        measured = values[~np.isnan(values)]
        assert np.all((measured >= low) & (measured <= high))


@st.composite
def benchmark_entries(draw, configs):
    """Entries that are valid, or damaged in any of the ways a hand-edited file can be."""
    count = draw(st.integers(0, 7))
    chosen = draw(st.lists(st.sampled_from(range(len(configs))), min_size=count, max_size=count))
    entries = []
    for index in chosen:
        entry = {"arch": configs[index], "c100_kd_acc": draw(ACCURACIES)}
        if draw(st.booleans()):
            entry["flower_kd_acc"] = draw(ACCURACIES)
        if draw(st.integers(0, 5)) == 0:
            entry = draw(mutated(entry))
        entries.append(entry)
    return entries


def _jsonl(entries, junk: str | None) -> str:
    lines = [json.dumps(e) for e in entries]
    if junk is not None:
        lines.insert(len(lines) // 2, junk)
    return "\n".join(lines) + "\n"


@FUZZ
@given(st.data())
def test_jsonl_benchmarks_parse_or_raise_benchmark_error(pit_configs, data):
    entries = data.draw(benchmark_entries(pit_configs))
    junk = data.draw(st.one_of(st.none(), st.text(max_size=30), st.just("[" * 50_000 + "]" * 50_000)))
    folder = _files()
    try:
        path = folder / "bench.jsonl"
        path.write_bytes(_jsonl(entries, junk).encode("utf-8", errors="replace"))  # lone surrogates as "?"
        try:
            bench = load_benchmark(path)
        except AutoproxError:
            return
        _check_parsed(bench)
    finally:
        shutil.rmtree(folder)


@FUZZ
@given(st.data())
def test_valid_jsonl_benchmarks_parse_to_their_values(pit_configs, data):
    indices = data.draw(st.lists(st.integers(0, len(pit_configs) - 1), min_size=3, max_size=8, unique=True))
    values = data.draw(st.lists(st.one_of(st.floats(0, 100), st.none()), min_size=len(indices), max_size=len(indices)))
    entries = [{"arch": pit_configs[i], "c100_kd_acc": v} for i, v in zip(indices, values)]
    folder = _files()
    try:
        path = folder / "bench.jsonl"
        path.write_text(_jsonl(entries, None))
        bench = load_benchmark(path)
        assert [arch_to_config(a) for a in bench.archs] == [pit_configs[i] for i in indices]
        expected = np.array([math.nan if v is None else v for v in values])
        np.testing.assert_array_equal(bench.accuracies["c100_kd"], expected)
        write_benchmark_jsonl(bench, folder / "again.jsonl")
        np.testing.assert_array_equal(load_benchmark(folder / "again.jsonl").accuracies["c100_kd"], expected)
    finally:
        shutil.rmtree(folder)


PTH_VALUES = st.recursive(st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats() | st.text(max_size=8),
                          lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner,
                                                                                      max_size=4)
                          | st.tuples(inner, inner), max_leaves=12)


@FUZZ
@given(st.data())
def test_pth_benchmarks_from_torch_save_parse_or_raise_benchmark_error(pit_configs, data):
    shape = data.draw(st.sampled_from(["entries", "anything", "bytes"]))
    folder = _files()
    try:
        path = folder / "bench.pth"
        if shape == "entries":
            torch.save(data.draw(benchmark_entries(pit_configs)), path)
        elif shape == "anything":
            torch.save(data.draw(PTH_VALUES), path)
        else:
            path.write_bytes(data.draw(st.binary(max_size=300)))
        try:
            bench = load_benchmark(path)
        except AutoproxError:
            return
        _check_parsed(bench)
    finally:
        shutil.rmtree(folder)


# ------------------------------------------------------------------------------ run files
@pytest.fixture(scope="module")
def run_template(af_small_file, tmp_path_factory) -> dict:
    """The files of a real (tiny, not searched) run: its config.json, and record shapes for the others."""
    context = RunContext.from_settings(SearchSettings(bench=str(af_small_file), batch_size=2, search_fraction=0.75))
    genome = "block_mean(to_mean_scalar(element_wise_sum(frobenius_norm(F2), sigmoid(F4g))))"
    record = {"genome": genome, "canonical": canonical_string(parse_genome(genome)), "valid": True, "jcm": 0.25,
              "kendall": {"c100_kd": 0.25}, "spearman": {"c100_kd": 0.3}, "pearson": {"c100_kd": 0.2}, "reason": ""}
    rng = random.Random(0)
    checkpoint = {"iteration": 2, "population": [record, dict(record, jcm=0.1)],
                  "rng_state": [3, list(rng.getstate()[1]), None], "evaluations": 5, "invalid": 1, "elapsed": 1.5}
    hall = HallOfFame()
    hall.consider(dict(record, iteration=1), 1)
    log = {"iteration": 1, "best_jcm": 0.25, "mean_jcm": 0.2, "best_kendall": {"c100_kd": 0.25},
           "best_genome": genome, "accepted": True, "attempts": 2, "evaluations": 2, "invalid": 0}
    return {"config": context.config_json(), "bench": af_small_file, "record": record, "checkpoint": checkpoint,
            "hall": hall.to_json(), "log": log, "best": {"genome": genome, "search": {"jcm": 0.25}, "test": {},
                                                          "split": context.split.to_json(), "finished": True}}


def _run_folder(template: dict, **files: str) -> Path:
    folder = _files()
    shutil.copyfile(template["bench"], folder / Path(template["bench"]).name)
    run = folder / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps(template["config"]))
    for name, text in files.items():
        (run / name.replace("_json", ".json").replace("_jsonl", ".jsonl")).write_text(text)
    return run


def _json_text(data, value) -> str:
    """``value`` as JSON text, sometimes damaged the way hand edits and torn writes damage it."""
    text = json.dumps(value)
    damage = data.draw(st.integers(0, 5))
    if damage == 0:
        return text[: data.draw(st.integers(0, len(text)))]
    if damage == 1:
        return data.draw(st.text(max_size=40))
    return text


@FUZZ
@given(st.data())
def test_config_json_opens_or_raises(run_template, data):
    config = data.draw(mutated(run_template["config"]))
    run = _run_folder(run_template)
    try:
        (run / "config.json").write_text(_json_text(data, config))
        try:
            context = RunContext.open(run)
        except AutoproxError:
            return
        assert context.bench.sha256 == run_template["config"]["benchmark"]["sha256"]
        assert len(context.split.search) + len(context.split.test) == len(context.bench)
    finally:
        shutil.rmtree(run.parent)


@FUZZ
@given(st.data())
def test_checkpoint_json_reads_or_raises(run_template, data):
    checkpoint = data.draw(mutated(run_template["checkpoint"]))
    try:
        state = EvolutionState.from_json(checkpoint)
    except AutoproxError:
        return
    assert state.population and all(isinstance(m.jcm, float) or isinstance(m.jcm, int) for m in state.population)
    assert state.iteration >= 0
    from autoprox.search.evolution import rng_from_json

    rng_from_json(state.rng_state).random()


@FUZZ
@given(st.data())
def test_hall_of_fame_json_reads_or_raises(run_template, data):
    hall = data.draw(mutated(run_template["hall"]))
    try:
        loaded = HallOfFame.from_json(hall)
    except AutoproxError:
        pass
    else:
        assert all(isinstance(e.genome, str) and math.isfinite(e.jcm) for e in loaded.entries)
    run = _run_folder(run_template, hall_of_fame_json=_json_text(data, hall))
    try:
        try:
            load_hall_of_fame(run)  # the file, or rebuilt from the (absent) evaluations
        except AutoproxError:
            pass
    finally:
        shutil.rmtree(run.parent)


@FUZZ
@given(st.data())
def test_log_and_evaluations_jsonl_read_or_raise(run_template, data):
    records = data.draw(st.lists(st.one_of(mutated(run_template["log"]), st.just(run_template["log"])), max_size=5))
    lines = [json.dumps(r) for r in records]
    if data.draw(st.booleans()):
        lines.insert(data.draw(st.integers(0, len(lines))), data.draw(st.text(max_size=20)).replace("\n", " "))
    torn = data.draw(st.sampled_from(["", "\n", '{"iteration": 9, "be']))
    evaluations = [json.dumps(data.draw(mutated(dict(run_template["record"], iteration=1)))) for _ in range(2)]
    run = _run_folder(run_template, log_jsonl="\n".join(lines) + torn, evaluations_jsonl="\n".join(evaluations) + "\n")
    try:
        for read in (RunDirectory(run).log, RunDirectory(run).evaluations, lambda: load_hall_of_fame(run)):
            try:
                read()
            except AutoproxError:
                pass
        from autoprox.reports.curves import load_curves

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                curves = load_curves(run)
            except AutoproxError:
                return
        assert len(curves.iterations) == len(curves.best_jcm) == len(curves.acceptance_rate)
    finally:
        shutil.rmtree(run.parent)


@FUZZ
@given(st.data())
def test_best_json_reads_or_raises(run_template, data):
    from autoprox.proxies.proxy import resolve_proxy
    from autoprox.reports.export import resolve_export_source
    from autoprox.reports.show import readable_best

    best = data.draw(mutated(run_template["best"]))
    run = _run_folder(run_template, best_json=_json_text(data, best))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            shown = readable_best(RunDirectory(run))
        assert shown is None or isinstance(shown, dict)
        for read in (lambda: resolve_export_source(str(run)), lambda: resolve_proxy(str(run / "best.json"))):
            try:
                read()
            except AutoproxError:
                pass
    finally:
        shutil.rmtree(run.parent)


# ------------------------------------------------------------------------------ cache entries
@pytest.fixture(scope="module")
def cache_entry(pit_small, small_spec) -> dict:
    request = StatsRequest(pit_small.archs[0], small_spec, 0, 100)
    generator = torch.Generator().manual_seed(0)
    stats = [{n: torch.randn(2, 3, generator=generator) * 1e-4 for n in STAT_NAMES} for _ in range(2)]
    key = StatisticsCache(Path(tempfile.gettempdir())).key(request)
    return {"request": request, "key": key, "bytes": encode_entry(stats, key, "float16")}


def _npz(arrays: dict) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


@st.composite
def entry_bytes(draw, good: bytes):
    kind = draw(st.sampled_from(["random", "flipped", "cut", "spliced", "crafted", "pickled"]))
    if kind == "random":
        return draw(st.binary(max_size=600))
    if kind == "flipped":
        data = bytearray(good)
        for _ in range(draw(st.integers(1, 4))):
            data[draw(st.integers(0, len(data) - 1))] ^= draw(st.integers(1, 255))
        return bytes(data)
    if kind == "cut":
        return good[: draw(st.integers(0, len(good)))]
    if kind == "spliced":
        start = draw(st.integers(0, len(good)))
        return good[:start] + draw(st.binary(max_size=40)) + good[start:]
    if kind == "crafted":  # a real .npz whose metadata is anything
        meta = draw(JSON_VALUES)
        return _npz({"meta": np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8),
                     "b0_F1": np.zeros(draw(st.integers(0, 3)), dtype=np.float16)})
    return _npz({"meta": np.array([{"key": 1}], dtype=object)})  # an object array: pickled by NumPy


@FUZZ
@given(st.data())
def test_cache_entries_load_or_are_recomputed_with_a_warning(cache_entry, data):
    blob = data.draw(entry_bytes(cache_entry["bytes"]))
    try:
        stats = decode_entry(blob, cache_entry["key"])
    except CacheCorrupt as exc:
        assert isinstance(exc, AutoproxError) and "allow_pickle" not in str(exc)
    else:
        assert all(set(block) == set(STAT_NAMES) for block in stats)
    folder = _files()
    try:
        cache = StatisticsCache(folder)
        path = cache.path(cache_entry["request"])
        path.parent.mkdir(parents=True)
        path.write_bytes(blob)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            loaded = cache.load(cache_entry["request"])  # never raises
        if loaded is None:
            assert len(caught) == 1 and "corrupt cache entry" in str(caught[0].message)
            assert "allow_pickle" not in str(caught[0].message) and not path.exists()
        else:
            assert not caught and len(loaded) == len(stats)
    finally:
        shutil.rmtree(folder)
