"""The first hour of a new user, and adversarial input to the newer surfaces (issue 24).

Each test reproduces one bug or weak spot of a newcomer run and checks the fix; each has a
row in docs/failures.md.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autoprox.cli.main import main
from autoprox.core.errors import ArchitectureError
from autoprox.spaces.family import FamilySpace, load_family

REPO = Path(__file__).resolve().parent.parent
AUTOFORMER_FILE = REPO / "examples" / "spaces" / "autoformer-ti.json"


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _space_file(tmp_path: Path, **changes) -> Path:
    definition = json.loads(AUTOFORMER_FILE.read_text())
    definition["name"] = "huge"
    for key, value in changes.items():
        if key in definition["choices"]:
            definition["choices"][key] = value
        else:
            definition[key] = value
    path = tmp_path / "huge.json"
    path.write_text(json.dumps(definition))
    return path


# ---------------------------------------------------------------- bug 1: space-file bounds
def test_a_space_file_beyond_the_parameter_bound_is_refused_in_one_line(capsys, tmp_path):
    path = _space_file(tmp_path, embed_dim=[1_200_000_000], num_heads={"values": [3, 4], "per": "block"})
    code, out, err = run_cli(capsys, "spaces", "--space-file", str(path))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "largest architecture has" in err and "more than the bound of 1,000,000,000" in err
    assert "limits.max_params" in err


def test_a_space_file_beyond_the_activation_bound_is_refused(tmp_path):
    # few parameters, but a 1x1 patch makes 50,177 tokens: terabytes of attention matrices
    path = _space_file(tmp_path, patch_size=1, embed_dim=[192], depth=[12])
    with pytest.raises(Exception, match=r"GB of activations at batch 8, more than the bound of 64 GB") as caught:
        load_family(path)
    assert type(caught.value).__name__ == "SpaceDefinitionError"


def test_the_bounds_can_be_set_in_the_file(tmp_path):
    definition = json.loads(AUTOFORMER_FILE.read_text())
    definition["limits"] = {"max_params": 1_000_000}
    with pytest.raises(Exception, match="more than the bound of 1,000,000"):
        FamilySpace(definition)
    definition["limits"] = {"max_params": 1e9, "max_activation_gb": 64}
    space = FamilySpace(definition)
    assert space.digest == FamilySpace(json.loads(AUTOFORMER_FILE.read_text())).digest  # same networks, same cache
    with pytest.raises(Exception, match="limits.max_params"):
        FamilySpace(definition | {"limits": {"max_params": -1}})


def test_an_architecture_this_machine_cannot_hold_is_refused_before_any_allocation(tmp_path):
    from autoprox.networks.models import build_model

    path = _space_file(tmp_path, embed_dim=[120_000], depth=[12], limits={"max_params": 1e13, "max_activation_gb": 1e9})
    space = load_family(path)
    arch = space.extremes()[1]
    with pytest.raises(ArchitectureError, match="more than this machine's .* GB of memory; not built"):
        build_model(arch)


# ---------------------------------------------------------------- bug 2: evaluate --folds 100
@pytest.mark.slow
@pytest.mark.parametrize("folds", ["100", "6"])
def test_evaluate_refuses_folds_too_small_to_rank(capsys, tmp_path, af_small_file, folds):
    out = tmp_path / "protocol"
    code, _, err = run_cli(capsys, "evaluate", "--bench", str(af_small_file), "--folds", folds, "--iterations", "1",
                           "--batch-size", "2", "--workers", "1", "--quiet", "--cache-dir", str(tmp_path / "cache"),
                           "--out", str(out))
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("autoprox: error: --folds ")
    if folds == "6":  # 16 architectures: 2 per fold
        assert "leaves 2 test architecture(s) in a fold" in lines[0] and "give at most --folds 5" in lines[0]
    assert not out.exists() or not any(out.iterdir())
    assert not (tmp_path / "cache").exists() or not list((tmp_path / "cache").rglob("*.npz"))


# ---------------------------------------------------------------- bug 3: unusable --out
def _unusable_outs(root: Path) -> dict[str, str]:
    (root / "loopA").symlink_to("loopB")
    (root / "loopB").symlink_to("loopA")
    (root / "dangling").symlink_to("nowhere")
    (root / "file").write_text("not a folder")
    return {"loopA": "it goes through a loop of symbolic links", "loopA/run": "loop of symbolic links",
            "dangling": "it is a symbolic link to nowhere, which does not exist",
            "file/run": "it, or a folder above it, is a file"}


def test_an_unusable_out_is_refused_in_one_line_by_every_command(capsys, tmp_path, monkeypatch):
    from tests.conftest import PIT_FILE

    monkeypatch.chdir(tmp_path)
    for out, why in _unusable_outs(tmp_path).items():
        for command in (["search", "--bench", str(PIT_FILE), "--iterations", "1", "--quiet"],
                        ["vit-search", "--space", "pit", "--proxy", "params", "--samples", "2"]):
            code, _, err = run_cli(capsys, *command, "--out", out)
            assert code == 2, (command, out, err)
            errors = [line for line in err.splitlines() if line.startswith("autoprox: error: ")]
            assert errors == [err.strip().splitlines()[-1]] and "Traceback" not in err
            assert errors[0].startswith(f"autoprox: error: {out} cannot be a folder: ") and why in errors[0]
            assert errors[0].endswith("; choose another --out")
    assert (tmp_path / "file").read_text() == "not a folder"
    assert not (tmp_path / "nowhere").exists()


# ---------------------------------------------------------------- bug 4: the README's tour
TOUR_FOLDER = "/tmp/autoprox"
#: The README's sizes, and the smallest ones that still run each command's code.
TOUR_SCALE = {"--iterations": "1", "--samples": "2"}
TOUR_EXTRA = {"search": ["--batch-size", "2", "--population", "4", "--workers", "1", "--retry-cap", "2", "--quiet"],
              "vit-search": ["--batch-size", "2", "--workers", "1"], "show": ["--no-simplify"],
              "report": ["--no-simplify"]}


def readme_tour_commands() -> list[list[str]]:
    """The ``autoprox ...`` lines of the README's tour (its ```bash blocks), split as a shell would."""
    import re
    import shlex

    text = (REPO / "README.md").read_text()
    tour = text[text.index("## A 5-minute tour"):text.index("## More commands")]
    blocks = re.findall(r"```bash\n(.*?)```", tour, re.S)
    return [shlex.split(line)[1:] for block in blocks for line in block.splitlines() if line.startswith("autoprox ")]


