"""Benchmark import: the released files, the plain-text format, errors, splits, file lookup."""

from __future__ import annotations

import os
from pathlib import Path
import json
import math
import shutil

import numpy as np
import pytest
import torch

import autoprox.data.benchmark as benchmark_module
from autoprox.core.correlation import correlate
from autoprox.data.benchmark import (
    BENCH_DIR_ENV,
    Benchmark,
    default_bench_path,
    load_benchmark,
    split_benchmark,
    target_classes,
    write_benchmark_jsonl,
)
from autoprox.core.errors import BenchmarkError
from autoprox.spaces.architectures import (
    arch_to_config,
    count_params,
)
from tests.conftest import AF_FILE, PIT_FILE
from tests.commands import entries_of, one_error_line, run_cli, written_jsonl

AF_SHA = "712ad277546d9f7f565ce07885be7e0b98dcd8d0724fdd1120f595b517436eca"
PIT_SHA = "bdda89841d4105f99ab759e3243e7a2402929ba7a8430dac12a50256aa533bb2"
COLUMNS = ["c100_base", "c100_kd", "flower_base", "flower_kd", "chaoyang_base", "chaoyang_kd"]
PIT_ENTRY = {"arch": {"base_dim": 16, "mlp_ratio": 6, "depth": [2, 8, 4], "num_heads": [2, 4, 4]},
             "c100_kd_acc": 72.5, "flower_kd_acc": 58.99}


class NotBenchmarkData:
    """A custom class: pickling an instance of it must never be loaded."""

    def __init__(self) -> None:
        self.payload = [1, 2, 3]


def _entries(bench: Benchmark, count: int | None = None) -> list[dict]:
    """Raw entries of ``bench`` (as in the released files), the first ``count`` of them."""
    out = []
    for i, arch in enumerate(bench.archs[:count]):
        entry = {"arch": arch_to_config(arch)}
        entry.update({t + "_acc": float(a[i]) for t, a in bench.accuracies.items()})
        out.append(entry)
    return out


def _write_jsonl(path, entries) -> None:
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))


# --- the released files ------------------------------------------------------
def test_released_autoformer_file(af_bench):
    assert af_bench.space == "autoformer"
    assert len(af_bench) == 100 and len(af_bench.configs) == 100
    assert all(a.space == "autoformer" for a in af_bench.archs)
    assert af_bench.targets == COLUMNS + ["imagenet_super"]
    assert af_bench.default_targets() == ["c100_kd", "flower_kd", "chaoyang_kd", "imagenet_super"]
    assert af_bench.sha256 == AF_SHA
    # first entry as printed in the README
    first = af_bench.archs[0]
    assert (arch_to_config(first)["hidden_dim"], arch_to_config(first)["depth"]) == (192, 12)
    assert af_bench.accuracies["c100_base"][0] == pytest.approx(68.66, abs=0.005)
    assert af_bench.accuracies["c100_kd"][0] == pytest.approx(76.06, abs=0.005)
    assert af_bench.accuracies["imagenet_super"][0] == pytest.approx(74.64, abs=0.005)
    for values in af_bench.accuracies.values():
        assert values.shape == (100,) and values.dtype == np.float64
        assert np.all(np.isfinite(values)) and np.all((values > 0) & (values < 100))


def test_released_pit_file(pit_bench):
    assert pit_bench.space == "pit"
    assert len(pit_bench) == 100
    assert all(a.space == "pit" for a in pit_bench.archs)
    assert pit_bench.targets == COLUMNS  # no imagenet_super for PiT
    assert pit_bench.default_targets() == ["c100_kd", "flower_kd", "chaoyang_kd"]
    assert pit_bench.sha256 == PIT_SHA
    first = pit_bench.archs[0]
    assert arch_to_config(first) == {"base_dim": 16, "mlp_ratio": 6, "depth": [2, 8, 4], "num_heads": [2, 4, 4]}
    assert pit_bench.accuracies["c100_kd"][0] == pytest.approx(72.5)
    assert pit_bench.accuracies["chaoyang_kd"][0] == pytest.approx(83.17, abs=0.005)


