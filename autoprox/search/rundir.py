"""The run directory: what a search writes as it goes, and reads back to resume.

======================  ==============================================================
``config.json``         the full configuration (seeds, split, benchmark hash, cache key)
``log.jsonl``           one line per iteration, appended as it happens (unfiltered)
``log.jsonl.xz``        the same log xz-compressed, as a committed finished run stores it
                        (``scripts/runs_archive.py pack``); read when there is no ``log.jsonl``
``evaluations.jsonl``   every genome evaluated, with its fitness and iteration
``checkpoint.json``     population and RNG state after the last completed iteration
``best.json``           the best genome with search- and test-split figures
``hall_of_fame.json``   the best distinct proxies and the Pareto front (:mod:`autoprox.search.halloffame`)
======================  ==============================================================

A protocol's folder (``autoprox evaluate``, ``cross-space``, ``space-protocol``) holds its record,
``protocol.json``, beside its runs; :class:`RunDirectory` reads and writes it too. Every file name is
a constant of this module and spelled nowhere else; files of an older layout are converted here, on
reading (a version-1 hall of fame, a protocol record that kept only its last session's command).

JSON files are replaced atomically; the ``.jsonl`` logs are appended line by line
and, on resume, cut back to the checkpoint's iteration (a torn last line is dropped).
A resumed run whose log is only compressed continues it in ``log.jsonl`` (the compressed
file stays as it is, and ``log.jsonl`` is read from then on).
An append that finds the disk full is undone, so no torn line stays behind.

A process that writes a run holds its lock (:meth:`RunDirectory.lock`, the file
``.autoprox.lock`` with the holder's pid): a second one is refused with one line
naming that pid. The lock is an ``flock``, so the kernel releases it when its process
dies however it dies; a lock file left by a dead process is simply taken over.

Reading is strict: a JSON file that is not an object, not JSON or nested too deeply,
and a ``.jsonl`` line that is not a JSON object, raise :class:`RunDirError` naming
the file and the line. The one exception is a last line with no newline at its end,
which a process stopped while writing it leaves: it is skipped.
"""

from __future__ import annotations

import errno
import fcntl
import json
import lzma
import os
import re
import shlex
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from autoprox.core.atomic import (
    FULL_DISK_ERRNOS,
    atomic_write_json,
    atomic_write_text,
    check_new_folder,
    disk_full_error,
    json_problem,
    load_json,
    make_directory,
)
from autoprox.core.correlation import jcm as joint_metric
from autoprox.core.errors import ProxyError, RunDirError, no_such_path

CONFIG = "config.json"
LOG = "log.jsonl"
LOG_PACKED = LOG + ".xz"
EVALUATIONS = "evaluations.jsonl"
CHECKPOINT = "checkpoint.json"
BEST = "best.json"
HALL_OF_FAME = "hall_of_fame.json"
PROTOCOL = "protocol.json"
#: The files of a run directory.
RUN_FILES = (CONFIG, BEST, HALL_OF_FAME, LOG, LOG_PACKED, EVALUATIONS, CHECKPOINT)
LOCK = ".autoprox.lock"
#: Where a committed run keeps the files no report reads (its checkpoint, its evaluations): runs/README.md.
ARCHIVE = "archive.tar.xz"


def _parse_json(text: str, line: bool = True) -> Any:
    """``json.loads``; a ValueError saying why (nested too deeply included) when it is not JSON (``line``: and at
    which line of ``text``; false for one line of a file)."""
    try:
        return load_json(text)
    except json.JSONDecodeError as exc:
        raise ValueError(json_problem(exc, line)) from None


