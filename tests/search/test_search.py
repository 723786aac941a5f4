"""Evolution, run directory, resume and interruption, on a small slice of the real benchmark."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from autoprox.data.benchmark import load_benchmark
from autoprox.reports.show import params_verdict, small_test_note
from autoprox.search.engine import run_search
from autoprox.core.errors import RunDirError
from autoprox.search.rundir import LOCK, RunDirectory
from tests.commands import cli_env, entries_of, one_error_line, run_cli, small_search_argv, written_jsonl
from tests.conftest import REPO, SEARCHED_EVOLUTION

pytestmark = pytest.mark.slow

EVOLUTION = SEARCHED_EVOLUTION  # the evolution of conftest's searched_run, the full run of these tests


@pytest.fixture(scope="module")
def small_bench_file(af_small_file):
    return af_small_file


@pytest.fixture(scope="module")
def settings(searched_settings):
    return searched_settings


def _without_timing(records):
    return [{k: v for k, v in r.items() if k not in ("elapsed",)} for r in records]


@pytest.fixture(scope="module")
def full_run(searched_run):
    """The search the hall of fame tests read too (one run per session)."""
    return searched_run


def test_run_directory_holds_config_log_checkpoint_and_best(full_run, small_bench_file):
    out, report = full_run
    run = RunDirectory(out)
    config = run.config()
    assert len(config["benchmark"]["sha256"]) == 64
    assert config["split"]["search"] == report["split"]["search"]
    assert set(config["split"]["search"]).isdisjoint(config["split"]["test"])
    assert config["settings"]["targets"] == ["c100_kd", "flower_kd", "chaoyang_kd", "imagenet_super"]
    assert config["stats"]["seeds"] == [0] and config["stats"]["input"]["batch_size"] == 2
    log = run.log()
    assert [r["iteration"] for r in log] == list(range(1, EVOLUTION.iterations + 1))
    for record in log:
        assert {"best_jcm", "mean_jcm", "best_kendall", "evaluations", "invalid", "accepted", "elapsed"} <= set(record)
    best_jcms = [r["best_jcm"] for r in log]
    assert best_jcms == sorted(best_jcms), "elitism: the best JCM never drops"
    checkpoint = run.checkpoint()
    assert checkpoint["iteration"] == EVOLUTION.iterations
    assert len(checkpoint["population"]) == EVOLUTION.population_size
    assert len({m["canonical"] for m in checkpoint["population"]}) == EVOLUTION.population_size
    best = json.loads((out / "best.json").read_text())
    assert best["finished"] is True
    assert best["search"]["jcm"] == pytest.approx(max(m["jcm"] for m in checkpoint["population"]))
    for split in ("search", "test"):
        assert set(best[split]["targets"]) == set(best["targets"])
        assert set(best["params"][split]["targets"]["c100_kd"]) == {"kendall", "spearman", "pearson", "n"}
    assert best["test"]["targets"]["c100_kd"]["n"] == 4
    assert best["params"]["search"]["targets"]["c100_kd"]["n"] == 12


def test_accepted_children_beat_their_parent_by_the_margin(full_run):
    out, _ = full_run
    for record in RunDirectory(out).log():
        if record["accepted"]:
            assert record["child_jcm"] - record["parent_jcm"] >= EVOLUTION.margin - 1e-12
        else:
            assert record["child_jcm"] is None and record["attempts"] == EVOLUTION.retry_cap


def test_same_seed_same_run_and_another_seed_differs(settings, full_run, tmp_path):
    out, report = full_run
    again = run_search(settings, tmp_path / "again", quiet=True)
    assert _without_timing(RunDirectory(tmp_path / "again").log()) == _without_timing(RunDirectory(out).log())
    assert again["genome"] == report["genome"]
    other = replace(settings, evolution=replace(EVOLUTION, seed=4))
    run_search(other, tmp_path / "other", quiet=True)
    assert _without_timing(RunDirectory(tmp_path / "other").log()) != _without_timing(RunDirectory(out).log())


def test_resumed_run_ends_identical_to_uninterrupted(settings, full_run, tmp_path):
    out, report = full_run
    stopped = run_search(settings, tmp_path / "resumed", stop_after=2, quiet=True)
    assert stopped["finished"] is False and stopped["iteration"] == 2
    resumed = run_search(None, tmp_path / "resumed", resume=True, quiet=True)
    assert resumed["finished"] is True
    run_a, run_b = RunDirectory(out), RunDirectory(tmp_path / "resumed")
    assert _without_timing(run_b.log()) == _without_timing(run_a.log())
    state_a, state_b = run_a.checkpoint(), run_b.checkpoint()
    assert state_b["population"] == state_a["population"]
    assert state_b["rng_state"] == state_a["rng_state"]
    assert resumed["genome"] == report["genome"]
    assert resumed["test"] == report["test"]


def test_existing_run_directory_is_not_overwritten(settings, full_run):
    out, _ = full_run
    before = (out / "log.jsonl").read_text()
    with pytest.raises(RunDirError, match="--resume"):
        run_search(settings, out, quiet=True)
    assert (out / "log.jsonl").read_text() == before


def test_resume_of_a_directory_that_is_not_a_run(tmp_path):
    with pytest.raises(RunDirError, match="not a run directory"):
        run_search(None, tmp_path, resume=True, quiet=True)


def test_seed_proxies_enter_the_initial_population(settings, tmp_path):
    published = ("block_mean(to_mean_scalar(element_wise_sum(frobenius_norm(min_max_normalize(F2)), "
                 "element_wise_sqrt(sigmoid(F4g)))))")
    seeded = replace(settings, seed_proxies=(published,), evolution=replace(EVOLUTION, iterations=0))
    run_search(seeded, tmp_path / "seeded", quiet=True)
    population = RunDirectory(tmp_path / "seeded").checkpoint()["population"]
    assert population[0]["genome"] == published


def test_a_population_too_large_to_fill_is_named_not_the_statistics(settings, tmp_path):
    """``--population 99999999999`` ended with ``check the statistics and targets``, though the draws were fine (the
    population is now bounded at 100,000, which 300 draws still cannot fill)."""
    from autoprox.core.errors import SearchError

    huge = replace(settings, evolution=replace(EVOLUTION, population_size=10 ** 5, iterations=0, max_init_attempts=300))
    with pytest.raises(SearchError, match=r"^population 100000: only \d+ valid distinct genomes after 300 random "
                                          r"draws \(\d+ invalid\); give a smaller population \(default 20\)$"):
        run_search(huge, tmp_path / "huge", quiet=True)


def test_ctrl_c_saves_and_the_run_resumes(small_bench_file, session_cache, tmp_path, capsys, monkeypatch):
    """A real SIGINT to the CLI: exit 130, best.json written, and --resume finishes the run (the resume runs in
    this process: the same command without a fresh interpreter's imports)."""
    out = tmp_path / "interrupted"
    env = dict(os.environ, AUTOPROX_CACHE=str(session_cache.root))
    command = [sys.executable, "-m", "autoprox.cli", "search", "--bench", str(small_bench_file), "--out", str(out),
               "--batch-size", "2", "--workers", "1", "--population", "5", "--iterations", "1000000",
               "--retry-cap", "4", "--search-fraction", "0.75", "--quiet"]
    # A shell that runs the tests in the background (as CI may) ignores SIGINT, and children
    # inherit that; give the search the default disposition so Python turns it into Ctrl-C.
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.time() + 300
        while time.time() < deadline:
            checkpoint = out / "checkpoint.json"
            if checkpoint.is_file() and json.loads(checkpoint.read_text())["iteration"] >= 2:
                break
            time.sleep(0.2)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=300)
    finally:
        if process.poll() is None:  # never leave a million-iteration search running
            process.kill()
            process.wait()
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr
    best = json.loads((out / "best.json").read_text())
    assert best["finished"] is False and best["iteration"] >= 2
    log = RunDirectory(out).log()
    assert [r["iteration"] for r in log] == list(range(1, best["iteration"] + 1))
    monkeypatch.setenv("AUTOPROX_CACHE", env["AUTOPROX_CACHE"])
    code, _, err = run_cli(capsys, "search", "--resume", "--out", out, "--iterations", best["iteration"] + 2, "--quiet")
    assert code == 0, err
    assert json.loads((out / "best.json").read_text())["iteration"] == best["iteration"] + 2