def _scratch_copy(destination: Path) -> Path:
    """A copy of the checkout's tracked files, itself a git work tree tracking the same files."""
    import shutil
    import subprocess

    names = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z"], capture_output=True, check=True).stdout
    for name in names.decode().split("\0"):
        if name and (REPO / name).is_file():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, destination / name)
    subprocess.run(["git", "init", "-q"], cwd=destination, check=True)
    subprocess.run(["git", "add", "-A"], cwd=destination, check=True)
    return destination


@pytest.mark.slow
def test_the_readme_tour_runs_in_a_scratch_copy_and_the_committed_file_checks_pass(capsys, tmp_path, monkeypatch,
                                                                                    pit_small, session_cache):
    import shutil
    import subprocess
    import sys

    from autoprox.data.benchmark import write_benchmark_jsonl

    commands = readme_tour_commands()
    assert [c[0] for c in commands] == ["search", "show", "export", "rank", "vit-search", "report"]
    outs = [c[c.index("--out") + 1] for c in commands if "--out" in c]
    assert outs and all(out.startswith(TOUR_FOLDER + "/") for out in outs)  # the tour writes outside the checkout
    scratch = _scratch_copy(tmp_path / "checkout")
    tour, small_pit = tmp_path / "tour", tmp_path / "pit12.jsonl"
    write_benchmark_jsonl(pit_small, small_pit)
    monkeypatch.chdir(scratch)
    for command in commands:
        argv = [arg.replace(TOUR_FOLDER, str(tour)) for arg in command]
        argv = [TOUR_SCALE.get(argv[i - 1], arg) if i else arg for i, arg in enumerate(argv)]
        if argv[0] == "search":  # the 100 PiT architectures' statistics take minutes: 12 of them here
            argv[argv.index("--space"):argv.index("--space") + 2] = ["--bench", str(small_pit)]
        if argv[0] in ("search", "vit-search"):
            argv += ["--cache-dir", str(session_cache.root)]
        code, out, err = run_cli(capsys, *argv, *TOUR_EXTRA.get(argv[0], []))
        assert code == 0, (argv, err)
    assert (tour / "pit-short" / "best.json").is_file() and (tour / "vit-tour" / "top.json").is_file()
    assert (tour / "proxy.py").is_file()
    assert not subprocess.run(["git", "ls-files", "--others", "--exclude-standard"], cwd=scratch,
                              capture_output=True, text=True).stdout  # the tour wrote nothing in the checkout

    # a user who writes into runs/ anyway (as the tour once did): the checks of committed files still pass
    for name in ("pit-short", "vit-tour"):
        shutil.copytree(tour / name, scratch / "runs" / name)
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(scratch), "HOME": str(Path.home())}
    pytest = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    listed = subprocess.run([*pytest, "--collect-only", "tests/test_context.py"], cwd=scratch, capture_output=True,
                            text=True, env=env, timeout=300)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert "test_committed_run_opens_with_its_recorded_split_and_benchmark[pit-reference]" in listed.stdout
    assert "pit-short" not in listed.stdout and "vit-tour" not in listed.stdout
    checks = subprocess.run([*pytest, "tests/test_context.py::test_no_committed_run_file_holds_a_machine_path",
                             "tests/test_context.py::test_every_committed_run_is_found",
                             "tests/test_docs_tables.py::test_committed_tables_match_the_runs"],
                            cwd=scratch, capture_output=True, text=True, env=env, timeout=300)
    assert checks.returncode == 0 and "3 passed" in checks.stdout, checks.stdout + checks.stderr


