"""The one protocol runner (:mod:`autoprox.apps.protocols.runner`) on a tiny cut definition: each cut
squares its number, the summary sums what is finished."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autoprox.apps.protocols.runner import CutProtocol, check_recorded, previous_record, run_cuts
from autoprox.core.errors import RunDirError
from autoprox.search.rundir import PROTOCOL


class Squares(CutProtocol):
    """Cuts ``"1" .. "n"``; a cut's figure is its square; ``stop_at`` stops that cut's search unfinished."""

    def __init__(self, stop_at: str | None = None) -> None:
        self.stop_at, self.computed = stop_at, []

    def cuts(self, record):
        return list(record["cuts"])

    def done(self, record, cut):
        return record["cuts"][cut] is not None

    def run(self, record, pending):
        for cut in pending:
            if cut == self.stop_at:
                yield cut, None
                continue
            self.computed.append(cut)
            yield cut, int(cut) ** 2

    def keep(self, record, cut, outcome):
        if outcome is None:
            return False
        record["cuts"][cut] = outcome
        return True

    def summarise(self, record):
        record["summary"] = sum(v for v in record["cuts"].values() if v is not None)


def run_squares(out: Path, size: int, protocol: Squares, said: list[str]) -> dict:
    """A protocol over the runner: a new record, or the one in ``out`` when it has the same size."""
    record = previous_record(out, resume=None)
    if record is None:
        record = {"spec": {"size": size}, "cuts": {str(i): None for i in range(1, size + 1)}}
    else:
        check_recorded(out / PROTOCOL, {"protocol options": [k for k, v in {"size": size}.items()
                                                             if record["spec"][k] != v]})
    out.mkdir(exist_ok=True)
    return run_cuts(out, protocol, record, said.append)


def on_disk(out: Path) -> dict:
    return json.loads((out / PROTOCOL).read_text())


def test_a_resume_after_an_interrupted_cut_computes_only_what_is_missing(tmp_path):
    said: list[str] = []
    interrupted = Squares(stop_at="2")
    record = run_squares(tmp_path, 3, interrupted, said)
    assert interrupted.computed == ["1"]  # the loop stops at the unfinished cut
    assert on_disk(tmp_path) == record and record["cuts"] == {"1": 1, "2": None, "3": None}
    assert record["summary"] == 1 and record["finished"] is False and "written" not in record

    resumed = Squares()
    record = run_squares(tmp_path, 3, resumed, said)
    assert resumed.computed == ["2", "3"] and said[-1] == "resuming: 1 done"
    assert on_disk(tmp_path) == record and record["summary"] == 1 + 4 + 9 and record["finished"] is True

    again = Squares()
    assert run_squares(tmp_path, 3, again, said)["cuts"] == record["cuts"]
    assert again.computed == [] and said[-1] == "resuming: 1, 2, 3 done"


def test_cuts_running_beside_an_unfinished_one_are_kept_when_the_protocol_says_so(tmp_path):
    beside = Squares(stop_at="1")
    beside.stop_at_unfinished = False
    record = run_squares(tmp_path, 3, beside, [])
    assert beside.computed == ["2", "3"] and record["cuts"] == {"1": None, "2": 4, "3": 9}
    assert record["finished"] is False and on_disk(tmp_path)["summary"] == 13


def test_a_record_of_another_protocol_is_refused_in_one_wording(tmp_path):
    run_squares(tmp_path, 2, Squares(), [])
    before = on_disk(tmp_path)
    with pytest.raises(RunDirError, match=r"protocol.json holds another protocol \(other protocol options \(size\)\); "
                                          r"resume without them, or use a new --out"):
        run_squares(tmp_path, 3, Squares(), [])
    assert on_disk(tmp_path) == before  # nothing written


def test_a_new_protocol_wants_an_empty_folder_and_a_resume_a_record(tmp_path):
    with pytest.raises(RunDirError, match="no protocol.json to resume"):
        previous_record(tmp_path, resume=True)
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(RunDirError, match="is not empty and holds no protocol.json"):
        previous_record(tmp_path, resume=False)
    run_squares(tmp_path / "p", 2, Squares(), [])
    with pytest.raises(RunDirError, match="already holds a protocol; continue it with --resume"):
        previous_record(tmp_path / "p", resume=False)
    (tmp_path / "p" / PROTOCOL).write_text(json.dumps({"archive": {"file": "archive.tar.xz"}}))
    with pytest.raises(RunDirError, match="unpack them first: python scripts/runs_archive.py unpack"):
        previous_record(tmp_path / "p", resume=True)


class Interrupted(Squares):
    """Cut "2" is interrupted inside a search that prints how to continue (as the search engine does)."""

    resume_command = "autoprox evaluate --resume --out X"

    def run(self, record, pending):
        import sys

        from autoprox.core.errors import mark_resume_said

        for cut in pending:
            if cut == "2":
                interruption = KeyboardInterrupt()
                print(f"interrupted; what was computed is kept: continue with: {self.resume_command}",
                      file=sys.stderr)
                mark_resume_said(interruption, self.resume_command)
                raise interruption
            yield cut, int(cut) ** 2


def test_an_interruption_says_how_to_continue_once(tmp_path, capsys):
    """Adversarial pass 3, F6: evaluate's interrupt line was printed by the fold's search and again by the runner."""
    with pytest.raises(KeyboardInterrupt):
        run_squares(tmp_path, 3, Interrupted(), [])
    assert capsys.readouterr().err.count("continue with: autoprox evaluate --resume --out X") == 1