def _descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _alive(pids: set[int]) -> set[int]:
    alive = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            alive.add(pid)
    return alive


def _start(argv, env) -> subprocess.Popen:
    # A shell running the suite in the background ignores SIGINT, and children inherit that.
    return subprocess.Popen([sys.executable, "-m", "autoprox.cli", *map(str, argv)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _stop_at_iteration(process: subprocess.Popen, out: Path, iteration: int) -> str:
    """SIGTERM to ``process`` once the run in ``out`` has checkpointed ``iteration``; its stderr (killed if it hangs)."""
    checkpoint = out / "checkpoint.json"
    try:
        _wait_for(lambda: checkpoint.is_file() and json.loads(checkpoint.read_text())["iteration"] >= iteration,
                  process)
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return stderr


def _workers_once_computing(process: subprocess.Popen, cache: Path) -> set[int]:
    """The processes under ``process`` seen until its first statistics entry is in ``cache``, and then."""
    workers: set[int] = set()

    def computing() -> bool:
        workers.update(_descendants(process.pid))
        return len(list(cache.rglob("*.npz"))) >= 1

    _wait_for(computing, process)
    workers.update(_descendants(process.pid))
    return workers


def _wait_for(condition, process, timeout=300) -> None:
    deadline = time.time() + timeout
    while not condition():
        if process.poll() is not None or time.time() > deadline:
            process.kill()
            raise AssertionError(f"never happened; the process said: {process.communicate()[1][-2000:]}")
        time.sleep(0.1)


@pytest.mark.parametrize("column, value, message", [
    ("flower_kd_acc", None, "target 'flower_kd' has no measured value"),
    ("chaoyang_kd_acc", 84.0, r"target 'chaoyang_kd' has one constant value \(84\)"),
])
def test_a_target_that_cannot_rank_is_refused_before_any_statistics(af_small, tmp_path, capsys, column, value,
                                                                    message):
    entries = entries_of(af_small, range(len(af_small)))
    for entry in entries:
        entry[column] = value
    bench = written_jsonl(tmp_path / "bench.jsonl", entries)
    cache = tmp_path / "cache"
    started = time.perf_counter()
    code, _, err = run_cli(capsys, "search", "--bench", bench, "--out", tmp_path / "run", "--cache-dir", cache,
                           "--batch-size", "2", "--quiet")
    line = one_error_line(err)
    assert code == 2 and "bench.jsonl" in line
    import re

    assert re.search(message, line), line
    assert time.perf_counter() - started < 30
    assert not cache.exists() or not list(cache.rglob("*.npz"))  # no statistics computed
    assert not (tmp_path / "run").exists()


def test_a_protocol_whose_fold_cannot_rank_a_target_is_refused_before_anything_is_written(af_small, tmp_path, capsys):
    """A null accuracy is an unlabelled architecture: each outer fold's search part (what its search learns from)
    and test part must rank every target, checked up front. The protocol used to pass the check on the default
    split, write protocol.json, and stop at the first fold whose search was refused."""
    entries = entries_of(af_small, range(len(af_small)))  # 16 architectures
    for entry in entries[4:]:
        entry["flower_kd_acc"] = None
    bench = written_jsonl(tmp_path / "bench.jsonl", entries)
    cache = tmp_path / "cache"
    code, _, err = run_cli(capsys, "evaluate", "--bench", bench, "--targets", "c100_kd,flower_kd", "--folds", "2",
                           "--out", tmp_path / "protocol", "--cache-dir", cache, "--quiet")
    assert code == 2 and not (tmp_path / "protocol").exists() and not cache.exists()
    assert re.fullmatch(r"autoprox: error: bench\.jsonl: target 'flower_kd' has only [0-2] measured value\(s\) on the "
                        r"(search|test) part of repeat-0/fold-[01]; at least 3 are needed to rank architectures; give "
                        r"fewer --folds or other --targets", one_error_line(err))


@pytest.mark.parametrize("options, message", [
    (["--aggregation", "sum", "--seed-proxies", "autoprox_a"],
     "seed proxy block_mean(.*) uses an aggregation or input outside this search's genome space"),
    (["--cv-folds", "20"], r"cross-validation needs between 2 and 12 folds, got 20"),
    (["--terminals", "stats,zoo", "--stat-seeds", "0,1"], "--terminals zoo reads one network per architecture"),
])
def test_a_refused_start_leaves_no_run_directory_and_the_corrected_command_runs(af_small_file, session_cache,
                                                                               tmp_path, capsys, options, message):
    """These refusals used to come after config.json and hall_of_fame.json were written (and the search
    split's statistics computed): the corrected command was then refused as "already holds a run"."""
    import re

    out, cache = tmp_path / "run" / "inner", tmp_path / "cache"
    common = ["--bench", af_small_file, "--batch-size", "2", "--workers", "1", "--search-fraction", "0.75",
              "--population", "4", "--iterations", "1", "--retry-cap", "3", "--quiet"]
    code, text, err = run_cli(capsys, "search", *common, "--cache-dir", cache, "--out", out, *options)
    assert code == 2 and re.search(message, one_error_line(err)), err
    assert not (tmp_path / "run").exists()  # not even the folder
    assert not cache.exists() or not list(cache.rglob("*.npz"))  # no statistics computed
    if options[0] == "--aggregation":  # the corrected command starts in the same --out
        code, text, err = run_cli(capsys, "search", *common, "--cache-dir", session_cache.root, "--out", out,
                                  "--seed-proxies", "autoprox_a")
        assert code == 0, err
        first = json.loads((out / "evaluations.jsonl").read_text().splitlines()[0])
        assert first["genome"].startswith("block_mean(to_mean_scalar(element_wise_sum(no_op(")


def test_sigterm_mid_search_stops_like_ctrl_c(af_small_file, session_cache, tmp_path, capsys, monkeypatch):
    out = tmp_path / "terminated"
    env = cli_env(session_cache)
    process = _start(["search", "--bench", af_small_file, "--out", out, "--batch-size", "2", "--workers", "1",
                      "--population", "4", "--iterations", "1000000", "--retry-cap", "3", "--search-fraction", "0.75",
                      "--quiet"], env)
    stderr = _stop_at_iteration(process, out, 2)
    assert process.returncode == 143, stderr
    assert "Traceback" not in stderr
    assert f"continue with: autoprox search --resume --out {out}" in stderr
    best = json.loads((out / "best.json").read_text())
    assert best["finished"] is False and best["iteration"] >= 2
    assert not (out / LOCK).exists()
    monkeypatch.setenv("AUTOPROX_CACHE", env["AUTOPROX_CACHE"])  # the resume, in this process
    code, _, err = run_cli(capsys, "search", "--resume", "--out", out, "--iterations", best["iteration"] + 1, "--quiet")
    assert code == 0, err


@pytest.mark.parametrize("stop, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["ctrl-c", "sigterm"])
def test_stopping_the_statistics_phase_gives_the_resume_hint_and_leaves_no_worker(af_small_file, tmp_path, stop,
                                                                                  status, capsys):
    out, cache = tmp_path / "run", tmp_path / "cache"  # a fresh cache: the statistics phase has work to do
    env = dict(os.environ, PYTHONPATH=str(REPO))
    argv = ["search", "--bench", af_small_file, "--out", out, "--batch-size", "2", "--workers", "2", "--cache-dir",
            cache, "--population", "4", "--iterations", "2", "--retry-cap", "3", "--search-fraction", "0.75", "--quiet"]
    process = _start(argv, env)
    try:
        workers = _workers_once_computing(process, cache)
        process.send_signal(stop)
        _, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == status, stderr
    assert "Traceback" not in stderr and f"continue with: autoprox search --resume --out {out}" in stderr
    assert not (out / "checkpoint.json").exists()  # stopped before the evolution began
    assert workers
    deadline = time.time() + 20
    while _alive(workers) and time.time() < deadline:
        time.sleep(0.2)
    assert not _alive(workers), "joblib workers outlived the stopped search"
    if stop == signal.SIGINT:  # (the same state either way: resuming it once is enough; in this process)
        code, _, err = run_cli(capsys, "search", "--resume", "--out", out, "--workers", "2")
        assert code == 0, err
        assert json.loads((out / "best.json").read_text())["finished"] is True


def test_workers_of_a_killed_search_exit_with_it(af_small_file, tmp_path):
    cache = tmp_path / "cache"
    process = _start(["cache", "build", "--bench", af_small_file, "--batch-size", "2", "--workers", "2", "--cache-dir",
                      cache], dict(os.environ, PYTHONPATH=str(REPO)))
    try:
        workers = _workers_once_computing(process, cache)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert workers
    deadline = time.time() + 20
    while _alive(workers) and time.time() < deadline:
        time.sleep(0.2)
    assert not _alive(workers), "joblib workers outlived the killed search"


def test_the_search_split_is_computed_before_the_evolution_and_the_test_split_after(small_settings, tmp_path,
                                                                                   monkeypatch):
    """The issue saw a short search compute the test split's statistics before it started."""
    import autoprox.proxies.scorers as proxy_module
    import autoprox.search.space_evaluator as engine  # where the search builds its statistics
    from autoprox.spaces.architectures import arch_key

    calls = []

    def recording(real):  # a spy: records which architectures each call asks for, then does the real work
        def build_cache(cache, requests, **kwargs):
            calls.append({arch_key(r.arch) for r in requests})
            return real(cache, requests, **kwargs)
        return build_cache

    monkeypatch.setattr(engine, "build_cache", recording(engine.build_cache))
    monkeypatch.setattr(proxy_module, "build_cache", recording(proxy_module.build_cache))
    report = run_search(small_settings, tmp_path / "run", quiet=True)
    bench = load_benchmark(small_settings.bench)
    search = {arch_key(bench.archs[i]) for i in report["split"]["search"]}
    test = {arch_key(bench.archs[i]) for i in report["split"]["test"]}
    assert calls[0] == search  # before the evolution: the search split's statistics alone
    assert test in calls[1:]  # the test split's only for the final report


@pytest.mark.slow
def test_every_search_ends_comparing_its_proxy_with_the_parameter_count_on_the_test_split(
        capsys, tmp_path, af_small_file, session_cache):
    out = tmp_path / "run"
    code, printed, err = run_cli(capsys, *small_search_argv(tmp_path, af_small_file, session_cache.root, "--iterations",
                                                        "1", "--out", str(out)))
    assert code == 0
    best = json.loads((out / "best.json").read_text())
    mine, theirs = best["test"]["jcm"], best["params"]["test"]["jcm"]
    line = f"test JCM {mine:.3f} against the parameter count's {theirs:.3f}: {params_verdict(best).split(': ')[1]}"
    assert printed.splitlines()[-1] == line  # issue 32: the last line (it used to be followed by "written to")
    # issue 32: after the evolution's last line, the final report says what it scores (it used to be silent
    # while the test split's statistics were computed), each split with its progress line
    after = err[err.rindex("evolution ["):].splitlines()[1:]
    assert after[0] == "final report: the best proxy on the search split (12 architectures)"
    assert after[1].startswith("search split statistics [") and " 12/12 " in after[1]
    assert "final report: the best proxy on the test split (4 architectures)" in after
    assert after[-2].startswith("test split statistics [") and " 4/4 " in after[-2]
    # adversarial pass 4 F15: a Kendall over 4 test architectures is noise, and the search says so
    assert after[-1] == f"autoprox: warning: {small_test_note(best)}"
    assert "the test split holds 4 architectures (fewer than 20)" in after[-1] and "about 0.49" in after[-1]
    code, shown, _ = run_cli(capsys, "show", str(out), "--top", "1", "--no-simplify")
    assert code == 0 and shown.splitlines()[1] == f"best.json: {line}"
    assert shown.splitlines()[2] == f"best.json: {small_test_note(best)}"
    # the committed paper-setting AutoFormer run: it does not beat the parameter count, and show says so
    code, shown, _ = run_cli(capsys, "show", str(REPO / "runs" / "autoformer-reference"), "--top", "1",
                             "--no-simplify")
    assert shown.splitlines()[1] == ("best.json: test JCM 0.172 against the parameter count's 0.283: "
                                     "the proxy does not beat it")


@pytest.mark.parametrize("mine, theirs, verdict", [
    (0.7712, 0.7709, "the proxy ties it (they differ by less than 0.0005)"),  # printed "beats it by 0.000" before
    (0.7762, 0.7709, "the proxy beats it by 0.005"),
    (0.172, 0.283, "the proxy does not beat it"),
])
def test_the_last_line_says_beats_ties_or_does_not_beat(mine, theirs, verdict):
    report = {"test": {"jcm": mine}, "params": {"test": {"jcm": theirs}}}
    assert params_verdict(report) == f"test JCM {mine:.3f} against the parameter count's {theirs:.3f}: {verdict}"


def test_a_run_directory_deleted_during_the_search_is_one_line_not_a_traceback(small_settings, tmp_path, capsys):
    """Adversarial pass 4 F12: ``rm -rf RUN`` while its search ran ended in a FileNotFoundError traceback."""
    import shutil

    out = tmp_path / "run"
    settings = replace(small_settings, evolution=replace(small_settings.evolution, iterations=3))
    with pytest.raises(RunDirError, match=f"the run directory {re.escape(str(out))} disappeared while the search "
                                          "was writing it"):
        run_search(settings, out, quiet=True, on_checkpoint=lambda run: shutil.rmtree(run.path))
    assert not out.exists()


def test_a_test_split_of_fewer_than_20_architectures_is_noted_with_kendall_s_spread():
    """Adversarial pass 4 F15: a run judged on 5 test architectures said "test JCM 1.000" without a word."""
    def report(test, jcm=0.5, **split):
        return {"test": {"jcm": jcm}, "split": {"search": list(range(len(test), 30)), "test": test, **split}}

    note = small_test_note(report(list(range(5))))
    assert note.startswith("the test split holds 5 architectures (fewer than 20): a Kendall over 5 has a standard "
                           "deviation of about 0.41")
    assert small_test_note(report(list(range(19)))) is not None
    assert small_test_note(report(list(range(20)))) is None
    assert small_test_note(report([])) is None  # no test split: nothing judged on it
    assert small_test_note(report(list(range(5)), jcm=None)) is None  # test figures deferred
    several = {"test": {"jcm": 0.5}, "split": [{"space": "pit", "search": [0], "test": list(range(1, 40))},
                                               {"space": "tiny", "search": [0], "test": [1, 2, 3]}]}
    assert small_test_note(several).startswith("tiny's test split holds 3 architectures")


@pytest.mark.slow
def test_sigterm_stops_at_once_and_leaves_the_test_figures_to_the_resume(tmp_path, af_tiny_file, capsys):
    cache, out = tmp_path / "cache", tmp_path / "run"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    process = _start(small_search_argv(tmp_path, af_tiny_file, cache, "--iterations", "1000000", "--quiet",
                                   "--out", str(out)), env)
    stderr = _stop_at_iteration(process, out, 1)
    assert process.returncode == 143, stderr
    best = json.loads((out / "best.json").read_text())
    assert best["test"] == {"none": "not computed: the search was stopped before its end; resuming it computes them"}
    search_part = len(best["split"]["search"])
    assert len(list(cache.rglob("*.npz"))) == search_part  # no statistics of the test split were computed
    code, _, err = run_cli(capsys, "search", "--resume", "--out", out, "--iterations", best["iteration"] + 1,
                           "--quiet")  # the resume, in this process
    assert code == 0, err
    assert "jcm" in json.loads((out / "best.json").read_text())["test"]
    assert len(list(cache.rglob("*.npz"))) == len(best["split"]["search"]) + len(best["split"]["test"])


@pytest.mark.slow
def test_the_progress_line_shows_the_best_fitness_so_far(capsys, tmp_path, af_small_file, session_cache):
    import io

    from autoprox.core.progress import Progress

    stream = io.StringIO()
    Progress("evolution", stream=stream)(3, 3, note="best JCM +0.357")
    assert stream.getvalue().rstrip().endswith("] 3/3 00:00<--:-- best JCM +0.357")
    out = tmp_path / "run"
    code, _, err = run_cli(capsys, *small_search_argv(tmp_path, af_small_file, session_cache.root, "--iterations", "2",
                                                  "--out", str(out)))
    assert code == 0
    hall = json.loads((out / "hall_of_fame.json").read_text())
    best = max(entry["jcm"] for entry in hall["entries"])
    final = [line for line in err.splitlines() if line.startswith("evolution [")][-1]
    # the hall of fame's best, which a child that missed the population's margin may hold: "evaluated" says so
    assert " 2/2 " in final and final.endswith(f" best evaluated JCM {best:+.3f}")
