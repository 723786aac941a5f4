"""One protocol runner: the record, its check on resume, the loop over cuts, the summary.

Every protocol of autoprox cuts its architectures, targets, spaces or tables into **cuts**, runs what
each needs (searches, fits), and scores what they chose on what the cut held out, beside baselines:
the in-space protocol's outer folds (:mod:`autoprox.apps.protocols.outer_folds`), the leave-one-space-out
protocol's (left-out space, seed) searches (:mod:`autoprox.apps.protocols.cross_space`), the many-space
rank-formula protocol's left-out spaces (:mod:`autoprox.apps.protocols.space`), the transfer study's
held-out targets (:mod:`autoprox.apps.protocols.transfer`) and the few-label protocol's (table, k) cells
(:mod:`autoprox.apps.protocols.few_labels`). Each is a :class:`CutProtocol`: what its cuts are, how they
run, what a finished one stores, which baselines it scores once every cut is done, how it summarises and
where its record is written. :func:`run_cuts` owns the rest:

* the record, ``OUT/protocol.json`` (through :class:`~autoprox.search.rundir.RunDirectory`) or the
  protocol's own file, written atomically before anything runs and after every cut, with the summary of
  the cuts finished so far;
* on resume, :func:`previous_record` and :func:`check_recorded`: a record of another protocol is
  refused with one wording, ``"... holds another protocol (...)"``, and a finished cut is kept as
  it is (``"resuming: ... done"``), so a resume of a finished protocol recomputes nothing;
* an interruption (Ctrl-C, SIGTERM) outside a search's own handling prints the protocol's resume line.
"""

from __future__ import annotations

import datetime as _dt
import sys
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from autoprox.core.atomic import check_new_folder
from autoprox.core.errors import RunDirError, resume_said
from autoprox.search.rundir import ARCHIVE, LOCK, PROTOCOL, RunDirectory

#: What a protocol refused for its record tells the user to do, unless it says otherwise.
RESUME_WITHOUT = "resume without them, or use a new --out"


class CutProtocol(ABC):
    """One protocol as cuts over :func:`run_cuts`; its record is a JSON-safe dict it shapes itself."""

    #: Whether the loop stops at the first cut whose search stopped before its end (searches run one
    #: by one); when False, the cuts running beside it still finish and are kept.
    stop_at_unfinished: bool = True

    #: The command that continues the protocol, printed when a signal stops it anywhere in a cut (its search,
    #: its final report, its scoring); None: none is printed.
    resume_command: str | None = None

    @abstractmethod
    def cuts(self, record: Mapping) -> list[str]:
        """The names of the record's cuts, in order (their run directories, or their spaces)."""

    @abstractmethod
    def done(self, record: Mapping, cut: str) -> bool:
        """Whether ``cut`` is finished in ``record`` (its figures are there)."""

    @abstractmethod
    def run(self, record: dict, pending: list[str]) -> Iterable[tuple[str, Any]]:
        """Run the searches of the ``pending`` cuts (inline, side by side, or on a cluster) and yield
        ``(cut, outcome)`` as each finishes; called once, also when nothing is pending."""

    @abstractmethod
    def keep(self, record: dict, cut: str, outcome: Any) -> bool:
        """Store a finished cut's figures in ``record``; False when its search stopped before its end."""

    def baselines(self, record: dict, write: Callable[[], None]) -> None:
        """Score what is scored once every cut is finished (calling ``write`` after each); none by default."""

    @abstractmethod
    def summarise(self, record: dict) -> None:
        """Set the record's summary from its finished cuts, in place."""

    def written(self, record: dict) -> dict:
        """What ``protocol.json`` holds of ``record``: the record itself unless a protocol says otherwise."""
        return record

    def write(self, folder: Path, record: dict) -> None:
        """Write the record into ``folder``, atomically: ``protocol.json`` unless a protocol keeps a file of its own
        (a transfer study's ``transfer.json``, a few-label protocol's ``few_labels.json``)."""
        RunDirectory(folder).write_protocol(self.written(record))

    def close(self, record: dict, finished: bool) -> None:
        """Mark the record at the end of a session: ``finished`` and, when so, when it was ``written``."""
        record["finished"] = finished
        if finished:
            record["written"] = now()