# ---------------------------------------------------------------- the first command's end, and stopping
def _small_search(tmp_path, af_small_file, cache, *extra: str) -> list[str]:
    return ["search", "--bench", str(af_small_file), "--batch-size", "2", "--workers", "1", "--population", "4",
            "--retry-cap", "2", "--search-fraction", "0.75", "--cache-dir", str(cache), *extra]


@pytest.mark.slow
def test_every_search_ends_comparing_its_proxy_with_the_parameter_count_on_the_test_split(
        capsys, tmp_path, af_small_file, session_cache):
    out = tmp_path / "run"
    code, printed, err = run_cli(capsys, *_small_search(tmp_path, af_small_file, session_cache.root, "--iterations",
                                                        "1", "--out", str(out)))
    assert code == 0
    best = json.loads((out / "best.json").read_text())
    mine, theirs = best["test"]["jcm"], best["params"]["test"]["jcm"]
    verdict = f"the proxy beats it by {mine - theirs:.3f}" if mine > theirs else "the proxy does not beat it"
    line = f"test JCM {mine:.3f} against the parameter count's {theirs:.3f}: {verdict}"
    assert printed.splitlines()[-1] == line  # issue 32: the last line (it used to be followed by "written to")
    # issue 32: after the evolution's last line, the final report says what it scores (it used to be silent
    # while the test split's statistics were computed), each split with its progress line
    after = err[err.rindex("evolution ["):].splitlines()[1:]
    assert after[0] == "final report: the best proxy on the search split (12 architectures)"
    assert after[1].startswith("search split statistics [") and " 12/12 " in after[1]
    assert "final report: the best proxy on the test split (4 architectures)" in after
    assert after[-1].startswith("test split statistics [") and " 4/4 " in after[-1]
    code, shown, _ = run_cli(capsys, "show", str(out), "--top", "1", "--no-simplify")
    assert code == 0 and shown.splitlines()[1] == f"best.json: {line}"
    # the committed paper-setting AutoFormer run: it does not beat the parameter count, and show says so
    code, shown, _ = run_cli(capsys, "show", str(REPO / "runs" / "autoformer-reference"), "--top", "1",
                             "--no-simplify")
    assert shown.splitlines()[1] == ("best.json: test JCM 0.172 against the parameter count's 0.283: "
                                     "the proxy does not beat it")


@pytest.mark.slow
def test_patience_says_why_the_search_stopped(capsys, tmp_path, af_small_file, session_cache):
    out = tmp_path / "patient"
    code, _, err = run_cli(capsys, *_small_search(tmp_path, af_small_file, session_cache.root, "--iterations", "60",
                                                  "--patience", "1", "--out", str(out)))
    assert code == 0
    best = json.loads((out / "best.json").read_text())
    stopped = best["stopped_early"]["iteration"]
    assert stopped < 60
    assert f"no better proxy in 1 iterations (--patience 1): stopped at iteration {stopped} of 60" in err
    code, shown, _ = run_cli(capsys, "show", str(out), "--top", "1", "--no-simplify")
    assert (f"iteration {stopped} of 60 (stopped early: no better proxy in 1 iterations (--patience))"
            in shown.splitlines()[0])