@pytest.mark.parametrize("which,expected", [
    ("af", {"c100_kd": 0.548, "flower_kd": 0.700, "chaoyang_kd": 0.315, "imagenet_super": -0.218,
            "c100_base": -0.324}),
    ("pit", {"c100_kd": 0.817, "flower_kd": 0.865, "chaoyang_kd": 0.564, "c100_base": 0.716}),
])
def test_readme_kendall_figures(which, expected, af_bench, pit_bench):
    """The README's parameter-count Kendall figures: accuracies are aligned with their archs."""
    bench = af_bench if which == "af" else pit_bench
    params = [count_params(a) for a in bench.archs]
    for target, tau in expected.items():
        result = correlate(params, bench.accuracies[target])
        assert result["n"] == 100
        assert result["kendall"] == pytest.approx(tau, abs=0.0015), target


def test_target_classes():
    assert [target_classes(t) for t in ("c100_kd", "flower_base", "chaoyang_kd", "imagenet_super")] == [100, 102, 4, 1000]
    with pytest.raises(BenchmarkError, match="mnist_kd"):
        target_classes("mnist_kd")


def test_subset_keeps_alignment(af_bench):
    sub = af_bench.subset([5, 2, 99])
    assert sub.archs == (af_bench.archs[5], af_bench.archs[2], af_bench.archs[99])
    assert sub.configs == tuple(arch_to_config(a) for a in sub.archs)
    for t in af_bench.targets:
        np.testing.assert_array_equal(sub.accuracies[t], af_bench.accuracies[t][[5, 2, 99]])


# --- the project's plain-text format -------------------------------------------
@pytest.mark.parametrize("which", ["af", "pit"])
def test_jsonl_round_trip(which, af_bench, pit_bench, tmp_path):
    bench = af_bench if which == "af" else pit_bench
    path = tmp_path / "bench.jsonl"
    write_benchmark_jsonl(bench, path)
    lines = path.read_text().splitlines()
    assert len(lines) == 100 and all(json.loads(line)["arch"] for line in lines)
    again = load_benchmark(path)
    assert again.space == bench.space
    assert again.archs == bench.archs
    assert again.targets == bench.targets
    for t in bench.targets:
        np.testing.assert_array_equal(again.accuracies[t], bench.accuracies[t])  # exact, not approx
    assert again.default_targets() == bench.default_targets()
    assert [p.name for p in tmp_path.iterdir()] == ["bench.jsonl"]  # atomic write left nothing else


def test_json_list_file(pit_bench, tmp_path):
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(_entries(pit_bench, 7), indent=1))
    bench = load_benchmark(path)
    assert bench.space == "pit" and len(bench) == 7
    assert bench.archs == pit_bench.archs[:7]
    np.testing.assert_array_equal(bench.accuracies["flower_kd"], pit_bench.accuracies["flower_kd"][:7])


def test_null_accuracies_are_nan_and_left_out(af_bench, tmp_path):
    entries = _entries(af_bench)
    missing = [3, 10, 42, 77]
    for i in missing:
        entries[i]["c100_kd_acc"] = None
    del entries[50]["flower_kd_acc"]  # an absent column reads like null
    path = tmp_path / "nulls.jsonl"
    _write_jsonl(path, entries)
    bench = load_benchmark(path)
    c100 = bench.accuracies["c100_kd"]
    assert np.isnan(c100[missing]).all() and np.isfinite(np.delete(c100, missing)).all()
    assert np.isnan(bench.accuracies["flower_kd"][50])
    assert np.isfinite(bench.accuracies["chaoyang_kd"]).all()

    scores = [count_params(a) for a in bench.archs]
    full = correlate(scores, af_bench.accuracies["c100_kd"])
    partial = correlate(scores, c100)
    assert full["n"] == 100 and partial["n"] == 96
    keep = [i for i in range(100) if i not in missing]
    expected = correlate([scores[i] for i in keep], af_bench.accuracies["c100_kd"][keep])
    assert partial == expected
    assert math.isfinite(partial["kendall"]) and partial["kendall"] != full["kendall"]

    # NaN survives the round trip as null
    again_path = tmp_path / "again.jsonl"
    write_benchmark_jsonl(bench, again_path)
    assert json.loads(again_path.read_text().splitlines()[3])["c100_kd_acc"] is None
    np.testing.assert_array_equal(load_benchmark(again_path).accuracies["c100_kd"], c100)


