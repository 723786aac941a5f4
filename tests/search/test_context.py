"""The run object: committed runs open anywhere, a run's parts and figures, and --out that is not a run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from autoprox.core.errors import BenchmarkError, RunDirError
from autoprox.data.benchmark import write_benchmark_jsonl
from autoprox.proxies.proxy import Proxy
from autoprox.search.context import RunContext
from autoprox.search.settings import SearchSettings
from autoprox.spaces.architectures import count_params
from tests.conftest import PIT_FILE, REPO, tracked_files
from autoprox.search.rundir import RunDirectory
from tests.commands import one_error_line, run_cli, warning_lines

RUNS = REPO / "runs"
COMMITTED = [path.parent for path in tracked_files("runs/**/config.json")]


def test_every_committed_run_is_found():
    assert len(COMMITTED) >= 30


@pytest.mark.parametrize("run", COMMITTED, ids=[str(p.relative_to(RUNS)) for p in COMMITTED])
def test_committed_run_opens_with_its_recorded_split_and_benchmark(run):
    config = json.loads((run / "config.json").read_text())
    if isinstance(config["settings"]["bench"], list):  # a search over several spaces: one part per benchmark
        from autoprox.search.multispace import open_context

        context = open_context(run)
        assert [p.bench.sha256 for p in context.parts] == [b["sha256"] for b in config["benchmark"]]
        assert all(list(p.targets) == config["settings"]["targets"] for p in context.parts)
        assert context.split.to_json() == config["split"]
        assert not any(Path(b).is_absolute() for b in config["settings"]["bench"])
        return
    context = RunContext.open(run)
    assert context.bench.sha256 == config["benchmark"]["sha256"]
    assert list(context.targets) == config["settings"]["targets"]
    assert context.split.to_json() == config["split"]
    assert not Path(config["settings"]["bench"]).is_absolute()


def test_no_committed_run_file_holds_a_machine_path(capsys):
    import importlib.util

    # the script's main, in this process (the same check without a fresh interpreter's imports)
    spec = importlib.util.spec_from_file_location("portable_runs", REPO / "scripts" / "portable_runs.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    code = script.main([str(RUNS), "--check", "--tracked"])
    assert code == 0, capsys.readouterr().err


def test_params_figures_through_the_context_equal_best_json():
    """The parameter count's figures best.json recorded are what the context computes (no statistics needed)."""
    run = RUNS / "pit-best"
    best = json.loads((run / "best.json").read_text())
    context = RunContext.open(run)
    for part in ("search", "test"):
        figures = context.evaluate(Proxy("params"), part)
        assert figures["jcm"] == pytest.approx(best["params"][part]["jcm"], abs=1e-12)
        for target, row in best["params"][part]["targets"].items():
            assert figures["targets"][target]["kendall"] == pytest.approx(row["kendall"], abs=1e-12)


def test_a_moved_run_is_found_again_by_file_name_and_digest(tmp_path, monkeypatch):
    copy = tmp_path / "elsewhere" / "pit-best"
    shutil.copytree(RUNS / "pit-best", copy)
    monkeypatch.chdir(tmp_path)
    assert RunContext.open(copy).bench.sha256 == json.loads((copy / "config.json").read_text())["benchmark"]["sha256"]
    # Another file of the same name is not taken for it.
    monkeypatch.setenv("AUTOPROX_BENCH_DIR", str(tmp_path / "bench"))
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "gt_pit.pth").write_bytes(b"not the benchmark")
    with pytest.raises(BenchmarkError, match="gt_pit.pth with sha256"):
        RunContext.open(copy)


def _autoprox(capsys, monkeypatch, *args: str, cwd: Path, env: dict | None = None) -> tuple[int, str, str]:
    """``autoprox ARGS`` run from the folder ``cwd`` with ``env`` set (in this process: the commands are the same,
    without a fresh interpreter's seconds of imports each): its exit code, stdout and stderr."""
    monkeypatch.chdir(cwd)
    for name, value in (env or {}).items():
        monkeypatch.setenv(name, value)
    return run_cli(capsys, *args)


