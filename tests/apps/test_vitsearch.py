"""Training-free ViT search: sampling under a budget, scoring, resuming, and picks on the benchmark."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

import autoprox
from autoprox.apps.vitsearch import (
    VitSearchSettings,
    parse_budget,
    pick_on_bench,
    pick_quality,
    run_vit_search,
    sample_candidates,
)
from autoprox.core.errors import ArchitectureError, VitSearchError
from autoprox.cli.main import main
from autoprox.data.cache import StatsPlan
from autoprox.genome.tree import score_architecture
from autoprox.networks.statistics import compute_statistics, torch_threads
from autoprox.proxies.proxy import resolve_proxy
from autoprox.search.rundir import read_jsonl
from autoprox.core.errors import RunDirError
from autoprox.spaces.architectures import count_params, param_range, parse_arch
from tests.conftest import PIT_FILE, SMALL_SPEC

TINY_PIT = (0.1e6, 0.6e6)


def test_parse_budget():
    assert parse_budget("4:9") == (4e6, 9e6)
    assert parse_budget("0.5:2.5") == (0.5e6, 2.5e6)
    for bad in ("4-9", "9:4", "a:b", "4", "nan:5", "4:nan"):
        with pytest.raises(VitSearchError, match="MIN:MAX"):
            parse_budget(bad)


def test_impossible_budget_names_the_feasible_range():
    low, high = param_range("autoformer")
    with pytest.raises(VitSearchError, match=f"{low / 1e6:.2f}M to {high / 1e6:.2f}M"):
        sample_candidates("autoformer", 5, (1e6, 2e6), seed=0)


def test_candidates_are_distinct_within_budget_and_seeded():
    first = sample_candidates("pit", 30, (2e6, 25e6), seed=1)
    assert len({json.dumps(autoprox_arch(a), sort_keys=True) for a in first}) == 30
    assert all(2e6 <= count_params(a) <= 25e6 for a in first)
    assert sample_candidates("pit", 30, (2e6, 25e6), seed=1) == first
    assert sample_candidates("pit", 30, (2e6, 25e6), seed=2) != first


def autoprox_arch(arch):
    from autoprox.spaces.architectures import arch_to_config

    return arch_to_config(arch)


def test_too_many_samples_for_a_narrow_budget_says_so():
    # PiT has 46 distinct architectures within 0.1M-0.2M parameters: counted, 60 are refused before any draw
    with pytest.raises(VitSearchError, match="holds only 46 distinct pit architectures.*at most 46"):
        sample_candidates("pit", 60, (0.1e6, 0.2e6), seed=0, max_draws_per_sample=8)
    assert len(sample_candidates("pit", 46, (0.1e6, 0.2e6), seed=0)) == 46


def test_more_samples_than_the_budget_holds_are_refused_before_anything_is_written(tmp_path, capsys):
    """Adversarial pass 3, F3: --samples 5000 of PiT (4,320 architectures in all) drew for ever."""
    for samples, said in (("5000", "the budget holds only 2,586 distinct pit architectures"),
                          ("99999999999999999999", "at most 1,000,000")):
        code = main(["vit-search", "--space", "pit", "--proxy", "params", "--samples", samples, "--workers", "1",
                     "--out", str(tmp_path / "run")])
        err = capsys.readouterr().err
        assert code == 2 and said in err and "scoring" not in err
        assert not (tmp_path / "run").exists()


def _settings(tmp_path, **changes) -> VitSearchSettings:
    base = VitSearchSettings(space="pit", proxy="params", samples=20, budget=(2e6, 25e6), top=5, seed=0,
                             batch_size=2, cache_dir=str(tmp_path / "cache"), workers=1)
    return replace(base, **changes)


def test_params_search_ranks_by_size_and_writes_top(tmp_path):
    settings = _settings(tmp_path)
    summary = run_vit_search(settings, resolve_proxy("params"), tmp_path / "run")
    candidates = sample_candidates("pit", 20, (2e6, 25e6), 0)
    expected = sorted((count_params(a) for a in candidates), reverse=True)[:5]
    assert [row["params"] for row in summary["top"]] == expected
    assert [row["rank"] for row in summary["top"]] == [1, 2, 3, 4, 5]
    assert summary["finished"] and summary["scored"] == 20 and summary["failed"] == 0
    written = json.loads((tmp_path / "run" / "top.json").read_text())
    assert written["top"] == summary["top"]
    csv_lines = (tmp_path / "run" / "top.csv").read_text().splitlines()
    assert csv_lines[0] == "rank,score,params,macs,arch" and len(csv_lines) == 6


def test_stopped_search_resumes_without_rescoring(tmp_path):
    settings = _settings(tmp_path)
    proxy = resolve_proxy("params")
    partial = run_vit_search(settings, proxy, tmp_path / "run", chunk=4, stop_after=8)
    assert not partial["finished"] and partial["scored"] == 8
    full = run_vit_search(settings, proxy, tmp_path / "run", chunk=4)
    indices = [r["index"] for r in read_jsonl(tmp_path / "run" / "scores.jsonl")]
    assert sorted(indices) == list(range(20)), "every candidate scored exactly once"
    straight = run_vit_search(settings, proxy, tmp_path / "straight")
    assert full["top"] == straight["top"] and full["finished"]


def test_a_different_search_in_the_same_directory_is_refused(tmp_path):
    run_vit_search(_settings(tmp_path, samples=4), resolve_proxy("params"), tmp_path / "run")
    with pytest.raises(RunDirError, match="different ViT search"):
        run_vit_search(_settings(tmp_path, samples=4, seed=5), resolve_proxy("params"), tmp_path / "run")


@pytest.mark.slow
def test_genome_scores_match_the_engine(tmp_path):
    genome = "block_mean(to_mean_scalar(element_wise_sum(frobenius_norm(min_max_normalize(F2)), element_wise_sqrt(sigmoid(F4g)))))"
    proxy = resolve_proxy(genome)
    settings = _settings(tmp_path, proxy=proxy.name, samples=3, budget=TINY_PIT, keep_statistics=False,
                         cache_precision="float32")
    summary = run_vit_search(settings, proxy, tmp_path / "run")
    candidates = sample_candidates("pit", 3, TINY_PIT, 0)
    with torch_threads(1):  # the engine scores single-threaded
        expected = {i: score_architecture(proxy.genome, compute_statistics(a, SMALL_SPEC, 0, 100))
                    for i, a in enumerate(candidates)}
    for row in summary["top"]:
        assert row["score"] == pytest.approx(expected[row["index"]], rel=1e-9)
    assert not list((tmp_path / "cache").rglob("*.npz")), "--no-keep-statistics stores nothing"


def test_a_failing_proxy_is_recorded_and_skipped(tmp_path):
    proxy = resolve_proxy("block_mean(to_mean_scalar(element_wise_log(F1)))")  # log of negative weights: NaN
    settings = _settings(tmp_path, proxy=proxy.name, samples=2, budget=TINY_PIT, keep_statistics=False)
    summary = run_vit_search(settings, proxy, tmp_path / "run")
    assert summary["failed"] == 2 and summary["scored"] == 0 and summary["top"] == []
    assert all("invalid" in f["error"] for f in summary["failures"])


def test_pick_quality_by_hand():
    accuracies = np.array([70.0, 80.0, np.nan, 60.0, 75.0])
    quality = pick_quality(accuracies, 4)
    assert quality == {"pick": 75.0, "best": 80.0, "median": 72.5, "random": 71.25, "percentile": 75.0}
    assert pick_quality(accuracies, 2)["pick"] is None


def test_pick_on_bench_with_params(pit_bench, session_cache):
    indices = list(range(0, 100, 3))
    plan = StatsPlan(SMALL_SPEC, (0,), {"c100_kd": 100})
    (pick,) = pick_on_bench([resolve_proxy("params")], pit_bench, indices, ["c100_kd"], plan, session_cache)
    largest = max(indices, key=lambda i: count_params(pit_bench.archs[i]))
    assert pick.index == largest
    quality = pick.targets["c100_kd"]
    values = pit_bench.accuracies["c100_kd"][indices]
    assert quality["pick"] == pit_bench.accuracies["c100_kd"][largest]
    assert quality["best"] == values.max() and quality["random"] == pytest.approx(values.mean())


def test_build_vit_from_a_search_result(tmp_path):
    run_vit_search(_settings(tmp_path, samples=3, budget=TINY_PIT), resolve_proxy("params"), tmp_path / "run")
    top = json.loads((tmp_path / "run" / "top.json").read_text())["top"]
    model = autoprox.build_vit(tmp_path / "run" / "top.json")
    assert sum(p.numel() for p in model.parameters()) == top[0]["params"]
    assert sum(p.numel() for p in autoprox.build_vit(top[1]).parameters()) == top[1]["params"]
    assert sum(p.numel() for p in autoprox.build_vit(top[1]["arch"]).parameters()) == count_params(parse_arch(top[1]["arch"]))
    # the search's folder stands for its top.json; a head of no class is refused in one line (second adversarial
    # pass, 2026-12-07: the folder was "cannot be read as JSON (Is a directory)", -1 a RuntimeError)
    assert sum(p.numel() for p in autoprox.build_vit(tmp_path / "run").parameters()) == top[0]["params"]
    with pytest.raises(VitSearchError, match="a folder without top.json"):
        autoprox.build_vit(tmp_path)
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ArchitectureError, match="num_classes: expected an integer of at least 1"):
            autoprox.build_vit(top[1], num_classes=bad)


def test_cli_vit_search_and_on_bench(capsys, tmp_path):
    code = main(["vit-search", "--space", "pit", "--proxy", "params", "--samples", "6", "--params", "0.1:0.6",
                 "--out", str(tmp_path / "run"), "--cache-dir", str(tmp_path / "cache"), "--workers", "1"])
    out = capsys.readouterr().out
    assert code == 0 and "6 scored, 0 failed" in out and "top.json" in out
    code = main(["vit-search", "--space", "autoformer", "--proxy", "params", "--params", "1:2",
                 "--out", str(tmp_path / "impossible")])
    err = capsys.readouterr().err
    assert code == 2 and "the space spans" in err
    assert not (tmp_path / "impossible").exists(), "nothing is written for an impossible budget"
    code = main(["vit-search", "--on-bench", str(PIT_FILE), "--proxy", "params,flops", "--split", "test",
                 "--targets", "c100_kd,flower_kd"])
    out = capsys.readouterr().out
    assert code == 0 and "| params |" in out and "| flops |" in out and "random pick" in out


def test_architectures_that_cannot_be_built_here_give_the_reason_and_nothing_scored_is_an_error(tmp_path, capsys):
    """Issue 32: such a search printed "0 scored, 2 failed" and exited 0, with the reason only in top.json."""
    from tests.conftest import REPO

    definition = json.loads((REPO / "examples" / "spaces" / "autoformer-ti.json").read_text())
    definition |= {"name": "huge", "limits": {"max_params": 1e13, "max_activation_gb": 1e9}}
    definition["choices"] |= {"embed_dim": [120_000], "depth": [12]}
    (tmp_path / "huge.json").write_text(json.dumps(definition))
    out = tmp_path / "vit"
    code = main(["vit-search", "--space-file", str(tmp_path / "huge.json"), "--space", "huge", "--proxy", "snip",
                 "--samples", "2", "--workers", "1", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    line = err.strip().splitlines()[-1]
    assert line.startswith("autoprox: error: no architecture could be scored: 2 of 2 failed (first: ArchitectureError: ")
    assert "more than this machine's" in line and "GB of memory; not built" in line
    assert line.endswith(f"{out / 'top.json'} lists them")
    assert len(json.loads((out / "top.json").read_text())["failures"]) == 2


def test_build_vit_of_a_search_on_a_space_file_uses_its_space(tmp_path, capsys):
    """Adversarial pass 3, F4: build_vit guessed a built-in space from the config keys (autoformer-s) and raised
    a traceback; a missing path gave a raw FileNotFoundError."""
    from autoprox.spaces.registry import REGISTRY
    from tests.conftest import REPO

    space_file = REPO / "examples" / "spaces" / "autoformer-ti.json"
    assert main(["vit-search", "--space-file", str(space_file), "--space", "autoformer-ti-file", "--proxy", "params",
                 "--samples", "2", "--workers", "1", "--out", str(tmp_path / "run"),
                 "--cache-dir", str(tmp_path / "cache")]) == 0
    REGISTRY.unregister("autoformer-ti-file")  # as in a new Python process
    top = tmp_path / "run" / "top.json"
    with pytest.raises(VitSearchError, match="space 'autoformer-ti-file', which is not registered.*space_file="):
        autoprox.build_vit(top)
    try:
        model = autoprox.build_vit(top, space_file=space_file)
    finally:
        REGISTRY.unregister("autoformer-ti-file")
    assert sum(p.numel() for p in model.parameters()) == json.loads(top.read_text())["top"][0]["params"]
    with pytest.raises(VitSearchError, match="no such file"):
        autoprox.build_vit(tmp_path / "missing" / "top.json")


def _edit_first_record(path, change):
    lines = path.read_text().splitlines()
    record = json.loads(lines[0])
    change(record)
    lines[0] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("change, says", [
    (lambda r: r.update(index="x"), "line 1: 'index' must be an architecture index, 0 to 3, got 'x'"),  # ValueError
    (lambda r: r.update(index=10**30), "'index' must be an architecture index, 0 to 3, got 1000000"),  # IndexError
    (lambda r: r.update(index=99), "'index' must be an architecture index, 0 to 3, got 99"),  # IndexError
    (lambda r: r.update(raw="x"), "'raw' must be the proxy's score (a number), got 'x'"),  # ValueError in numpy
    (lambda r: r.update(raw={"a": 1}), "'raw' must be the proxy's score (a number), got {'a': 1}"),  # TypeError
    (lambda r: r.update(wall="x"), "'wall' must be a number of seconds, got 'x'"),  # TypeError in the summary
    (lambda r: r.update(index=(r["index"] + 1) % 4), "its 'arch' is not architecture"),  # another's record
], ids=["index-str", "index-huge", "index-99", "raw-str", "raw-dict", "wall-str", "arch-of-another"])
def test_a_hand_edited_scores_record_is_refused_naming_its_line(tmp_path, change, says):
    """A ``scores.jsonl`` record whose index, score or time was edited ended the resumed ViT search in a ValueError,
    TypeError or IndexError traceback (after it had scored the rest); it is refused, naming the file and line."""
    settings, proxy = _settings(tmp_path, samples=4), resolve_proxy("params")
    run = tmp_path / "run"
    run_vit_search(settings, proxy, run)
    _edit_first_record(run / "scores.jsonl", change)
    top = (run / "top.json").read_text()
    with pytest.raises(RunDirError) as refused:
        run_vit_search(settings, proxy, run)
    assert str(refused.value).startswith(f"{run / 'scores.jsonl'}: ") and says in str(refused.value)
    assert (run / "top.json").read_text() == top


def test_a_scores_line_cut_short_is_scored_again_and_a_folder_in_place_of_top_json_is_named(tmp_path):
    settings, proxy = _settings(tmp_path, samples=4), resolve_proxy("params")
    run = tmp_path / "run"
    whole = run_vit_search(settings, proxy, run)
    scores = run / "scores.jsonl"
    lines = scores.read_text().splitlines()
    scores.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][:20])  # a write cut short
    assert run_vit_search(settings, proxy, run)["top"] == whole["top"]
    (run / "top.json").unlink()
    (run / "top.json").mkdir()  # os.replace's IsADirectoryError was a traceback
    with pytest.raises(RunDirError, match="^cannot write .*top.json: it is a directory; move it away"):
        run_vit_search(settings, proxy, run)
    assert not [p for p in run.iterdir() if p.name.endswith(".tmp")]
