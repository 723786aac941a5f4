"""The statistics cache: hits, precision, keys, pickle-free entries, corruption, atomic writes,
and parallel building that gives the same numbers whatever the number of workers."""

from __future__ import annotations

import json
import shutil
import sys
import warnings

import numpy as np
import pytest
import torch

import autoprox.core.atomic
import autoprox.data.cache as cache_module
from autoprox.data.cache import CACHE_DIR_ENV, StatisticsCache, StatsRequest, build_cache, default_cache_dir
from autoprox.data.entries import STATS_VERSION, CacheCorrupt, check_entry, decode_entry
from autoprox.networks.statistics import STAT_NAMES, InputSpec, compute_statistics
from autoprox.data.benchmark import load_benchmark
from autoprox.spaces.architectures import count_params
from tests.commands import PUBLISHED, entries_of, fill, one_error_line, remount, run_cli, tmpfs, warning_lines, written_jsonl


def _same(a, b) -> bool:
    return len(a) == len(b) and all(torch.equal(x[n], y[n]) for x, y in zip(a, b) for n in STAT_NAMES)


def _leftovers(root) -> list:
    """Anything under ``root`` that is not a finished entry (temporary files above all)."""
    return [p for p in root.rglob("*") if p.is_file() and (p.suffix != ".npz" or p.name.startswith("."))]


@pytest.fixture(scope="module")
def pit_request(pit_small, small_spec):
    return StatsRequest(pit_small.archs[0], small_spec, 0, 100)


@pytest.fixture(scope="module")
def af_request(af_small, small_spec):
    return StatsRequest(af_small.archs[0], small_spec, 0, 100)


@pytest.fixture(scope="module")
def pit_direct(pit_request):
    r = pit_request
    return compute_statistics(r.arch, r.spec, r.seed, r.num_classes)


@pytest.fixture
def pit_entry(tmp_path, pit_request):
    """A fresh cache holding the PiT entry: (cache, path, what it decodes to)."""
    cache = StatisticsCache(tmp_path / "cache")
    stats = cache.get(pit_request)
    return cache, cache.path(pit_request), stats


def _load_quietly(cache, request):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a valid entry loads without any warning
        return cache.load(request)


# --- hits and precision ----------------------------------------------------------------
def test_get_computes_then_loads_identical(tmp_path, pit_request, pit_direct, monkeypatch):
    cache = StatisticsCache(tmp_path)
    assert not cache.contains(pit_request) and cache.load(pit_request) is None
    first = cache.get(pit_request)
    path = cache.path(pit_request)
    assert path.is_file() and path.parent.parent.name == "pit"
    assert path.name == cache.key(pit_request) + ".npz"
    stamp = path.stat().st_mtime_ns

    def must_not_compute(*_args, **_kwargs):
        raise AssertionError("a cache hit recomputed the statistics")

    monkeypatch.setattr(cache_module, "compute_statistics", must_not_compute)
    second = cache.get(pit_request)
    assert _same(first, second)
    assert path.stat().st_mtime_ns == stamp
    assert len(first) == len(pit_direct)
    for a, b in zip(first, pit_direct):
        assert [a[n].shape for n in STAT_NAMES] == [b[n].shape for n in STAT_NAMES]
        assert all(a[n].dtype == torch.float32 for n in STAT_NAMES)


def test_float16_relative_error_below_1e3(session_cache, af_request, pit_request, pit_direct):
    assert session_cache.precision == "float16"
    r = af_request
    af_direct = compute_statistics(r.arch, r.spec, r.seed, r.num_classes)
    tiny_seen = False
    for request, direct in ((af_request, af_direct), (pit_request, pit_direct)):
        cached = session_cache.get(request)
        assert len(cached) == len(direct)
        for index, (c, d) in enumerate(zip(cached, direct)):
            for name in STAT_NAMES:
                x, y = d[name].double(), c[name].double()
                peak = float(x.abs().max())
                assert float((y - x).abs().max()) / peak < 1e-3, (index, name)
                big = x.abs() >= peak * 1e-6  # float16 carries ~11 bits relative to the peak
                rel = ((y - x).abs()[big] / x.abs()[big]).max()
                assert float(rel) < 1e-3, (index, name)
            # F4g: tiny values (down to ~1e-11) keep their relative precision, none flushes to 0
            g, h = d["F4g"].double(), c["F4g"].double()
            assert torch.equal(g == 0, h == 0), index
            nonzero = g != 0
            assert float(((h - g).abs()[nonzero] / g.abs()[nonzero]).max()) < 1e-3, index
            tiny_seen = tiny_seen or bool(((g != 0) & (g.abs() < 1e-9)).any())
    assert tiny_seen  # the AutoFormer F4g reaches below 1e-9, so this test covered them