@pytest.mark.slow
def test_show_export_curves_and_rank_on_a_run_copied_elsewhere(tmp_path, pit_bench, session_cache, capsys,
                                                                monkeypatch):
    """A committed run copied to another folder, used from there: every report command works on it."""
    copy = tmp_path / "copied-run"
    shutil.copytree(RUNS / "pit-best", copy)
    env = {"AUTOPROX_CACHE": str(session_cache.root)}
    code, out, err = _autoprox(capsys, monkeypatch, "show", str(copy), "--top", "3", cwd=tmp_path, env=env)
    assert code == 0, err
    assert "hall of fame" in out and "pit" in out

    code, _, err = _autoprox(capsys, monkeypatch, "export", str(copy), "--out", str(tmp_path / "proxy.py"),
                             cwd=tmp_path, env=env)
    assert code == 0, err
    assert "def score(" in (tmp_path / "proxy.py").read_text()

    code, _, err = _autoprox(capsys, monkeypatch, "curves", str(copy), "--out", str(tmp_path / "curves.png"),
                             cwd=tmp_path, env=env)
    assert code == 0, err
    assert (tmp_path / "curves.png").stat().st_size > 1000

    order = sorted(range(len(pit_bench)), key=lambda i: count_params(pit_bench.archs[i]))
    small = tmp_path / "pit6.jsonl"
    write_benchmark_jsonl(pit_bench.subset(sorted(order[:6])), small)
    code, out, err = _autoprox(capsys, monkeypatch, "rank", "--proxy", str(copy / "best.json"), "--bench", str(small),
                               "--split", "all", "--batch-size", "2", "--workers", "1", "--json", "--targets",
                               "c100_kd", cwd=tmp_path, env=env)
    assert code == 0, err
    assert json.loads(out)["c100_kd"]["n"] == 6


@pytest.mark.slow
def test_search_refuses_a_non_empty_folder_that_is_not_a_run_and_leaves_it_untouched(tmp_path, capsys, monkeypatch):
    out = tmp_path / "my-results"
    out.mkdir()
    files = {"log.jsonl": "my own log\n", "best.json": '{"mine": true}\n', "notes.txt": "keep me\n"}
    for name, text in files.items():
        (out / name).write_text(text)
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in out.iterdir()}
    code, _, err = _autoprox(capsys, monkeypatch, "search", "--bench", str(PIT_FILE), "--out", str(out),
                             "--iterations", "1", "--quiet", cwd=tmp_path)
    assert code == 2
    assert err.startswith("autoprox: error: ") and str(out) in err
    assert len(err.strip().splitlines()) == 1
    after = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in out.iterdir()}
    assert after == before


def test_context_from_settings_checks_targets_and_records_the_file_name(tmp_path):
    context = RunContext.from_settings(SearchSettings(bench=str(PIT_FILE), targets=("c100_kd",)))
    assert context.settings.bench == "gt_pit.pth"
    assert context.config_json()["benchmark"]["file"] == "gt_pit.pth"
    assert len(context.indices("search")) == 60 and len(context.indices("test")) == 40
    with pytest.raises(BenchmarkError, match="unknown target"):
        RunContext.from_settings(SearchSettings(bench=str(PIT_FILE), targets=("c10_kd",)))
    with pytest.raises(RunDirError, match="not a run directory"):
        RunContext.open(tmp_path)


def test_a_weight_of_a_target_not_searched_is_refused_not_ignored(tmp_path, capsys):
    """``--targets c100_kd --weights flower_kd=2`` used to search c100_kd alone and record a weight that weighed
    nothing (second adversarial pass, 2026-12-07)."""
    from autoprox.core.errors import ConfigError

    with pytest.raises(ConfigError, match=r"^--weights names flower_kd, which is not one of the targets searched "
                                          r"\(c100_kd\): add it to --targets, or leave its weight out$"):
        RunContext.from_settings(SearchSettings(bench=str(PIT_FILE), targets=("c100_kd",), weights={"flower_kd": 2}))
    default = RunContext.from_settings(SearchSettings(bench=str(PIT_FILE), weights={"flower_kd": 2}))
    assert "flower_kd" in default.targets  # a default target may be weighed
    out = tmp_path / "run"
    code, _, err = run_cli(capsys, "search", "--space", "pit", "--targets", "c100_kd", "--weights", "c100_base=1",
                           "--out", out)
    assert code == 2 and "--weights names c100_base" in one_error_line(err) and not out.exists()