@pytest.mark.slow
def test_sigterm_stops_at_once_and_leaves_the_test_figures_to_the_resume(tmp_path, af_small_file):
    import signal
    import subprocess
    import sys

    from tests.test_failures import _start, _wait_for

    cache, out = tmp_path / "cache", tmp_path / "run"
    env = dict(__import__("os").environ, PYTHONPATH=str(REPO))
    process = _start(_small_search(tmp_path, af_small_file, cache, "--iterations", "1000000", "--quiet",
                                   "--out", str(out)), env)
    try:
        checkpoint = out / "checkpoint.json"
        _wait_for(lambda: checkpoint.is_file() and json.loads(checkpoint.read_text())["iteration"] >= 1, process)
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 143, stderr
    best = json.loads((out / "best.json").read_text())
    assert best["test"] == {"none": "not computed: the search was stopped before its end; resuming it computes them"}
    search_part = len(best["split"]["search"])
    assert len(list(cache.rglob("*.npz"))) == search_part  # no statistics of the test split were computed
    finish = subprocess.run([sys.executable, "-m", "autoprox.cli", "search", "--resume", "--out", str(out),
                             "--iterations", str(best["iteration"] + 1), "--quiet"],
                            env=env, capture_output=True, text=True, timeout=300)
    assert finish.returncode == 0, finish.stderr
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
    code, _, err = run_cli(capsys, *_small_search(tmp_path, af_small_file, session_cache.root, "--iterations", "2",
                                                  "--out", str(out)))
    assert code == 0
    hall = json.loads((out / "hall_of_fame.json").read_text())
    best = max(entry["jcm"] for entry in hall["entries"])
    final = [line for line in err.splitlines() if line.startswith("evolution [")][-1]
    assert " 2/2 " in final and final.endswith(f" best JCM {best:+.3f}")


# ---------------------------------------------------------------- noise: joblib's worker warning, progress
def loky_leak_limit() -> int:
    """In a local worker: the growth loky takes for a memory leak."""
    from joblib.externals.loky import process_executor

    return process_executor._MAX_MEMORY_LEAK_SIZE


@pytest.mark.slow
def test_parallel_steps_keep_their_workers_and_report_progress_as_results_arrive(pit_small, small_spec):
    import warnings

    from autoprox.core.parallel import WORKER_GROWTH_LIMIT, LocalExecutor
    from autoprox.networks.zoo import compute_raw_values

    # the cause: loky stops a worker whose resident size grew 300 MB past its first task's, and
    # warns "A worker stopped while some jobs were given to the executor"; networks of every size
    # legitimately hold more than that, so each local worker raises the limit
    assert list(LocalExecutor(2).run(loky_leak_limit, [(), ()])) == [WORKER_GROWTH_LIMIT] * 2
    archs = list(pit_small.archs[:6])
    calls: list[int] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = compute_raw_values(["snip"], archs, small_spec, 0, 100, workers=2,
                                     progress=lambda done, total: calls.append(done))
    assert not [w for w in caught if "A worker stopped" in str(w.message)]
    assert calls == list(range(len(archs) + 1))  # one step per architecture, not 0 then 6
    assert all(r.ok for r in results["snip"])
    serial = compute_raw_values(["snip"], archs, small_spec, 0, 100, workers=1)
    assert [r.raw for r in results["snip"]] == [r.raw for r in serial["snip"]]  # each result at its own index


# ---------------------------------------------------------------- evaluate: partial summaries
def _partial_protocol(finished: int) -> dict:
    from autoprox.apps.protocol_summary import REFERENCE, summarise
    from autoprox.data.benchmark import load_benchmark
    from tests.conftest import PIT_FILE

    protocol = json.loads((REPO / "runs" / "protocol" / "pit-best" / "protocol.json").read_text())
    for fold in protocol["folds"][finished:]:
        fold["result"] = None
    spec, bench = protocol["protocol"], load_benchmark(PIT_FILE)
    protocol["summary"] = summarise(protocol["folds"][:finished], bench.accuracies, protocol["targets"],
                                    protocol["settings"]["weights"], [REFERENCE, *spec["baselines"]], samples=0,
                                    size=len(bench))
    return protocol