def read_json(path: Path) -> dict:
    """A JSON file holding an object; RunDirError naming the file when it is missing or holds anything else."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        raise RunDirError(f"{path} not found") from None
    except UnicodeDecodeError as exc:
        raise RunDirError(f"{path} is not valid JSON (not UTF-8 text: byte {exc.start})") from None
    except IsADirectoryError:
        raise RunDirError(f"{path} is a directory, not a JSON file") from None
    except NotADirectoryError:
        raise RunDirError(file_for_folder(_file_on_the_way(path))) from None
    try:
        data = _parse_json(text)
    except ValueError as exc:
        raise RunDirError(f"{path} is not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise RunDirError(f"{path} holds a JSON {_json_type(data)}, not an object")
    return data


def file_for_folder(path: Path) -> str:
    """What to say of the file ``path`` given where a run directory is read: a run's own file (``RUN/best.json``,
    a slip of tab completion) names the folder to give instead."""
    if path.name in RUN_FILES and (path.parent / CONFIG).is_file():
        return f"{path} is a run's {path.name}, not its folder: give the run directory, {path.parent}"
    return f"{path} is a file, not a run directory (give the folder that holds {CONFIG})"


def _file_on_the_way(path: Path) -> Path:
    """The first folder above ``path`` that is a file (what makes ``open`` say "not a directory")."""
    for parent in reversed(path.parents):
        if parent.is_file():
            return parent
    return path.parent


def _json_type(value: Any) -> str:
    names = {list: "array", str: "string", bool: "boolean", int: "number", float: "number", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def read_jsonl(path: Path) -> Iterator[dict]:
    """Records of a JSON Lines file; a torn (unparsable) line is skipped."""
    if not path.is_file():
        return
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            line = line.strip()
            if not line:
                continue
            try:
                yield _parse_json(line)
            except ValueError:
                continue


def read_records(path: Path) -> Iterator[tuple[int, dict]]:
    """(line number, record) of a run's JSON Lines file, strictly.

    A line that is not a JSON object raises RunDirError naming the file and the line,
    except a last line without its newline (a write cut short), which is skipped.
    A path ending in ``.xz`` is read through xz; one that is not xz data raises RunDirError.
    """
    if not path.is_file():
        return
    try:
        with (lzma.open if path.suffix == ".xz" else open)(path, "rb") as handle:
            lines = handle.read().split(b"\n")
    except lzma.LZMAError as exc:
        raise RunDirError(f"{path} is not a readable xz file ({exc})") from None
    for number, raw in enumerate(lines, start=1):
        torn = number == len(lines)  # after the last newline: complete lines always end with one
        if not raw.strip():
            continue
        try:
            record = _parse_json(raw.decode("utf-8"), line=False)
        except (ValueError, UnicodeDecodeError) as exc:
            if torn:
                return
            reason = f"not UTF-8 text: byte {exc.start}" if isinstance(exc, UnicodeDecodeError) else str(exc)
            raise RunDirError(f"{path}: line {number} is not valid JSON ({reason})") from None
        if not isinstance(record, dict):
            if torn:
                return
            raise RunDirError(f"{path}: line {number} holds a JSON {_json_type(record)}, not an object")
        yield number, record


def iteration_of(record: dict, path: Path, number: int) -> int:
    """The ``iteration`` of a log or evaluation record; RunDirError naming the line when it has none."""
    value = record.get("iteration", 0)
    if isinstance(value, bool) or not isinstance(value, int):
        raise RunDirError(f"{path}: line {number} has no integer 'iteration' (it has {value!r})")
    return value


class RunDirectory:
    """The files of one search run (or of a protocol's folder, :meth:`protocol`): their paths, readers and writers."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)

    def file(self, name: str) -> Path:
        return self.path / name

    def exists(self) -> bool:
        return self.file(CONFIG).is_file()

    def create(self, config: dict) -> None:
        """Start a run in a new or empty directory; a directory holding anything else is refused, untouched."""
        self.check_creatable()
        make_directory(self.path)
        atomic_write_json(self.file(CONFIG), config)

    def check_creatable(self) -> None:
        """RunDirError unless a new run can start here: a new or empty directory (its lock file aside)."""
        if self.exists():
            raise RunDirError(
                f"{self.path} already holds a run; resume it with --resume or choose another --out"
            )
        check_new_folder(self.path, f"run (no {CONFIG})", ignore=(LOCK,))

    def config(self) -> dict:
        if not self.exists():
            if self.path.is_file():
                raise RunDirError(file_for_folder(self.path))
            raise RunDirError(no_such_path(self.path, "give a run directory")
                              or f"{self.path} is not a run directory (no {CONFIG}){runs_inside_note(self.path)}")
        return read_json(self.file(CONFIG))

    def update_config(self, config: dict) -> None:
        atomic_write_json(self.file(CONFIG), config)

    def _append(self, name: str, record: dict) -> None:
        """Append one line; on a full disk the file is cut back to where it was, so no torn line stays."""
        path = self.file(name)
        data = (json.dumps(record) + "\n").encode()
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        try:
            start = os.fstat(fd).st_size
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
            except OSError as exc:
                written = os.fstat(fd).st_size - start
                os.ftruncate(fd, start)
                if exc.errno in FULL_DISK_ERRNOS:
                    raise disk_full_error(path, exc, written) from None
                raise
        finally:
            os.close(fd)

    def append_log(self, record: dict) -> None:
        self._append(LOG, record)

    def append_evaluation(self, record: dict) -> None:
        self._append(EVALUATIONS, record)

    def log_path(self) -> Path:
        """The iteration log to read: ``log.jsonl``, or ``log.jsonl.xz`` when only that is there."""
        plain, packed = self.file(LOG), self.file(LOG_PACKED)
        return packed if not plain.exists() and packed.is_file() else plain

    def log(self) -> list[dict]:
        """The records of the iteration log (:meth:`log_path`); RunDirError naming a bad line (a torn last
        line is skipped)."""
        return [record for _, record in read_records(self.log_path())]

    def evaluations(self) -> list[dict]:
        """The records of ``evaluations.jsonl``; RunDirError naming a bad line (a torn last line is skipped)."""
        return [record for _, record in read_records(self.file(EVALUATIONS))]

    def write_checkpoint(self, state: dict) -> None:
        atomic_write_json(self.file(CHECKPOINT), state)

    def checkpoint(self) -> dict | None:
        path = self.file(CHECKPOINT)
        return read_json(path) if path.is_file() else None

    @contextmanager
    def lock(self) -> Iterator[None]:
        """Hold this run's lock while writing it; RunDirError naming the holder's pid when another process does.

        The directory must exist. The lock file is removed on release.
        """
        with hold_lock(self.file(LOCK), f"{self.path} is being written by another autoprox process"):
            yield

    def write_best(self, best: dict) -> None:
        atomic_write_json(self.file(BEST), best)

    def best(self, missing_ok: bool = True) -> dict | None:
        """``best.json``, or None when the search has not written it yet (``missing_ok`` false: RunDirError
        naming it); RunDirError when it is unreadable."""
        path = self.file(BEST)
        return read_json(path) if path.is_file() or not missing_ok else None

    def best_genome(self) -> str:
        """The genome string ``best.json`` holds; RunDirError naming the file when it is missing, unreadable or
        holds none (a hand-edited file)."""
        genome = self.best(missing_ok=False).get("genome")
        if not isinstance(genome, str):
            raise RunDirError(f"{self.file(BEST)}: no 'genome' string")
        return genome

    def hall_of_fame(self) -> dict | None:
        """``hall_of_fame.json`` in the current format (version 2; a version-1 file converted), or None when
        there is none; RunDirError when it is not a JSON object.

        Version 1 (runs made before fitness and JCM were kept apart) held the fitness as each entry's
        ``jcm``: it becomes the entry's ``fitness``, and its plain JCM is computed again from its Kendall
        taus with the run's weights (:func:`recorded_weights`), the very sum the search made. Entries too
        malformed to convert are left as they are, for the hall-of-fame reader to name.
        """
        path = self.file(HALL_OF_FAME)
        if not path.is_file():
            return None
        data = read_json(path)
        try:
            older = int(data.get("version", 0)) < 2
        except (TypeError, ValueError, OverflowError):  # the hall-of-fame reader names it
            older = False
        if older:
            weights = recorded_weights(self.config())
            data = {**data, "version": 2,
                    **{key: [_entry_of_version_2(e, weights) for e in data[key]]
                       for key in ("entries", "pareto") if isinstance(data.get(key), list)}}
        return data

    def write_hall_of_fame(self, data: dict) -> None:
        atomic_write_json(self.file(HALL_OF_FAME), data)

    def has_protocol(self) -> bool:
        return self.file(PROTOCOL).is_file()

    def protocol(self) -> dict:
        """``protocol.json`` of a protocol's folder; RunDirError naming it when it is missing or unreadable."""
        return read_json(self.file(PROTOCOL))

    def write_protocol(self, protocol: dict) -> None:
        atomic_write_json(self.file(PROTOCOL), protocol)

    def protocol_commands(self, protocol: dict) -> tuple[list[str] | None, list[str] | None]:
        """(the command that started the protocol, the one of its last resume) as ``protocol`` records them.

        A record of an older autoprox kept only its last session's command: when that one is a resume, the
        first is looked up in the ``config.json`` of the protocol's runs (:func:`_original_command`).
        """
        command, resumed = _words(protocol.get("command")), _words(protocol.get("resumed_with"))
        if command and "--resume" in command and resumed is None:
            resumed, command = command, _original_command(self.path)
        return command, resumed

    def truncate_logs(self, iteration: int) -> None:
        """Keep only the records of iterations up to ``iteration`` (resume); a torn last line is dropped,
        any other bad line is refused (RunDirError naming it). A log kept only compressed is continued
        in ``log.jsonl``."""
        for name in (LOG, EVALUATIONS):
            path = self.log_path() if name == LOG else self.file(name)
            kept = [r for number, r in read_records(path) if iteration_of(r, path, number) <= iteration]
            atomic_write_text(self.file(name), "".join(json.dumps(r) + "\n" for r in kept))


def runs_inside(folder: str | os.PathLike) -> list[Path]:
    """The run directories (folders with a ``config.json``) directly inside ``folder``, sorted; empty when
    there are none or ``folder`` cannot be listed."""
    try:
        return sorted(p for p in Path(folder).iterdir() if p.is_dir() and (p / CONFIG).is_file())
    except OSError:
        return []


def runs_inside_note(folder: str | os.PathLike, shown: int = 4) -> str:
    """``; it holds the runs A, B: give one of them`` for a folder of runs (a transfer study's
    ``holdout-*`` folds), else empty: what a command that reads one run can be given instead."""
    runs = runs_inside(folder)
    if not runs:
        return ""
    names = ", ".join(str(p) for p in runs[:shown]) + (f" and {len(runs) - shown} more" if len(runs) > shown else "")
    return f"; it holds the run{'s' if len(runs) > 1 else ''} {names}: give {'one of them' if len(runs) > 1 else 'it'}"


def run_folder_proxy(part: str, label: str = "") -> str:
    """A proxy named by its run directory: ``RUN/best.json`` for a folder holding one (as ``export RUN`` reads it),
    else ``part`` as it is. A bare name is taken as a folder only when it holds one, so that a built-in or a table's
    column named like a folder stays what it is; ProxyError (``label`` before the folder, ``--proxy ``
    on the command line) for a path to a folder without one."""
    from autoprox.proxies.proxy import BUILTIN_PROXIES

    try:
        folder = Path(part).is_dir() and part not in BUILTIN_PROXIES
    except (OSError, ValueError):  # a genome string too long for a file name
        return part
    best = Path(part) / BEST
    if folder and best.is_file():
        return str(best)
    if folder and (Path(part) / CONFIG).is_file():  # a run, bare name or not: a name is no help here
        raise ProxyError(f"{label}{part}: a run directory with no {BEST} yet: its search writes it when it ends; "
                         f"continue it with autoprox search --resume --out {shlex.quote(part)}")
    if folder and (os.sep in part or part in (".", "..")):
        raise ProxyError(f"{label}{part}: a folder without {BEST}; give a run directory or a proxy file")
    return part


def finished_best(run_dir: str | os.PathLike) -> dict | None:
    """``best.json`` of the run in ``run_dir`` when it says the search finished, else None."""
    best = RunDirectory(run_dir).best()
    return best if isinstance(best, dict) and best.get("finished") is True else None


def finished_run_message(run_dir: str | os.PathLike, kind: str, then: str) -> str:
    """The one line a resume of the finished ``kind`` of search in ``run_dir`` says, which computes and rewrites
    nothing; ``then``: what else to do with the run."""
    run = Path(run_dir)
    return (f"{run} is a finished {kind}: --resume has nothing to continue, and nothing was rewritten; look at it "
            f"with autoprox show {shlex.quote(str(run))}, {then}")


def recorded_weights(config: dict) -> dict[str, float]:
    """The JCM weight of each target a run's ``config.json`` records (absent: 1); for a multi-space run,
    of each ``SPACE/TARGET`` pair: its benchmark's weight times its target's."""
    settings = config.get("settings") if isinstance(config, dict) else None
    if not isinstance(settings, dict):
        return {}
    weights = {str(t): float(w) for t, w in (settings.get("weights") or {}).items()}
    if not isinstance(settings.get("bench"), list):
        return weights
    benches = {str(s): float(w) for s, w in (settings.get("bench_weights") or {}).items()}
    targets = set(weights) | set(settings.get("targets") or ())
    spaces = config.get("spaces") or list(benches)
    return {f"{space}/{t}": benches.get(space, 1.0) * weights.get(t, 1.0) for space in spaces for t in targets}


def _entry_of_version_2(entry: Any, weights: dict[str, float]) -> Any:
    """A version-1 hall-of-fame entry (``jcm`` holding the fitness) with ``fitness`` and its plain ``jcm``;
    one that cannot be converted is returned as it is."""
    try:
        kendall = {str(t): float(v) for t, v in dict(entry["kendall"]).items()}
        return {**entry, "fitness": float(entry["jcm"]), "jcm": joint_metric(kendall, weights)}
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError):
        return entry