def test_float32_is_exact(tmp_path, pit_request, pit_direct):
    cache = StatisticsCache(tmp_path, precision="float32")
    assert _same(cache.get(pit_request), pit_direct)
    assert _same(cache.load(pit_request), pit_direct)
    half = StatisticsCache(tmp_path, precision="float16")
    half.get(pit_request)
    ratio = cache.size_bytes(pit_request) / half.size_bytes(pit_request)
    assert 1.8 < ratio < 2.1  # float16 entries are half the size
    with pytest.raises(ValueError, match="unknown cache precision"):
        StatisticsCache(tmp_path, precision="bfloat16")


# --- keys ------------------------------------------------------------------------------
def test_key_changes_with_each_ingredient(tmp_path, pit_small, small_spec, pit_request):
    cache = StatisticsCache(tmp_path)
    base = pit_request
    assert cache.key(base) == cache.key(StatsRequest(pit_small.archs[0], InputSpec("gaussian", 2), 0, 100))
    variants = {
        "arch": StatsRequest(pit_small.archs[1], small_spec, 0, 100),
        "input kind": StatsRequest(base.arch, InputSpec("ones", small_spec.batch_size), 0, 100),
        "batch size": StatsRequest(base.arch, InputSpec("gaussian", small_spec.batch_size + 1), 0, 100),
        "seed": StatsRequest(base.arch, small_spec, 1, 100),
        "classes": StatsRequest(base.arch, small_spec, 0, 4),
    }
    keys = {"base": cache.key(base)}
    keys.update({name: cache.key(r) for name, r in variants.items()})
    keys["precision"] = StatisticsCache(tmp_path, precision="float32").key(base)
    assert len(set(keys.values())) == len(keys), keys
    assert all(len(k) == 64 for k in keys.values())
    fields = base.key_fields("float16")
    assert fields["version"] == STATS_VERSION and fields["space"] == "pit"


def test_entries_are_pickle_free(pit_entry, pit_request):
    cache, path, stats = pit_entry
    with np.load(path, allow_pickle=False) as archive:
        names = sorted(archive.files)
        arrays = {n: archive[n] for n in names}
    assert all(a.dtype != object for a in arrays.values())
    meta = json.loads(bytes(arrays.pop("meta")).decode())
    assert meta["key"] == cache.key(pit_request) and meta["precision"] == "float16"
    assert meta["blocks"] == len(stats) == sum(pit_request.arch.depths)
    assert len(arrays) == 8 * len(stats)
    assert {a.dtype for a in arrays.values()} == {np.dtype(np.float16)}
    # stored value times 2^exponent is the statistic
    label = "b0_F4g"
    decoded = np.ldexp(arrays[label].astype(np.float32), meta["exponents"][label])
    np.testing.assert_array_equal(decoded, stats[0]["F4g"].numpy())


# --- damaged entries -------------------------------------------------------------------------
def test_truncated_entry_is_detected_and_recomputed(pit_entry, pit_request):
    cache, path, stats = pit_entry
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.warns(UserWarning, match="corrupt cache entry"):
        assert cache.load(pit_request) is None
    assert not path.exists()  # the corrupt entry is removed
    path.write_bytes(data[:-10])
    with pytest.warns(UserWarning, match="corrupt cache entry"):
        again = cache.get(pit_request)  # recomputes
    assert _same(again, stats)
    assert _same(_load_quietly(cache, pit_request), stats)  # valid again