def test_a_partial_protocol_summary_prints_no_nan_and_no_empty_table():
    from autoprox.apps.protocol_summary import format_protocol

    one = format_protocol(_partial_protocol(1))
    assert "nan" not in one and "+-" not in one.split("\n", 3)[3]
    assert "one fold finished: the sd and the intervals need two" in one
    none = format_protocol(_partial_protocol(0))
    assert none.splitlines()[1:] == ["no fold has finished yet: no figures"]
    full = format_protocol(_partial_protocol(2))
    assert "+-" in full and "[" in full and "nan" not in full


def _protocol_settings(af_small_file, session_cache):
    from autoprox.search.evolution import EvolutionConfig
    from autoprox.search.settings import SearchSettings

    return SearchSettings(bench=str(af_small_file), targets=("c100_kd", "flower_kd"), batch_size=2,
                          cache_dir=str(session_cache.root), workers=1,
                          evolution=EvolutionConfig(population_size=4, iterations=2, retry_cap=3, top_k=2, seed=5))


@pytest.mark.slow
def test_an_interrupted_evaluate_gives_its_own_quoted_resume_hint(capsys, tmp_path, af_small_file, session_cache):
    import shlex

    from autoprox.apps.protocol import run_protocol

    out = tmp_path / "my protocol"
    stopped = run_protocol(_protocol_settings(af_small_file, session_cache), out, folds=2, stop_after=1, quiet=False)
    assert not stopped["finished"]
    err = capsys.readouterr().err
    assert f"continue with: autoprox evaluate --resume --out {shlex.quote(str(out))}" in err
    assert "autoprox search --resume" not in err  # the inner fold's own hint is not the way to continue


@pytest.mark.slow
def test_the_protocol_folder_has_its_own_lock(capsys, tmp_path, af_small_file, session_cache):
    from autoprox.search.rundir import hold_lock

    out = tmp_path / "protocol"
    out.mkdir()
    with hold_lock(out / ".autoprox.lock", "held by this test"):
        code, _, err = run_cli(capsys, "evaluate", "--bench", str(af_small_file), "--folds", "2", "--iterations", "1",
                               "--batch-size", "2", "--workers", "1", "--quiet", "--cache-dir",
                               str(session_cache.root), "--out", str(out))
    assert code == 2
    assert err.strip().splitlines() == [f"autoprox: error: {out} is being written by another autoprox process "
                                        f"(pid {__import__('os').getpid()}, lock {out / '.autoprox.lock'}); wait for "
                                        "it to end or stop it, then try again"]
    assert list(out.iterdir()) == []  # nothing written, the lock released


# ---------------------------------------------------------------- messages
def test_a_huge_genome_is_not_echoed_whole(capsys):
    genome = "foo" * 35_000  # 105 KB
    code, _, err = run_cli(capsys, "rank", "--proxy", genome, "--space", "pit")
    assert code == 2 and err.count("\n") == 1
    assert len(err) < 2_000 and __import__("re").search(r"foo\.\.\. \(105,00\d characters\)", err)


def _csv(tmp_path: Path, af_small, delimiter: str = ",", repeat_first: bool = False) -> Path:
    import csv

    from autoprox.spaces.architectures import arch_to_config

    path = tmp_path / "table.csv"
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle, delimiter=delimiter)
        writer.writerow(["arch", "c100_kd_acc"])
        rows = [(json.dumps(arch_to_config(a)), f"{af_small.accuracies['c100_kd'][i]:g}")
                for i, a in enumerate(af_small.archs)]
        writer.writerows(rows + (rows[:1] if repeat_first else []))
    return path


def test_a_csv_with_another_delimiter_names_it(capsys, tmp_path, af_small):
    code, _, err = run_cli(capsys, "rank", "--proxy", "params", "--bench", str(_csv(tmp_path, af_small, ";")))
    assert code == 2
    assert "the header is one column holding ';': the file seems to use ';' as its delimiter" in err