def _words(value: Any) -> list[str] | None:
    return [str(v) for v in value] if isinstance(value, list) and value else None


#: The ``command`` a run made from the Python API records: its call, one word (``autoprox.ProxySearch(...).fit()``).
_PYTHON_CALL = re.compile(r"autoprox\.[A-Za-z_]\w*\(.*\)(\.[A-Za-z_]\w*\(\))?", re.S)


def python_call(command: Any) -> str | None:
    """The Python call a recorded ``command`` is when the run was made from the API (``autoprox.api``): its one
    word, ``autoprox.NAME(...)`` or ``autoprox.NAME(...).fit()``; None for a command line's words."""
    words = _words(command)
    return words[0] if words is not None and len(words) == 1 and _PYTHON_CALL.fullmatch(words[0]) else None


def shown_command(command: list[str]) -> str:
    """A recorded command as it was given: a Python call as it is; a command line as typed in a shell, each word
    quoted as a shell needs and ``autoprox`` for the program however it was called (``python -m autoprox``)."""
    call = python_call(command)
    if call is not None:
        return call
    words = (["autoprox", *command[1:]] if command[0].endswith(("__main__.py", "autoprox", "autoprox.cli", "cli.py"))
             else command)
    return shlex.join(words)


def _original_command(folder: Path) -> list[str] | None:
    """The command that started a protocol whose record kept only its last session's (an older autoprox):
    the first of its runs' ``config.json`` (a fold's, a search's) recording one that is no resume, read from
    the folder or from the ``archive.tar.xz`` a committed protocol packs them in; None when none does."""
    import tarfile

    def original(data: Any) -> list[str] | None:
        command = _words(data.get("command")) if isinstance(data, dict) else None
        return command if command and "evaluate" in command and "--resume" not in command else None

    for config in sorted(folder.glob(f"*/*/{CONFIG}")):
        try:
            found = original(load_json(config.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue
        if found:
            return found
    archive = folder / ARCHIVE
    if archive.is_file():
        try:
            with tarfile.open(archive, "r:*") as packed:
                for member in packed:
                    if member.isfile() and member.name.count("/") == 2 and member.name.endswith(f"/{CONFIG}"):
                        handle = packed.extractfile(member)
                        found = original(load_json(handle.read())) if handle is not None else None
                        if found:
                            return found
        except (OSError, ValueError, tarfile.TarError, EOFError):
            return None
    return None


@contextmanager
def hold_lock(path: Path, busy: str) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (written with this pid) for the ``with`` block.

    RunDirError ``busy`` + the holder's pid when another process holds it. A lock left
    by a dead process holds nothing (the kernel released it) and is taken over.
    """
    while True:
        try:
            handle = open(path, "a+")
        except OSError as exc:
            if exc.errno in FULL_DISK_ERRNOS:
                raise disk_full_error(path, exc, 0) from None
            raise RunDirError(f"cannot create the lock {path} ({exc.strerror or exc}): a run is written only "
                              "where files can be created") from None
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            handle.close()
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise RunDirError(f"{busy} (pid {_holder(path)}, lock {path}); wait for it to end or stop it, "
                                  "then try again") from None
            if exc.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):  # a file system without locks
                warnings.warn(f"{path.parent} cannot be locked ({exc.strerror}); make sure no other process "
                              "writes it at the same time", stacklevel=3)
                yield
                return
            raise
        try:  # the file may have been removed by its last holder between open and flock: lock the new one
            same = os.fstat(handle.fileno()).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        handle.close()
    try:
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
    except OSError:  # a full disk must not stop the run from being read; the lock itself holds
        pass
    try:
        yield
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass
        handle.close()


def lock_holder(folder: str | os.PathLike) -> str | None:
    """The pid (as the lock file gives it) of the process writing the run or protocol in ``folder`` now, or
    None when none holds its lock (:func:`hold_lock`); read without taking the lock."""
    path = Path(folder) / LOCK
    try:
        handle = open(path)
    except OSError:
        return None
    with handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return _holder(path)
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
        return None


def _holder(path: Path) -> str:
    try:
        return path.read_text().strip() or "unknown"
    except OSError:
        return "unknown"