def test_byte_flipped_entry_is_detected_and_recomputed(pit_entry, pit_request):
    cache, path, stats = pit_entry
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x10  # inside an array's data: only the zip CRC can tell
    path.write_bytes(bytes(data))
    with pytest.warns(UserWarning, match="corrupt cache entry"):
        assert cache.load(pit_request) is None
    path.write_bytes(bytes(data))
    with pytest.warns(UserWarning, match="corrupt cache entry"):
        again = cache.get(pit_request)
    assert _same(again, stats)
    assert _same(_load_quietly(cache, pit_request), stats)


def test_any_flipped_byte_is_harmless_or_detected(tmp_path, pit_request):
    """Flip every byte of a (small, real-format) entry: load() never raises and never
    returns different numbers; it returns the same statistics or warns and gives None."""
    cache = StatisticsCache(tmp_path)
    g = torch.Generator().manual_seed(0)
    stats = [{n: torch.randn(2, 3, generator=g) * 1e-6 for n in STAT_NAMES}]
    path = cache.save(pit_request, stats)
    good = path.read_bytes()
    reference = _load_quietly(cache, pit_request)
    outcomes = {"same": 0, "detected": 0}
    for i in range(len(good)):
        data = bytearray(good)
        data[i] ^= 0xFF
        path.write_bytes(bytes(data))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            loaded = cache.load(pit_request)  # must not raise
        if loaded is None:
            assert caught and "corrupt cache entry" in str(caught[0].message), i
            outcomes["detected"] += 1
        else:
            assert _same(loaded, reference), f"byte {i} changed the numbers undetected"
            outcomes["same"] += 1
    assert outcomes["detected"] > len(good) // 2


def test_entry_under_another_key_is_rejected(pit_entry, pit_request, pit_small, small_spec):
    cache, path, _ = pit_entry
    other = StatsRequest(pit_small.archs[1], small_spec, 0, 100)
    target = cache.path(other)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(path, target)  # a valid entry, but for another request
    with pytest.warns(UserWarning, match="metadata does not match its key"):
        assert cache.load(other) is None
    assert not target.exists()