def test_a_duplicate_csv_row_names_its_line(capsys, tmp_path, af_small):
    path = _csv(tmp_path, af_small, repeat_first=True)
    code, _, err = run_cli(capsys, "rank", "--proxy", "params", "--bench", str(path))
    assert code == 2
    assert err.strip() == (f"autoprox: error: {path}: line {len(af_small) + 2}: entry {len(af_small)} repeats the "
                           "architecture of entry 0 with the same accuracies; list each architecture once")


def test_spaces_cuts_a_huge_description(capsys, tmp_path):
    definition = json.loads(AUTOFORMER_FILE.read_text()) | {"name": "wordy", "description": "many words " * 1_000_000}
    path = tmp_path / "wordy.json"
    path.write_text(json.dumps(definition))
    code, out, _ = run_cli(capsys, "spaces", "wordy", "--space-file", str(path))
    assert code == 0 and len(out) < 5_000
    assert "... (cut: 10,999,999 characters; --json shows it whole)" in out


def test_help_shows_no_percent_escapes_or_rst(capsys):
    from autoprox.cli.main import COMMANDS

    for command in [[], *([name] for name in COMMANDS)]:
        with pytest.raises(SystemExit):
            main([*command, "--help"])
        text = capsys.readouterr().out
        assert "%%" not in text and "``" not in text, command


# ---------------------------------------------------------------- bad input that should stop
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


@pytest.mark.parametrize("rule", ["cv-lcb", "hof-average"])
def test_select_by_the_hall_of_fame_refuses_a_corrupt_one(capsys, tmp_path, rule):
    import shutil

    run = shutil.copytree(REPO / "runs" / "pit-best", tmp_path / "run")
    (run / "evaluations.jsonl").unlink(missing_ok=True)
    (run / "hall_of_fame.json").write_text("{ not json")
    code, _, err = run_cli(capsys, "select", str(run), "--selection", rule, "--out", str(tmp_path / "chosen.json"))
    assert code == 2 and not (tmp_path / "chosen.json").exists()
    assert err.strip().splitlines() == [
        f"autoprox: error: {run / 'hall_of_fame.json'}: hall_of_fame.json unreadable ({run / 'hall_of_fame.json'} "
        "is not valid JSON (Expecting property name enclosed in double quotes at line 1)), and no evaluations to "
        f"rebuild it from; --selection {rule} chooses among the hall of fame: restore the file, or use "
        "--selection best"]


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="this machine has CUDA")
def test_device_cuda_without_cuda_says_so(capsys, tmp_path, af_small_file):
    for argv in (["search", "--bench", str(af_small_file), "--out", str(tmp_path / "run")],
                 ["rank", "--proxy", "params", "--bench", str(af_small_file)]):
        code, _, err = run_cli(capsys, *argv, "--device", "cuda")
        assert code == 2 and "cache build" not in err
        assert err.strip().startswith("autoprox: error: --device cuda: CUDA is not available on this machine")


# ---------------------------------------------------------------- options
@pytest.mark.slow
def test_a_free_tree_seeds_a_free_genome_search(capsys, tmp_path, af_small_file, session_cache):
    tree = "block_mean(to_mean_scalar(F1))"  # not the template's shape
    out = tmp_path / "free"
    code, _, err = run_cli(capsys, *_small_search(tmp_path, af_small_file, session_cache.root, "--iterations", "1",
                                                  "--genome", "free", "--seed-proxies", tree, "--quiet",
                                                  "--out", str(out)))
    assert code == 0, err
    config = json.loads((out / "config.json").read_text())
    assert config["settings"]["seed_proxies"] == [tree]
    first = json.loads((out / "evaluations.jsonl").read_text().splitlines()[0])
    assert first["genome"] == tree  # the seed was the first genome evaluated
    code, _, err = run_cli(capsys, *_small_search(tmp_path, af_small_file, session_cache.root, "--iterations", "1",
                                                  "--seed-proxies", tree, "--out", str(tmp_path / "template")))
    assert code == 2 and "does not have the template's shape" in err  # the template search still refuses it


