"""The run directory (:class:`autoprox.search.rundir.RunDirectory`): the one reader and writer of every run
file and of a protocol's record, the one place an older layout is converted, and the only spelling of the
file names."""

from __future__ import annotations

import ast
import json
import tarfile
from pathlib import Path

import pytest

from autoprox.core.correlation import jcm as joint_metric
from autoprox.core.errors import RunDirError
from autoprox.search import rundir
from autoprox.search.halloffame import HallOfFame, load_hall_of_fame
from autoprox.search.rundir import (
    BEST,
    CHECKPOINT,
    CONFIG,
    EVALUATIONS,
    HALL_OF_FAME,
    LOG,
    PROTOCOL,
    RunDirectory,
    recorded_weights,
)

PACKAGE = Path(rundir.__file__).resolve().parent.parent
GENOME = "block_mean(to_mean_scalar(element_wise_sum(frobenius_norm(F2), sigmoid(F4g))))"
CONFIG_JSON = {"settings": {"targets": ["a", "b"], "weights": {"a": 3.0, "b": 1.0}}, "command": ["autoprox", "search"]}


def _record(iteration: int, fitness: float) -> dict:
    return {"genome": GENOME, "canonical": GENOME, "valid": True, "jcm": fitness, "iteration": iteration,
            "kendall": {"a": fitness, "b": fitness / 2}, "reason": ""}


def test_every_file_kind_round_trips(tmp_path):
    run = RunDirectory(tmp_path / "run")
    assert run.best() is None and run.hall_of_fame() is None and run.checkpoint() is None
    run.create(CONFIG_JSON)
    assert run.exists() and run.config() == CONFIG_JSON
    run.update_config({**CONFIG_JSON, "extra": 1})
    assert run.config()["extra"] == 1
    log = [{"iteration": 1, "best_jcm": 0.25}, {"iteration": 2, "best_jcm": 0.5}]
    for record in log:
        run.append_log(record)
    evaluations = [_record(1, 0.25), _record(2, 0.5)]
    for record in evaluations:
        run.append_evaluation(record)
    assert run.log() == log and run.evaluations() == evaluations
    run.write_checkpoint({"iteration": 2, "population": []})
    assert run.checkpoint() == {"iteration": 2, "population": []}
    run.write_best({"genome": GENOME, "finished": True})
    assert run.best() == {"genome": GENOME, "finished": True}
    hall = HallOfFame.from_evaluations(evaluations)
    run.write_hall_of_fame(hall.to_json())
    assert run.hall_of_fame() == hall.to_json()
    assert HallOfFame.from_json(run.hall_of_fame()).entries == hall.entries
    run.truncate_logs(1)
    assert run.log() == log[:1] and run.evaluations() == evaluations[:1]
    assert {p.name for p in run.path.iterdir()} == {CONFIG, LOG, EVALUATIONS, CHECKPOINT, BEST, HALL_OF_FAME}


def test_a_protocol_record_round_trips_and_a_missing_one_is_named(tmp_path):
    folder = RunDirectory(tmp_path)
    assert not folder.has_protocol()
    with pytest.raises(RunDirError, match=f"{PROTOCOL} not found"):
        folder.protocol()
    record = {"protocol": {"folds": 2}, "command": ["autoprox", "evaluate"], "folds": []}
    folder.write_protocol(record)
    assert folder.has_protocol() and folder.protocol() == record
    assert folder.protocol_commands(record) == (["autoprox", "evaluate"], None)


def test_a_missing_best_is_none_or_named_and_a_corrupt_one_is_named(tmp_path):
    run = RunDirectory(tmp_path)
    assert run.best() is None
    with pytest.raises(RunDirError, match=f"{BEST} not found"):
        run.best(missing_ok=False)
    run.file(BEST).write_text("[1, 2]")
    with pytest.raises(RunDirError, match="holds a JSON array, not an object"):
        run.best()