# --- errors: one clear BenchmarkError each ----------------------------------------
def test_missing_file(tmp_path):
    with pytest.raises(BenchmarkError, match="not found.*nope.pth"):
        load_benchmark(tmp_path / "nope.pth")


def test_text_file_renamed_pth(tmp_path):
    path = tmp_path / "notes.pth"
    path.write_text("these are not the accuracies you are looking for\n")
    with pytest.raises(BenchmarkError, match=r"notes\.pth: not a ViT-Bench-101 \.pth file"):
        load_benchmark(path)
    path = tmp_path / "noise.pth"
    path.write_bytes(b"\x80\x02" + bytes(range(256)))  # a pickle header, then garbage
    with pytest.raises(BenchmarkError, match=r"noise\.pth: not a ViT-Bench-101 \.pth file.*Unsupported") as info:
        load_benchmark(path)
    # one line with the reason, none of torch's advice to retry with weights_only=False
    assert "\n" not in str(info.value) and "weights_only=False" not in str(info.value)


def test_dict_of_tensors(tmp_path):
    path = tmp_path / "weights.pth"
    torch.save({"blocks.0.attn.qkv.weight": torch.zeros(3, 3)}, path)
    with pytest.raises(BenchmarkError, match="expected a non-empty list of benchmark entries"):
        load_benchmark(path)


def test_pickled_custom_object_is_refused(tmp_path):
    path = tmp_path / "evil.pth"
    obj = NotBenchmarkData()
    torch.save([obj], path)
    with pytest.raises(BenchmarkError, match="refused.*NotBenchmarkData.*weights_only=True") as info:
        load_benchmark(path)
    assert "\x1b[" not in str(info.value)  # no terminal escape codes from torch's message
    assert "weights_only=False" not in str(info.value)
    # the object pickled fine, so only weights_only=True stopped it
    assert torch.load(path, weights_only=False)[0].payload == [1, 2, 3]


def test_torch_load_called_with_weights_only(monkeypatch):
    calls = []
    real_load = torch.load

    def spy(*args, **kwargs):
        calls.append(kwargs.get("weights_only"))
        return real_load(*args, **kwargs)

    monkeypatch.setattr(torch, "load", spy)
    bench = load_benchmark(PIT_FILE)
    assert len(bench) == 100 and calls == [True]


def test_non_utf8_json(tmp_path):
    for name in ("bad.json", "bad.jsonl"):
        path = tmp_path / name
        path.write_bytes(b"\xff\xfe[{}]\n")
        with pytest.raises(BenchmarkError, match="not a UTF-8 text file"):
            load_benchmark(path)


def test_broken_json(tmp_path):
    path = tmp_path / "bench.jsonl"
    path.write_text(json.dumps(PIT_ENTRY) + "\n{oops\n")
    with pytest.raises(BenchmarkError, match="line 2 is not JSON"):
        load_benchmark(path)
    path = tmp_path / "bench.json"
    path.write_text("[" + json.dumps(PIT_ENTRY))
    with pytest.raises(BenchmarkError, match="not a JSON file"):
        load_benchmark(path)


def test_empty_file(tmp_path):
    path = tmp_path / "empty.jsonl"
    path.write_text("\n")
    with pytest.raises(BenchmarkError, match="non-empty list"):
        load_benchmark(path)


def test_entry_without_arch(tmp_path):
    path = tmp_path / "bench.jsonl"
    _write_jsonl(path, [PIT_ENTRY, {"c100_kd_acc": 70.0}])
    with pytest.raises(BenchmarkError, match="entry 1 has no 'arch' key"):
        load_benchmark(path)