def test_settings_naming_the_benchmark_by_file_name_make_a_context_again():
    """What a context records (the bare file name) is enough to make the context again: transfer folds rely on it."""
    first = RunContext.from_settings(SearchSettings(bench=str(PIT_FILE), targets=("c100_kd",)))
    again = RunContext.from_settings(first.settings)
    assert again.bench.sha256 == first.bench.sha256 and again.split == first.split


def test_rank_scores_a_fold_run_on_its_explicit_split(tmp_path, pit_bench, session_cache, capsys):
    """A proxy from a run with an explicit split (an evaluation fold) is ranked on that split, not a seeded one."""
    from autoprox.cli.main import main
    from autoprox.proxies.proxy import AUTOPROX_A

    order = sorted(range(len(pit_bench)), key=lambda i: count_params(pit_bench.archs[i]))
    small = tmp_path / "pit6.jsonl"
    write_benchmark_jsonl(pit_bench.subset(sorted(order[:6])), small)
    best = tmp_path / "best.json"
    best.write_text(json.dumps({"genome": AUTOPROX_A, "split": {"seed": 0, "search_fraction": 0.5,
                                                                "search": [3, 4, 5], "test": [0, 1, 2]}}))
    common = ["--bench", str(small), "--batch-size", "2", "--workers", "1", "--json", "--targets", "c100_kd",
              "--cache-dir", str(session_cache.root)]
    assert main(["rank", "--proxy", str(best), "--split", "test", *common]) == 0
    from_fold = json.loads(capsys.readouterr().out)["c100_kd"]
    assert main(["rank", "--proxy", AUTOPROX_A, "--split", "test", "--split-seed", "0", "--search-fraction", "0.5",
                 *common]) == 0
    seeded = json.loads(capsys.readouterr().out)["c100_kd"]
    from autoprox.data.benchmark import split_benchmark

    assert list(split_benchmark(6, 0, 0.5).test) != [0, 1, 2]  # the two splits differ here
    assert from_fold["n"] == 3 and from_fold["kendall"] != seeded["kendall"]


@pytest.mark.slow
@pytest.mark.parametrize("content, problem", [
    ("[1, 2]\n", "holds a JSON array, not an object"),
    ("{not json\n", "is not valid JSON"),
    ("[" * 100_000 + "]" * 100_000, "is not valid JSON (nested too deeply to read)"),
    # issue 32: the decoder's own "at" is not doubled (it said "Invalid control character at at line 1")
    ('{"genome": "a\tb"}', "is not valid JSON (Invalid control character at line 1)"),
])
def test_a_bad_best_json_is_named_by_show_export_and_curves(run_copy, tmp_path, capsys, content, problem):
    (run_copy / "best.json").write_text(content)
    code, out, err = run_cli(capsys, "show", run_copy, "--no-simplify", "--top", "2")
    assert code == 0 and "hall of fame" in out  # show still shows the hall of fame
    assert any(f"{run_copy / 'best.json'} {problem}" in w for w in warning_lines(err)), err
    code, _, err = run_cli(capsys, "export", run_copy, "--out", tmp_path / "proxy.py", "--no-simplify")
    assert code == 2 and f"{run_copy / 'best.json'} {problem}" in one_error_line(err)
    assert not (tmp_path / "proxy.py").exists()
    code, _, err = run_cli(capsys, "curves", run_copy, "--out", tmp_path / "curves.png")
    assert code == 0 and any(f"{run_copy / 'best.json'} {problem}" in w for w in warning_lines(err)), err


@pytest.mark.slow
@pytest.mark.parametrize("bad_line, problem", [
    ("{torn", "is not valid JSON"),
    ("[1, 2]", "holds a JSON array, not an object"),
    ('{"iteration": "two"}', "has no integer 'iteration'"),
    ('{"iteration": "\t"}', "is not valid JSON (Invalid control character)"),  # issue 32: it said "at at line 1"
])
def test_a_bad_log_line_is_named_by_show_and_curves(run_copy, tmp_path, capsys, bad_line, problem):
    log = run_copy / "log.jsonl"
    lines = log.read_text().splitlines()
    lines.insert(1, bad_line)
    log.write_text("\n".join(lines) + "\n")
    code, _, err = run_cli(capsys, "curves", run_copy, "--out", tmp_path / "curves.png")
    assert code == 2 and f"{log}: line 2 " in one_error_line(err) and problem in one_error_line(err)
    code, out, err = run_cli(capsys, "show", run_copy, "--no-simplify", "--top", "2")
    assert code == 0 and "hall of fame" in out
    if "iteration" not in problem:  # show reads the log for its iteration count only
        assert any(f"{log}: line 2 " in w for w in warning_lines(err)), err
    code, _, err = run_cli(capsys, "search", "--resume", "--out", run_copy, "--quiet")
    assert code == 2 and f"{log}: line 2 " in one_error_line(err)