def test_check_entry_passes_a_good_entry_and_finds_any_truncation_or_foreign_bytes(pit_entry, pit_request):
    """What ``cache build`` checks of an entry it counts as cached, without reading the arrays."""
    cache, path, _ = pit_entry
    data = path.read_bytes()
    assert cache.damaged(pit_request) == []
    for cut in sorted({1, 100, len(data) // 3, len(data) // 2, len(data) - 30, len(data) - 1}):
        path.write_bytes(data[:cut])
        assert len(problems := cache.damaged(pit_request)) == 1 and problems[0][0] == path, cut
        assert path.name in problems[0][1], cut
    for foreign in (b"garbage\n", b"", np.random.default_rng(0).bytes(5000)):
        path.write_bytes(foreign)
        assert "corrupt cache entry" in cache.damaged(pit_request)[0][1]
    path.write_bytes(data)
    assert cache.damaged(pit_request) == []


def test_cache_build_replaces_damaged_entries_and_says_how_many(pit_small, tmp_path, capsys):
    """It counted a truncated or garbage entry as 'already cached' and left it for the next search."""
    bench = written_jsonl(tmp_path / "pit3.jsonl", entries_of(pit_small, [0, 1, 2]))
    command = ["cache", "build", "--bench", bench, "--batch-size", "2", "--cache-dir", tmp_path / "cache",
               "--workers", "1", "--targets", "c100_kd"]
    code, out, _ = run_cli(capsys, *command)
    assert code == 0 and "3 computed" in out
    paths = sorted((tmp_path / "cache").rglob("*.npz"))
    good = {path: path.read_bytes() for path in paths}
    paths[0].write_bytes(good[paths[0]][:100])
    paths[1].write_bytes(b"garbage\n")
    code, out, err = run_cli(capsys, *command)
    assert code == 0
    assert out.strip().endswith(": 2 computed (" + out.split("computed (")[1].split(")")[0] + "), 2 of them replacing "
                                "corrupt entries, 1 already cached")
    warnings = warning_lines(err)
    assert len(warnings) == 2 and all("corrupt cache entry" in w and "; recomputing" in w for w in warnings)
    assert {paths[0].name, paths[1].name} == {w.split("corrupt cache entry ")[1].split(" ")[0] for w in warnings}
    assert {path: path.read_bytes() for path in paths} == good  # recomputed as they were
    code, out, err = run_cli(capsys, *command)
    assert code == 0 and out.strip().endswith(": 0 computed, 3 already cached") and not warning_lines(err)


def test_cache_build_on_a_cache_it_cannot_write_counts_a_damaged_entry_it_keeps_as_not_replaced(
        pit_entry, pit_request, monkeypatch):
    """It warned 'recomputing' and counted the entry as replaced, then as already cached, computing nothing; such an
    entry is named once, where it is read (a read-only cache's one warning)."""
    import warnings as _warnings

    from autoprox.data.cache import build_cache

    cache, path, _ = pit_entry
    path.write_bytes(b"garbage\n")
    monkeypatch.setattr(type(cache), "_discard", staticmethod(lambda path: None))  # as a read-only folder refuses
    with _warnings.catch_warnings(record=True) as caught:
        _warnings.simplefilter("always")
        counts = build_cache(cache, [pit_request], workers=1)
    lines = [str(w.message) for w in caught]
    assert counts["replaced"] == 0 and not any("recomputing" in line for line in lines), lines


def _resident_file_kib() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("RssFile:"))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_mapped_entries_hold_no_resident_pages_until_read(pit_entry, pit_request):
    """``report`` maps every entry of a run's split: the CRC check read all their pages, which stayed resident
    (2.3 GB for a 100-architecture PiT run's page); now only what a statistic reads is."""
    cache, path, stats = pit_entry
    size_kib = path.stat().st_size // 1024
    held = [cache.load(pit_request, encoded=True, mapped=True)]  # what a first load maps besides (a library) first
    before = _resident_file_kib()
    held += [cache.load(pit_request, encoded=True, mapped=True) for _ in range(8)]
    assert _resident_file_kib() - before < 2 * size_kib, "eight mapped entries keep their pages resident"
    assert _same([{n: block[n] for n in STAT_NAMES} for block in held[-1]], stats)  # and read the same


# --- atomic writes ------------------------------------------------------------------------
def test_atomic_writes_leave_no_temporary_files(pit_entry, pit_request, monkeypatch):
    cache, path, stats = pit_entry
    cache.save(pit_request, stats)  # overwrite in place
    assert _leftovers(cache.root) == []
    before = path.read_bytes()

    def crash(*_args, **_kwargs):
        raise OSError("disk vanished at the rename")

    monkeypatch.setattr(autoprox.core.atomic.os, "replace", crash)
    with pytest.raises(OSError, match="disk vanished"):
        cache.save(pit_request, [{n: t * 2 for n, t in b.items()} for b in stats])
    monkeypatch.undo()
    assert _leftovers(cache.root) == []  # the half-done temporary file is gone
    assert path.read_bytes() == before  # and the old entry is untouched
    assert _same(_load_quietly(cache, pit_request), stats)


# --- building in parallel ------------------------------------------------------------------
@pytest.mark.slow
def test_build_cache_workers_give_identical_results(tmp_path, af_small, pit_small, small_spec):
    archs = [af_small.archs[0], pit_small.archs[0], pit_small.archs[1]]
    requests = [StatsRequest(a, small_spec, 3, 100) for a in archs]
    parallel = StatisticsCache(tmp_path / "two", precision="float32")
    calls = []
    result = build_cache(parallel, requests, workers=2, progress=lambda d, t: calls.append((d, t)))
    assert result["requests"] == 3 and result["computed"] == 3 and len(result["seconds"]) == 3
    assert calls[0] == (0, 3) and calls[-1] == (3, 3) and len(calls) == 4
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)
    assert all(parallel.contains(r) for r in requests)
    assert _leftovers(parallel.root) == []

    calls.clear()
    again = build_cache(parallel, requests, workers=2, progress=lambda d, t: calls.append((d, t)))
    assert again["computed"] == 0 and again["seconds"] == [] and calls == [(3, 3)]

    serial = StatisticsCache(tmp_path / "one", precision="float32")
    assert build_cache(serial, requests, workers=1)["computed"] == 3
    for request in requests:
        from_two, from_one = _load_quietly(parallel, request), _load_quietly(serial, request)
        assert _same(from_two, from_one), request.arch
    # and the same as computing here, in this process
    direct = compute_statistics(archs[1], small_spec, 3, 100)
    assert _same(_load_quietly(parallel, requests[1]), direct)