def test_malformed_arch_names_entry_and_key(tmp_path):
    bad = json.loads(json.dumps(PIT_ENTRY))
    bad["arch"]["heads"] = bad["arch"].pop("num_heads")
    path = tmp_path / "bench.jsonl"
    _write_jsonl(path, [PIT_ENTRY, PIT_ENTRY, bad])
    with pytest.raises(BenchmarkError, match="entry 2: .*'heads'"):
        load_benchmark(path)
    bad = json.loads(json.dumps(PIT_ENTRY))
    bad["arch"]["base_dim"] = 17  # not in the space
    _write_jsonl(path, [PIT_ENTRY, bad])
    with pytest.raises(BenchmarkError, match="entry 1: .*base_dim=17"):
        load_benchmark(path)
    # an entry of the other space in the middle of a PiT file
    af = {"arch": {"hidden_dim": 192, "depth": 12, "mlp_ratio": [4.0] * 12, "num_heads": [3] * 12},
          "c100_kd_acc": 70.0}
    _write_jsonl(path, [PIT_ENTRY, af])
    with pytest.raises(BenchmarkError, match="entry 1: "):
        load_benchmark(path)


def test_no_accuracy_columns(tmp_path):
    path = tmp_path / "bench.jsonl"
    _write_jsonl(path, [{"arch": PIT_ENTRY["arch"], "c100_kd": 72.5}])
    with pytest.raises(BenchmarkError, match="no accuracy columns"):
        load_benchmark(path)


@pytest.mark.parametrize("value", ["72.5", True, [72.5], {"top1": 72.5}])
def test_non_numeric_accuracy(value, tmp_path):
    bad = dict(PIT_ENTRY, flower_kd_acc=value)
    path = tmp_path / "bench.jsonl"
    _write_jsonl(path, [PIT_ENTRY, bad])
    with pytest.raises(BenchmarkError, match="entry 1 column 'flower_kd_acc' is not a number"):
        load_benchmark(path)


def test_check_targets(pit_bench, af_bench):
    assert pit_bench.check_targets(["c100_kd", "chaoyang_base"]) == ["c100_kd", "chaoyang_base"]
    assert af_bench.check_targets(("imagenet_super",)) == ["imagenet_super"]
    with pytest.raises(BenchmarkError, match="unknown target 'imagenet_super' for gt_pit.pth.*c100_kd"):
        pit_bench.check_targets(["c100_kd", "imagenet_super"])
    with pytest.raises(BenchmarkError, match="no target"):
        pit_bench.check_targets([])


# --- the search/test split ---------------------------------------------------------
def test_split_is_seeded_disjoint_and_covering():
    split = split_benchmark(100, seed=3)
    assert len(split.search) == 60 and len(split.test) == 40
    assert set(split.search).isdisjoint(split.test)
    assert sorted(split.search + split.test) == list(range(100))
    assert split_benchmark(100, seed=3) == split
    assert split_benchmark(100, seed=4).search != split.search
    assert split.search != tuple(range(60))  # actually shuffled
    assert split.indices("search", 100) == list(split.search)
    assert split.indices("test", 100) == list(split.test)
    assert split.indices("all", 100) == list(range(100))
    with pytest.raises(ValueError, match="unknown split"):
        split.indices("train", 100)
    again = type(split).from_json(json.loads(json.dumps(split.to_json())))
    assert again == split
    odd = split_benchmark(7, seed=0)
    assert len(odd.search) == 4 and len(odd.test) == 3
    with pytest.raises(ValueError, match="search fraction"):
        split_benchmark(100, search_fraction=1.0)