@pytest.mark.slow
def test_a_torn_last_line_is_what_a_killed_run_leaves_and_is_skipped(run_copy, tmp_path, capsys):
    log = run_copy / "log.jsonl"
    log.write_text(log.read_text() + '{"iteration": 4, "best_j')
    assert [r["iteration"] for r in RunDirectory(run_copy).log()] == [1, 2, 3]
    code, _, err = run_cli(capsys, "curves", run_copy, "--out", tmp_path / "curves.png")
    assert code == 0 and not warning_lines(err), err


def test_a_single_space_context_changes_its_session_and_prefetches_only_with_a_test_split_and_workers(
        small_settings):
    """Issue 42: what differs between a run of one benchmark and of several is a method of each
    (:class:`~autoprox.search.searchrun.SearchRun`); here the single-space one's."""
    from dataclasses import replace

    from autoprox.search.searchrun import SearchRun

    context = RunContext.from_settings(small_settings)
    assert isinstance(context, SearchRun) and context.parts == (context,)
    changed = context.with_session({"workers": 2, "evolution.iterations": 9})
    assert (changed.settings.workers, changed.settings.evolution.iterations) == (2, 9)
    assert changed.cache is context.cache  # the same cache where it did not move
    moved = context.with_session({"cache_dir": "/elsewhere"})
    assert str(moved.cache.root).startswith("/elsewhere")
    assert context.test_prefetch().total == 0  # one worker: the final report computes the test split
    assert changed.test_prefetch().total == len(context.split.test) * len(context.plan.keys())
    everything = RunContext.from_settings(replace(small_settings, search_fraction=1.0, workers=2))
    assert everything.test_prefetch().total == 0


def test_a_run_in_a_plugin_space_read_where_the_plugin_is_not_installed_names_its_space(tmp_path, session_cache,
                                                                                         monkeypatch, capsys):
    """A run made in a plug-in's space, read where the plug-in is not registered, said only "arch config has
    neither 'hidden_dim' ... nor 'width' ...": now one line names the space the run was made in and the plug-in."""
    import random

    from autoprox.search.engine import run_search
    from autoprox.search.evolution import EvolutionConfig
    from autoprox.search.multispace import open_context
    from autoprox.spaces.architectures import arch_to_config, sample_arch
    from autoprox.spaces.registry import REGISTRY

    monkeypatch.syspath_prepend(str(REPO / "examples" / "plugin"))
    from autoprox_deit_space import DeiTSpace

    space = REGISTRY.register(DeiTSpace)
    try:
        rng, archs = random.Random(3), []
        while len(archs) < 8:  # the smallest DeiTs: width 192, 6 blocks
            arch = sample_arch("deit-example", rng, params_range=(2.5e6, 3.2e6))
            if arch not in archs:
                archs.append(arch)
        bench = tmp_path / "deit.jsonl"
        bench.write_text("".join(json.dumps({"arch": arch_to_config(a), "synthetic_acc": 60 + i * 0.7 + (i % 3)})
                                 + "\n" for i, a in enumerate(archs)))
        out = tmp_path / "run"
        run_search(SearchSettings(bench=str(bench), batch_size=2, cache_dir=str(session_cache.root), workers=1,
                                  evolution=EvolutionConfig(population_size=4, iterations=1, retry_cap=3, top_k=2,
                                                            seed=5)), out, quiet=True)
        assert open_context(out).bench.space == "deit-example"
    finally:
        REGISTRY.unregister(space.name)
    said = (f"{out} was made in the search space 'deit-example', which is not registered here: install the plug-in "
            "package that registers it")
    with pytest.raises(RunDirError, match=f"^{said}"):
        open_context(out)
    code, _, err = run_cli(capsys, "search", "--resume", "--out", out)
    assert code == 2 and one_error_line(err).startswith(f"autoprox: error: {said}"), err