def test_an_entry_that_does_not_start_as_a_zip_is_refused_alike_by_the_check_and_by_each_read(tmp_path):
    import io
    import zipfile

    path = tmp_path / "entry.npz"
    path.write_bytes(b"not a zip file at all" * 10)
    said = "not a NumPy .npz archive: it does not start as a zip file does"
    for read in (lambda: check_entry(path, "key"), lambda: decode_entry(path, "key"),
                 lambda: decode_entry(path.read_bytes(), "key")):
        with pytest.raises(CacheCorrupt, match=said):
            read()
    empty = io.BytesIO()
    zipfile.ZipFile(empty, "w").close()  # an empty zip starts with its end record: it passes the first check
    path.write_bytes(empty.getvalue())
    for read in (lambda: check_entry(path, "key"), lambda: decode_entry(path.read_bytes(), "key")):
        with pytest.raises(CacheCorrupt) as refused:
            read()
        assert said not in str(refused.value)


def test_default_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "here"))
    assert default_cache_dir() == tmp_path / "here"
    assert StatisticsCache().root == tmp_path / "here"
    monkeypatch.delenv(CACHE_DIR_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "autoprox"


@pytest.mark.slow
def test_a_random_bytes_cache_entry_warns_once_without_pickle_advice(pit_bench, small_spec, tmp_path, capsys):
    from autoprox.data.cache import StatsRequest

    order = sorted(range(len(pit_bench)), key=lambda i: count_params(pit_bench.archs[i]))[:4]
    bench = written_jsonl(tmp_path / "pit4.jsonl", entries_of(pit_bench, order))
    cache = StatisticsCache(tmp_path / "cache")
    common = ["rank", "--proxy", PUBLISHED, "--bench", bench, "--batch-size", "2", "--cache-dir", cache.root,
              "--workers", "1", "--json", "--targets", "c100_kd"]
    code, clean, err = run_cli(capsys, *common)
    assert code == 0 and not warning_lines(err)
    request = StatsRequest(load_benchmark(bench).archs[1], small_spec, 0, 100)
    cache.path(request).write_bytes(np.random.default_rng(0).bytes(5000))
    code, out, err = run_cli(capsys, *common)
    assert code == 0 and json.loads(out) == json.loads(clean)
    warnings = warning_lines(err)
    assert len(warnings) == 1, err
    assert "corrupt cache entry" in warnings[0] and "not a NumPy .npz archive" in warnings[0]
    assert "allow_pickle" not in err and "ResourceWarning" not in err and "unclosed" not in err


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["missing", "corrupt"])
def test_a_read_only_cache_computes_what_it_lacks_in_memory_with_one_warning(pit_bench, small_spec, tmp_path, capsys,
                                                                              damage):
    from autoprox.data.cache import StatsRequest

    order = sorted(range(len(pit_bench)), key=lambda i: count_params(pit_bench.archs[i]))[:5]
    bench = written_jsonl(tmp_path / "pit5.jsonl", entries_of(pit_bench, order))
    requests = [StatsRequest(arch, small_spec, 0, 100) for arch in load_benchmark(bench).archs]
    common = ["--proxy", PUBLISHED, "--bench", bench, "--batch-size", "2", "--workers", "2", "--json"]
    code, reference, err = run_cli(capsys, "rank", *common, "--cache-dir", tmp_path / "writable")
    assert code == 0, err
    with tmpfs(tmp_path / "ro", "64m") as root:
        cache = StatisticsCache(root)
        kept = requests[:3] if damage == "missing" else requests  # two entries missing, or one corrupt
        for request in kept:
            cache.path(request).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(StatisticsCache(tmp_path / "writable").path(request), cache.path(request))
        corrupt = cache.path(requests[0])
        if damage == "corrupt":
            corrupt.write_bytes(corrupt.read_bytes()[:300])
        remount(root, "ro")
        code, out, err = run_cli(capsys, "rank", *common, "--cache-dir", root)
        assert code == 0 and json.loads(out) == json.loads(reference), err
        warnings = warning_lines(err)
        assert len(warnings) == 1, err
        assert f"statistics cache {root} cannot be written (Read-only file system)" in warnings[0]
        assert "computed in memory" in warnings[0] and "Traceback" not in err
        assert ("corrupt cache entry" in warnings[0]) == (damage == "corrupt")
        assert corrupt.stat().st_size == (300 if damage == "corrupt" else corrupt.stat().st_size)  # left as it was
        code, _, err = run_cli(capsys, "search", "--bench", bench, "--out", tmp_path / "run", "--batch-size", "2",
                               "--cache-dir", root, "--population", "3", "--iterations", "1", "--quiet")
        # one warning about the cache (the other one says its test split of 2 architectures means little)
        assert code == 0 and len([w for w in warning_lines(err) if "test split holds" not in w]) == 1, err
        code, _, err = run_cli(capsys, "cache", "build", "--bench", bench, "--batch-size", "2", "--cache-dir", root)
        assert code == 2 and "cannot be written (Read-only file system)" in one_error_line(err)