def run_cuts(folder: Path, protocol: CutProtocol, record: dict, say: Callable[[str], None]) -> dict:
    """Run every unfinished cut of ``record`` into ``folder``, writing the record after each; return it.

    A cut already finished is kept as it is (``say`` names them: ``"resuming: ... done"``); the
    record is written before anything runs, after every cut that finishes, after each baseline and
    at the end, each time with the summary of what is finished.
    """
    def write() -> None:
        protocol.summarise(record)
        protocol.write(folder, record)

    cuts = protocol.cuts(record)
    done = [cut for cut in cuts if protocol.done(record, cut)]
    if done:
        say(f"resuming: {', '.join(done)} done")
    write()
    interrupted = False
    try:
        for cut, outcome in protocol.run(record, [cut for cut in cuts if cut not in done]):
            if not protocol.keep(record, cut, outcome):
                interrupted = True
                if protocol.stop_at_unfinished:
                    break
                continue
            write()
    except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM; a search inside has said how to continue itself
        if protocol.resume_command and resume_said(exc) != protocol.resume_command:
            print(f"interrupted; what was computed is kept: continue with: {protocol.resume_command}",
                  file=sys.stderr, flush=True)
        raise
    if not interrupted:
        protocol.baselines(record, write)
    protocol.close(record, not interrupted and all(protocol.done(record, cut) for cut in cuts))
    write()
    return record


def previous_record(folder: Path, resume: bool | None, what: str = "a protocol") -> dict | None:
    """The record in ``folder`` to continue, or None for a new protocol.

    ``resume``: True continues the record there (RunDirError when there is none, or when it is the
    trimmed record of a committed protocol whose runs are packed beside it); False starts a new one
    in an empty (or absent) ``folder``, refusing one that holds files; None continues a record when
    there is one and starts one otherwise.
    """
    run = RunDirectory(folder)
    if resume is None:
        return unarchived(run.protocol(), folder) if run.has_protocol() else None
    if resume:
        if not run.has_protocol():
            raise RunDirError(f"{folder}: no {PROTOCOL} to resume")
        return unarchived(run.protocol(), folder)
    if run.has_protocol():
        raise RunDirError(f"{folder} already holds {what}; continue it with --resume or choose another --out")
    check_new_folder(folder, PROTOCOL, ignore=(LOCK,))
    return None


def unarchived(record: dict, folder: Path) -> dict:
    """``record`` as read; RunDirError when it is the trimmed record of a committed protocol (runs/README.md)
    whose runs are packed in an archive beside it (with the line that unpacks them), or were not committed."""
    if isinstance(record, dict) and "archive" in record:
        archive = record["archive"]
        if "dropped" in archive:
            remake = archive.get("remake") or "run its command into a new --out"
            raise RunDirError(f"{folder / PROTOCOL} is the trimmed record of a committed protocol whose archive "
                              f"was not committed; to make it again: {remake}")
        packed = folder / str(archive.get("file", ARCHIVE))
        raise RunDirError(f"{folder}: its runs and whole {PROTOCOL} are packed in {packed}; "
                          f"unpack them first: python scripts/runs_archive.py unpack {folder}")
    return record


def check_recorded(path: Path, differing: Mapping[str, Iterable[str]], remedy: str = RESUME_WITHOUT) -> None:
    """Refuse a record of another protocol, in one wording: ``differing`` maps what differs (``"search
    settings"``, ``"protocol options"``, ...) to the keys that differ; nothing differing passes."""
    parts = [f"other {what} ({', '.join(keys)})" for what, keys in differing.items() if list(keys)]
    if parts:
        raise RunDirError(f"{path} holds another protocol ({'; '.join(parts)}); {remedy}")


def now() -> str:
    """The time of day in UTC, to the second, as records give it."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def recorded_command(previous: Mapping | None, argv: list[str]) -> dict:
    """The record's ``command`` (the one that started it) and, on resume, ``resumed_with`` beside it."""
    command = [Path(argv[0]).name, *argv[1:]]
    if previous:
        return {"command": previous["command"], "resumed_with": command}
    return {"command": command}


__all__ = ["RESUME_WITHOUT", "CutProtocol", "check_recorded", "now", "previous_record", "recorded_command",
           "run_cuts", "unarchived"]