def test_a_version_1_hall_of_fame_is_converted_by_the_reader(tmp_path):
    """Version 1 held each entry's fitness as ``jcm``: the reader gives ``fitness`` and the plain JCM computed
    with the run's weights, so that the hall-of-fame class reads version 2 alone."""
    run = RunDirectory(tmp_path / "run")
    run.create(CONFIG_JSON)
    entry = {"genome": GENOME, "canonical": GENOME, "jcm": 0.7, "kendall": {"a": 0.5, "b": 0.1},
             "complexity": 5, "iteration": 3}
    run.write_hall_of_fame({"format": "autoprox-hall-of-fame", "version": 1, "capacity": 20, "targets": ["a", "b"],
                            "evaluated": 4, "valid": 4, "iteration": 3, "entries": [entry], "pareto": [entry]})
    converted = run.hall_of_fame()
    assert converted["version"] == 2
    plain = joint_metric({"a": 0.5, "b": 0.1}, {"a": 3.0, "b": 1.0})
    for kept in (converted["entries"][0], converted["pareto"][0]):
        assert kept["fitness"] == 0.7 and kept["jcm"] == pytest.approx(plain, abs=1e-12)
    assert plain == pytest.approx(0.4, abs=1e-12)
    assert json.loads(run.file(HALL_OF_FAME).read_text())["version"] == 1, "reading never rewrites the file"
    top = load_hall_of_fame(run).hall.entries[0]
    assert top.fitness == 0.7 and top.jcm == pytest.approx(plain, abs=1e-12)


def test_recorded_weights_of_a_multi_space_run_multiply_benchmark_and_target_weights():
    config = {"spaces": ["pit", "af"], "settings": {"bench": ["x", "y"], "weights": {"a": 2.0},
                                                    "bench_weights": {"pit": 3.0}, "targets": ["a", "b"]}}
    assert recorded_weights(config) == {"pit/a": 6.0, "pit/b": 3.0, "af/a": 2.0, "af/b": 1.0}
    assert recorded_weights({"settings": {"weights": {"a": 2}}}) == {"a": 2.0}
    assert recorded_weights({}) == {}


def test_a_protocol_of_an_older_layout_has_its_first_command_found_in_its_runs(tmp_path):
    """An older protocol.json kept only its last session's command: when that is a resume, the first one is
    the command a fold run's config.json records (read from the folder, else from the archive)."""
    first = ["autoprox", "evaluate", "--space", "pit", "--out", "p"]
    resumed = ["autoprox", "evaluate", "--resume", "--out", "p"]
    folder = RunDirectory(tmp_path / "p")
    folder.path.mkdir()
    assert folder.protocol_commands({"command": resumed}) == (None, resumed)
    fold = folder.path / "repeat-0" / "fold-0"
    fold.mkdir(parents=True)
    (fold / CONFIG).write_text(json.dumps({"command": first}))
    assert folder.protocol_commands({"command": resumed}) == (first, resumed)
    assert folder.protocol_commands({"command": first, "resumed_with": resumed}) == (first, resumed)
    packed = RunDirectory(tmp_path / "packed")
    packed.path.mkdir()
    with tarfile.open(packed.file(rundir.ARCHIVE), "w:xz") as archive:
        archive.add(fold / CONFIG, arcname=f"repeat-0/fold-0/{CONFIG}")
    assert packed.protocol_commands({"command": resumed}) == (first, resumed)


def _string_constants(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.append((node.lineno, node.value))
    return found


def test_the_run_file_names_are_spelled_only_in_rundir():
    """No module but rundir.py holds a run file's name as a string of its own (or a path ending in one):
    every other one reads it from rundir's constants."""
    names = {*rundir.RUN_FILES, PROTOCOL}
    owned = {Path("search", "rundir.py"), Path("search", "settings.py")}  # settings.py: the settings work's (issue 33)
    spelled = [f"{path.relative_to(PACKAGE)}:{line}: {value!r}"
               for path in sorted(PACKAGE.rglob("*.py")) if path.relative_to(PACKAGE) not in owned
               for line, value in _string_constants(path)
               if value in names or any(value.endswith("/" + name) for name in names)]
    assert not spelled, "\n".join(spelled)


def test_a_python_call_is_told_from_a_command_line_and_shown_as_it_was_given():
    """A run made from Python records its call as its command (one word); shown as a command line, it was quoted
    as one shell word, and python -m pytest was shown as "autoprox"."""
    from autoprox.search.rundir import python_call, shown_command

    call = "autoprox.ProxySearch(space='pit', iterations=5, out='my runs/a').fit()"
    assert python_call([call]) == call and shown_command([call]) == call
    table = "autoprox.search_table('T.csv', target='acc')"
    assert python_call([table]) == table
    for words in (["autoprox", "search", "--space", "pit"], ["pytest", "-q"], ["autoprox.ProxySearch()", "x"],
                  ["ipykernel_launcher.py", "-f", "kernel.json"], "autoprox.ProxySearch().fit()", None, []):
        assert python_call(words) is None
    assert shown_command(["__main__.py", "search", "--out", "my run"]) == "autoprox search --out 'my run'"
    assert shown_command(["pytest", "-q"]) == "pytest -q"