@pytest.mark.slow
def test_a_full_cache_is_one_line_and_the_rerun_is_exact(pit_bench, tmp_path, capsys):
    order = sorted(range(len(pit_bench)), key=lambda i: count_params(pit_bench.archs[i]))[:6]
    bench = written_jsonl(tmp_path / "pit6.jsonl", entries_of(pit_bench, order))
    common = ["--proxy", PUBLISHED, "--bench", bench, "--batch-size", "2", "--json", "--targets", "c100_kd,flower_kd"]
    code, reference, _ = run_cli(capsys, "rank", *common, "--cache-dir", tmp_path / "roomy", "--workers", "1")
    entry_size = next((tmp_path / "roomy").rglob("*.npz")).stat().st_size
    with tmpfs(tmp_path / "full", "64m") as root:
        filler = fill(root, leave=int(entry_size * 2.5))
        for workers in ("1", "2"):
            code, out, err = run_cli(capsys, "rank", *common, "--cache-dir", root, "--workers", workers)
            line = one_error_line(err)
            assert code == 2 and out == "", err
            assert f"statistics cache {root} is full: cannot write {root}/pit/" in line
            assert "no space left on device after" in line and "entries written by this command" in line
            assert not [p for p in root.rglob("*") if p.name.startswith(".") and p.is_file()]  # no temporary file
        kept = len(list(root.rglob("*.npz")))
        assert kept == 2
        filler.unlink()  # room again
        code, out, err = run_cli(capsys, "rank", *common, "--cache-dir", root, "--workers", "2")
        assert code == 0 and json.loads(out) == json.loads(reference), err


def test_a_cache_dir_that_is_a_file_stops_the_command(capsys, tmp_path, af_small_file):
    cache = tmp_path / "cache"
    cache.write_text("a file")
    for argv in (["rank", "--proxy", "snip", "--bench", str(af_small_file)],
                 ["search", "--bench", str(af_small_file), "--iterations", "1", "--out", str(tmp_path / "run")]):
        code, _, err = run_cli(capsys, *argv, "--cache-dir", str(cache))
        assert code == 2
        assert err.strip().splitlines()[-1] == (f"autoprox: error: statistics cache {cache} cannot be a folder: it "
                                                "is a file; give --cache-dir a folder")
    code, _, err = run_cli(capsys, "rank", "--proxy", "snip", "--bench", str(af_small_file), "--cache-dir",
                           str(cache / "below"))
    assert code == 2 and f"({cache} is a file)" in err
    assert not (tmp_path / "run").exists() and cache.read_text() == "a file"