@pytest.mark.slow
def test_vit_search_takes_the_space_a_space_file_registers(capsys, tmp_path, session_cache):
    out = tmp_path / "vit"
    code, _, err = run_cli(capsys, "vit-search", "--space-file", str(AUTOFORMER_FILE), "--space", "autoformer-ti-file",
                           "--proxy", "params", "--samples", "2", "--batch-size", "2", "--workers", "1",
                           "--cache-dir", str(session_cache.root), "--out", str(out))
    assert code == 0, err
    assert json.loads((out / "top.json").read_text())["space"] == "autoformer-ti-file"
    code, _, err = run_cli(capsys, "vit-search", "--space", "nope", "--proxy", "params", "--out", str(tmp_path / "x"))
    assert code == 2 and err.strip().startswith("autoprox: error: unknown search space 'nope', expected one of")


def _architecture_only_run(tmp_path: Path) -> Path:
    """A copy of the committed PiT run whose best proxy reads only architecture terminals (no statistics)."""
    import shutil

    run = shutil.copytree(REPO / "runs" / "pit-best", tmp_path / "run")
    best = json.loads((run / "best.json").read_text())
    best["genome"] = "block_mean(A_params)"
    (run / "best.json").write_text(json.dumps(best))
    return run


@pytest.mark.slow
def test_rank_a_run_proxy_finds_its_benchmark_and_the_table_uses_its_test_split(capsys, tmp_path):
    run = _architecture_only_run(tmp_path)
    test = json.loads((run / "config.json").read_text())["split"]["test"]
    cache = ["--cache-dir", str(tmp_path / "cache")]  # nothing is computed: the proxy reads no statistics
    code, out, err = run_cli(capsys, "rank", "--proxy", str(run / "best.json"), *cache)
    assert code == 0, err
    assert f"the one {run} was made with" in err
    assert out.splitlines()[0].endswith(f"(pit, split test, {len(test)} architectures)")
    code, out, err = run_cli(capsys, "rank", "--proxy", f"params,{run / 'best.json'}", "--format", "json", *cache)
    assert code == 0, err
    assert f"ranking 2 proxies on {len(test)} architectures" in err
    assert "split: test, the architectures the searches of the run proxies never saw" in err
    code, out, err = run_cli(capsys, "rank", "--proxy", f"params,{run / 'best.json'}", "--format", "json",
                             "--split", "all", "--space", "pit", *cache)
    assert code == 0 and "ranking 2 proxies on 100 architectures" in err


def test_a_recommended_proxy_on_its_own_benchmark_is_called_in_sample(tmp_path, pit_small):
    from autoprox.cli.rank import in_sample_note
    from autoprox.data.benchmark import load_benchmark, write_benchmark_jsonl
    from autoprox.proxies.proxy import resolve_proxy
    from tests.conftest import PIT_FILE

    proxy = resolve_proxy("recommended:pit/flower_kd")
    note = in_sample_note(proxy, load_benchmark(PIT_FILE))
    assert note.startswith("in-sample: recommended:pit/flower_kd was chosen by the evaluation protocol on this very "
                           "benchmark's architectures")
    other = tmp_path / "pit12.jsonl"
    write_benchmark_jsonl(pit_small, other)
    assert in_sample_note(proxy, load_benchmark(other)) is None
    assert in_sample_note(resolve_proxy("params"), load_benchmark(PIT_FILE)) is None


@pytest.mark.parametrize("space", ["autoformer", "pit"])
def test_the_searched_proxy_for_any_space_is_called_in_sample_on_the_spaces_it_saw(capsys, monkeypatch, space):
    """Issue 32: ``rank --proxy recommended:any/searched`` printed no note on AutoFormer or PiT, though its search
    saw every architecture of both (a genome proxy is named by its genome, so the name given is what tells)."""
    import autoprox.cli.rank as rank
    from autoprox.core.errors import ConfigError

    def stop(*args, **kwargs):  # the note is printed before anything is scored: stop there
        raise ConfigError("stopped before scoring")

    monkeypatch.setattr(rank, "evaluation_context", stop)
    code, _, err = run_cli(capsys, "rank", "--proxy", "recommended:any/searched", "--space", space)
    assert code == 2 and err.strip().splitlines()[-1] == "autoprox: error: stopped before scoring"
    assert ("in-sample: recommended:any/searched was searched on every architecture of nb201, flexibert, autoformer, "
            "pit, timm, this benchmark's included, so these figures are not an estimate on architectures it never saw") in err
    code, _, err = run_cli(capsys, "rank", "--proxy", "recommended:any/joint", "--space", space)  # the parameter count
    assert code == 2 and "in-sample" not in err