# --- finding the released files -----------------------------------------------------
def test_default_bench_path_finds_the_packaged_files(monkeypatch, tmp_path):
    """With no flag and no environment variable the packaged files are found, whatever the folder."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(BENCH_DIR_ENV, raising=False)
    assert default_bench_path("autoformer") == AF_FILE.resolve()
    assert default_bench_path("pit") == PIT_FILE.resolve()
    with pytest.raises(BenchmarkError, match="unknown space 'resnet'"):
        default_bench_path("resnet")


def test_locate_benchmark_finds_other_files_in_the_working_directory(monkeypatch, tmp_path):
    monkeypatch.delenv(BENCH_DIR_ENV, raising=False)
    local = tmp_path / "vit-bench-101"
    local.mkdir()
    shutil.copyfile(PIT_FILE, local / "mine.pth")
    monkeypatch.chdir(tmp_path)
    assert benchmark_module.locate_benchmark("mine.pth").resolve() == (local / "mine.pth").resolve()


def test_a_copy_of_a_packaged_file_is_recorded_by_name(monkeypatch, tmp_path):
    """A run made on a byte-for-byte copy of a packaged file records the bare name, so it reopens anywhere."""
    monkeypatch.delenv(BENCH_DIR_ENV, raising=False)
    shutil.copyfile(PIT_FILE, tmp_path / "gt_pit.pth")
    assert benchmark_module.portable_bench_path(tmp_path / "gt_pit.pth") == "gt_pit.pth"
    (tmp_path / "other").mkdir()
    changed = tmp_path / "other" / "gt_pit.pth"
    changed.write_bytes(PIT_FILE.read_bytes() + b"x")
    assert benchmark_module.portable_bench_path(changed) == str(changed)


def test_default_bench_path_honours_env(monkeypatch, tmp_path):
    shutil.copyfile(PIT_FILE, tmp_path / "gt_pit.pth")
    monkeypatch.setenv(BENCH_DIR_ENV, str(tmp_path))
    found = default_bench_path("pit")
    assert found == (tmp_path / "gt_pit.pth").resolve()
    assert load_benchmark(found).sha256 == PIT_SHA
    # the file is absent from the directory the user named: say so, do not use another copy
    with pytest.raises(BenchmarkError, match=f"gt_autoformer.pth not found in \\${BENCH_DIR_ENV}="):
        default_bench_path("autoformer")
    assert benchmark_module.bench_search_dirs() == [tmp_path]
    monkeypatch.setenv(BENCH_DIR_ENV, str(tmp_path / "does-not-exist"))
    with pytest.raises(BenchmarkError, match="not found.*does-not-exist"):
        default_bench_path("pit")



# --- issue 11: values, duplicates, sizes and depths that used to pass or crash -------------
@pytest.mark.parametrize("value, message", [
    (math.inf, "is inf, not a finite number"),
    (-math.inf, "is -inf, not a finite number"),
    (math.nan, "is NaN; write null"),
    (1e300, r"is 1e\+300, outside \[0, 100\]"),
    (-0.5, r"is -0.5, outside \[0, 100\]"),
    (100.5, r"is 100.5, outside \[0, 100\]"),
])
def test_non_finite_or_absurd_accuracy_names_file_line_and_range(value, message, pit_bench, tmp_path):
    """``"c100_kd_acc": Infinity`` used to be taken as the top accuracy (issue 11, bug 5)."""
    entries = _entries(pit_bench, 5)
    entries[3]["c100_kd_acc"] = value
    path = tmp_path / "bench.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))  # json writes Infinity and NaN
    assert ("Infinity" in path.read_text()) == (math.isinf(value))
    with pytest.raises(BenchmarkError, match=rf"bench\.jsonl: line 4: entry 3 column 'c100_kd_acc' {message}"):
        load_benchmark(path)


def test_accuracies_at_the_range_ends_are_kept(pit_bench, tmp_path):
    entries = _entries(pit_bench, 4)
    entries[0]["c100_kd_acc"], entries[1]["c100_kd_acc"] = 0, 100
    path = tmp_path / "bench.jsonl"
    _write_jsonl(path, entries)
    assert list(load_benchmark(path).accuracies["c100_kd"][:2]) == [0.0, 100.0]


def test_duplicate_and_conflicting_architectures_are_refused(pit_bench, tmp_path):
    entries = _entries(pit_bench, 5)
    path = tmp_path / "bench.jsonl"
    _write_jsonl(path, entries + [dict(entries[1])])
    with pytest.raises(BenchmarkError, match="line 6: entry 5 repeats the architecture of entry 1 with the same accuracies"):
        load_benchmark(path)
    other = dict(entries[1], c100_kd_acc=12.5)
    _write_jsonl(path, entries[:3] + [other] + entries[3:])
    with pytest.raises(BenchmarkError, match=r"line 4: entry 3 repeats the architecture of entry 1 with other "
                                             r"accuracies \(c100_kd: [0-9.]+ vs 12.5\)"):
        load_benchmark(path)
    json_path = tmp_path / "bench.json"  # a JSON list has no lines: the entry is named
    json_path.write_text(json.dumps(entries + [entries[0]]))
    with pytest.raises(BenchmarkError, match=r"bench\.json: entry 5 repeats the architecture of entry 0"):
        load_benchmark(json_path)


@pytest.mark.parametrize("count", [1, 2])
def test_a_benchmark_of_fewer_than_three_architectures_is_refused(count, pit_bench, tmp_path):
    """``rank`` used to print NaN with exit 0 on such a file (issue 11)."""
    path = tmp_path / "tiny.pth"
    torch.save(_entries(pit_bench, count), path)
    with pytest.raises(BenchmarkError, match=rf"tiny\.pth: only {count} architecture\(s\); a benchmark needs at least 3"):
        load_benchmark(path)
    _write_jsonl(tmp_path / "three.jsonl", _entries(pit_bench, 3))
    assert len(load_benchmark(tmp_path / "three.jsonl")) == 3


def test_json_nested_100000_deep_is_one_error_not_a_recursion_error(pit_bench, tmp_path):
    path = tmp_path / "deep.jsonl"
    path.write_text(json.dumps(_entries(pit_bench, 1)[0]) + "\n" + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(BenchmarkError, match="deep.jsonl: line 2 is not JSON \\(nested too deeply to read\\)"):
        load_benchmark(path)
    path = tmp_path / "deep.json"
    path.write_text('[{"arch": ' + "[" * 100_000 + "]" * 100_000 + "}]")
    with pytest.raises(BenchmarkError, match="deep.json: not a JSON file \\(nested too deeply to read\\)"):
        load_benchmark(path)


class _RunsACommand:
    def __reduce__(self):
        import os

        return (os.system, ("echo this must never run",))


def test_a_pickle_that_runs_code_is_refused_in_the_projects_words(tmp_path, capfd):
    """torch 2.13 words this refusal differently ("unsupported GLOBAL posix.system whose module ... is blocked");
    the project's own line must still show, not torch's first paragraph of advice."""
    import pickle

    path = tmp_path / "evil.pth"
    with open(path, "wb") as handle:
        pickle.dump([_RunsACommand()], handle, protocol=2)
    with pytest.raises(BenchmarkError) as info:
        load_benchmark(path)
    message = str(info.value)
    assert message.startswith(f"{path}: refused: the file holds an object of type ")
    assert "system" in message and "weights_only=True" in message
    assert "\n" not in message and "weights_only=False" not in message and "In PyTorch 2.6" not in message
    assert "this must never run" not in capfd.readouterr().out


def test_a_plain_pickle_is_refused_without_torch_warnings(pit_bench, tmp_path):
    import pickle
    import warnings

    path = tmp_path / "plain.pth"
    with open(path, "wb") as handle:
        pickle.dump(_entries(pit_bench, 4), handle, protocol=4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch's "Detected pickle protocol 4" warning must not escape
        with pytest.raises(BenchmarkError, match=r"plain\.pth: not a ViT-Bench-101 \.pth file .*: UnpicklingError: "):
            load_benchmark(path)


def test_targets_that_cannot_rank_are_named(pit_bench, tmp_path):
    entries = _entries(pit_bench, 8)
    for number, entry in enumerate(entries):
        entry["flower_kd_acc"] = None
        entry["chaoyang_kd_acc"] = 80.0
        entry["c100_base_acc"] = 50.0 if number < 2 else None
    path = tmp_path / "bench.jsonl"
    _write_jsonl(path, entries)
    bench = load_benchmark(path)
    bench.check_measured(["c100_kd"])
    with pytest.raises(BenchmarkError, match=r"bench\.jsonl: target 'flower_kd' has no measured value"):
        bench.check_measured(["c100_kd", "flower_kd"])
    with pytest.raises(BenchmarkError, match=r"target 'chaoyang_kd' has one constant value \(80\) for all 8"):
        bench.check_measured(["chaoyang_kd"])
    with pytest.raises(BenchmarkError, match=r"target 'c100_base' has only 2 measured value\(s\) on the search split"):
        bench.check_measured(["c100_base"], part="the search split")
    assert bench.measured_problem("c100_kd", [0, 1], "two") is not None


def _bad_benchmarks(bench, tmp_path: Path) -> dict[str, tuple[Path, str]]:
    entries = entries_of(bench, range(6))
    cases = {}
    infinite = [dict(e) for e in entries]
    infinite[2]["c100_kd_acc"] = float("inf")
    cases["Infinity"] = (written_jsonl(tmp_path / "inf.jsonl", infinite),
                         "inf.jsonl: line 3: entry 2 column 'c100_kd_acc' is inf, not a finite number")
    absurd = [dict(e) for e in entries]
    absurd[4]["flower_kd_acc"] = 1e300
    cases["1e300"] = (written_jsonl(tmp_path / "big.jsonl", absurd),
                      "big.jsonl: line 5: entry 4 column 'flower_kd_acc' is 1e+300, outside [0, 100]")
    cases["duplicate"] = (written_jsonl(tmp_path / "dup.jsonl", entries + [entries[0]]),
                          "dup.jsonl: line 7: entry 6 repeats the architecture of entry 0 with the same accuracies")
    conflicting = dict(entries[1], c100_kd_acc=10.0)
    cases["conflicting"] = (written_jsonl(tmp_path / "conflict.jsonl", entries + [conflicting]),
                            "conflict.jsonl: line 7: entry 6 repeats the architecture of entry 1 with other accuracies")
    cases["two architectures"] = (written_jsonl(tmp_path / "two.jsonl", entries[:2]),
                                  "two.jsonl: only 2 architecture(s); a benchmark needs at least 3")
    deep = tmp_path / "deep.jsonl"
    deep.write_text(json.dumps(entries[0]) + "\n" + "[" * 100_000 + "]" * 100_000 + "\n")
    cases["nested 100000 deep"] = (deep, "deep.jsonl: line 2 is not JSON (nested too deeply to read)")
    return cases


@pytest.mark.slow
@pytest.mark.parametrize("case", ["Infinity", "1e300", "duplicate", "conflicting", "two architectures",
                                  "nested 100000 deep"])
def test_bad_benchmark_files_get_one_line_naming_file_and_line(pit_bench, tmp_path, capsys, case):
    path, message = _bad_benchmarks(pit_bench, tmp_path)[case]
    for argv in (["rank", "--proxy", "params", "--bench", path],
                 ["search", "--bench", path, "--out", tmp_path / "run", "--quiet"]):
        code, out, err = run_cli(capsys, *argv)
        assert code == 2 and message in one_error_line(err) and out == ""
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_a_pickle_benchmark_gets_the_projects_own_line(tmp_path, capsys):
    import pickle

    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned",))

    path = tmp_path / "evil.pth"
    with open(path, "wb") as handle:
        pickle.dump([Evil()], handle, protocol=2)
    code, _, err = run_cli(capsys, "rank", "--proxy", "params", "--bench", path)
    line = one_error_line(err)
    assert code == 2 and line.startswith(f"autoprox: error: {path}: refused: the file holds an object of type ")
    assert "weights_only=True" in line and "In PyTorch" not in line
