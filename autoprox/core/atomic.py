"""Atomic file writes: a reader sees the old file or the new one, never half of one.

A write that fails because the file system is full (ENOSPC) or over quota (EDQUOT)
raises :class:`~autoprox.core.errors.DiskFullError` naming the file and how many bytes
reached the disk; the previous file, if any, is left as it was.

A path that is a symbolic link is written through: the file it points to is replaced and
the link stays a link (:func:`write_target`); a loop of links is refused in one line, as
``search --out`` refuses one (:func:`make_directory`). Every writer goes through
:func:`atomic_open`, so ``report``, ``export``, ``curves`` and the run directory's own
files behave alike.

Nothing autoprox did not write is overwritten: a command that writes one file where the user says
(``score``, ``export``, ``report``, ``curves``) checks it first with :func:`check_output_file`, which
lets a file through only when it is what that command writes (a re-run updates its own output), and
a command that starts a new folder of records refuses one holding other files (:func:`check_new_folder`).
"""

from __future__ import annotations

import errno
import json
import math
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Callable, Iterable, Iterator

import numpy as np

from autoprox.core.errors import AutoproxError, ConfigError, DiskFullError, RunDirError

#: Error numbers that mean "no room left": a full file system, an exhausted quota.
FULL_DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


def disk_full_error(path: str | os.PathLike, error: OSError, written: int) -> DiskFullError:
    """The one-line error of a write to ``path`` that ran out of room after ``written`` bytes."""
    reason = os.strerror(error.errno).lower() if error.errno else str(error)
    return DiskFullError(f"cannot write {path}: {reason} after {written} bytes")


def make_directory(path: str | os.PathLike, option: str = "--out") -> Path:
    """Create the folder ``path`` (and its parents) if need be; RunDirError in one line if it cannot be one.

    A loop of symbolic links, a symbolic link to nothing, a file on the way, a folder that
    cannot be created: each is named, with ``option`` as the thing to change.
    """
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        if exc.errno in FULL_DISK_ERRNOS:
            raise disk_full_error(path, exc, 0) from None
        raise RunDirError(f"{path} cannot be a folder: {_unusable(path, exc)}; choose another {option}") from None
    return path


def _unusable(path: Path, exc: OSError) -> str:
    """Why ``mkdir`` of ``path`` failed, in words."""
    try:
        os.stat(path)
    except OSError as stat_error:
        if errno.ELOOP in (exc.errno, stat_error.errno):
            return "it goes through a loop of symbolic links"
    if path.is_symlink() and not path.exists():
        return f"it is a symbolic link to {os.readlink(path)}, which does not exist"
    if exc.errno == errno.EEXIST or exc.errno == errno.ENOTDIR:
        return "it, or a folder above it, is a file"
    return exc.strerror or str(exc)


def write_target(path: str | os.PathLike, option: str = "--out",
                 error: type[AutoproxError] = RunDirError) -> Path:
    """The file a write to ``path`` replaces: ``path`` itself or, when it is a symbolic link (or a
    chain of them), the file at its end, so that the write updates the target and the link stays.

    A link to nothing names the file to create. ``error`` (one line naming ``option`` as the thing
    to change) when ``path``, or a folder above it, goes through a loop of symbolic links.
    """
    path = Path(path)
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise error(f"cannot write {path}: it goes through a loop of symbolic links; choose another {option}"
                        ) from None
    if not path.is_symlink():
        return path
    return Path(os.path.realpath(path))


#: Bytes read from each end of an existing output file to tell whether autoprox wrote it.
OWN_FILE_PROBE = 4096


def file_ends(path: str | os.PathLike, size: int = OWN_FILE_PROBE) -> tuple[bytes, bytes]:
    """The first and the last ``size`` bytes of ``path`` (the same bytes twice for a short file); two empty
    strings when it cannot be read."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(size)
            length = os.fstat(handle.fileno()).st_size
            if length <= size:
                return head, head
            handle.seek(length - size)
            return head, handle.read(size)
    except OSError:
        return b"", b""


def given_path(value: Any, what: str, error: type[AutoproxError] = ConfigError,
               needs: str = "a file or folder") -> Path:
    """``value`` as a :class:`~pathlib.Path`; ``error`` naming ``what`` in one line when it is no path at all (None,
    a number, a list), where ``Path(value)`` would raise a TypeError from inside pathlib, or an empty or blank
    string, which ``Path`` takes for the current folder (a message would name ``.``); ``needs``: what to give then."""
    if isinstance(value, str) and not value.strip():
        raise error(f"{what}: the path is empty; give {needs}")
    if isinstance(value, (str, os.PathLike)):
        return Path(value)
    raise error(f"{what}: expected a path (a str or an os.PathLike), got {type(value).__name__} {value!r}"[:200])


def refuse_empty_path(path: str | os.PathLike, option: str, error: type[AutoproxError], what: str = "file") -> None:
    """``error`` when ``path`` is empty or blank: ``Path("")`` is the current folder, which a message would name."""
    if not str(path).strip():
        raise error(f"{option} is empty: give the {what} to write")


def check_output_file(path: str | os.PathLike, command: str, ours: Callable[[bytes, bytes], bool],
                      option: str = "--out", error: type[AutoproxError] = RunDirError) -> Path:
    """Refuse, before any work, an output file that cannot be written or that autoprox did not write.

    The one check of every command that writes one file at a path the user gives (``score``, ``export``,
    ``report``, ``curves``): a file there is replaced only when ``ours`` recognises it as what ``command``
    itself writes, so that running a command again updates its own output and nothing else is overwritten.

    Parameters
    ----------
    path : str or os.PathLike
        The path given, as given: an empty string is refused (it is no file).
    command : str
        The command that writes the file, as the refusal names it (``"score"`` reads ``autoprox score``).
    ours : callable
        ``ours(head, tail)``: whether a file whose first and last :data:`OWN_FILE_PROBE` bytes are these was
        written by ``command`` (a header line, a marker the writer puts in).
    option : str
        The option that names the path, given as the thing to change.
    error : type of AutoproxError
        The error raised, in one line.

    Returns
    -------
    Path
        The file the write replaces (:func:`write_target`: a symbolic link's target).

    Raises
    ------
    AutoproxError
        ``error`` when ``path`` is empty, a folder (or ends in ``/``), a loop of symbolic links, not a regular file,
        or a file ``ours`` does not recognise; nothing is written.
    """
    refuse_empty_path(path, option, error)
    if str(path).endswith(("/", os.sep)):  # Path() would drop the slash and write a file named as the folder
        raise error(f"{option} {path} names a folder (it ends in /): give the file to write in it")
    target = write_target(path, option, error)
    if target.is_dir():
        raise error(f"cannot write {path}: it is a directory; choose another {option}")
    if os.path.lexists(target):
        if not target.is_file():
            raise error(f"cannot write {path}: it is not a regular file; choose another {option}")
        if not ours(*file_ends(target)):
            raise error(f"{path} exists and was not written by `autoprox {command}`; choose another {option} "
                        "(nothing was overwritten)")
    return target


def check_new_folder(path: str | os.PathLike, holds: str, ignore: Iterable[str] = (), option: str = "--out",
                     error: type[AutoproxError] = RunDirError) -> Path:
    """Refuse, before any work, a folder that a new record ``holds`` cannot start in: a file, or a folder
    that holds anything (the names in ``ignore`` aside), as ``search --out`` refuses one; nothing is touched.

    Parameters
    ----------
    path : str or os.PathLike
        The folder given (it may not exist yet).
    holds : str
        The file that would make the folder one of the command's own, as the refusal names it.
    ignore : iterable of str
        Names that do not count (a lock file).
    option : str
        The option that names the folder, given as the thing to change.
    error : type of AutoproxError
        The error raised, in one line.

    Returns
    -------
    Path
        ``path``.
    """
    refuse_empty_path(path, option, error, "folder")
    path = Path(path)
    skip = set(ignore)
    if path.exists() and not path.is_dir():
        raise error(f"{path} is a file, not a directory; choose another {option}")
    if path.is_dir() and any(p.name not in skip for p in path.iterdir()):
        raise error(f"{path} is not empty and holds no {holds}; its files are left as they are: "
                    f"choose another {option}")
    return path


@contextmanager
def output_write(path: str | os.PathLike, error: type[AutoproxError], hint: str = "") -> Iterator[None]:
    """Around the write of a command's output file: an ``OSError`` (a folder that refuses it, a name the file
    system refuses) becomes ``error`` in one line, ``cannot write PATH: REASON`` then ``hint``; a full disk
    keeps its own error (DiskFullError, which is both)."""
    try:
        yield
    except AutoproxError:
        raise
    except OSError as exc:
        # EEXIST or ENOTDIR: making the folders above the file met a file (os.strerror says only "File exists")
        reason = "a folder above it is a file" if exc.errno in (errno.EEXIST, errno.ENOTDIR) else exc.strerror or exc
        raise error(f"cannot write {path}: {reason}{hint}") from None


@contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w") -> Iterator[IO]:
    """Open a temporary file beside ``path`` (beside its target when it is a symbolic link); on success
    fsync and rename it over that file (:func:`write_target`)."""
    path = write_target(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        if exc.errno in FULL_DISK_ERRNOS:
            raise disk_full_error(path, exc, 0) from None
        raise
    os.chmod(tmp_name, 0o666 & ~_current_umask())  # mkstemp makes 0600; give the usual mode
    try:
        with os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.replace(tmp_name, path)
        except IsADirectoryError:  # a file of the command's own was replaced by a folder
            raise RunDirError(f"cannot write {path}: it is a directory; move it away (autoprox writes a file "
                              "there)") from None
    except BaseException as exc:
        written = _size(tmp_name)
        try:
            os.unlink(tmp_name)
        except FileNotFoundError:
            pass
        if isinstance(exc, OSError) and exc.errno in FULL_DISK_ERRNOS:
            raise disk_full_error(path, exc, written) from None
        raise


def _size(name: str) -> int:
    try:
        return os.stat(name).st_size
    except OSError:
        return 0


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_open(path, "w") as handle:
        handle.write(text)


def atomic_write_json(path: str | os.PathLike, data: Any) -> None:
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=False) + "\n")


def json_safe(value: Any) -> Any:
    """JSON-safe copy: NaN and infinities become None (strict JSON has neither), NumPy scalars plain numbers."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


class JSONTooDeep(json.JSONDecodeError):
    """A JSON text nested deeper than Python's decoder recurses (``[[[...]]]`` 10,000 deep), which ``json.loads``
    reports as a RecursionError: a :class:`json.JSONDecodeError` (so a ``ValueError``) saying so, so that every
    reading that names a text that is not JSON names this one too."""

    def __str__(self) -> str:
        return self.msg


def load_json(text: str | bytes) -> Any:
    """``json.loads(text)``; :class:`JSONTooDeep` where the decoder would raise a RecursionError: the one parse of
    JSON read from a file or a user."""
    try:
        return json.loads(text)
    except RecursionError:
        raise JSONTooDeep("nested too deeply to read", text if isinstance(text, str) else "", 0) from None


def json_problem(error: json.JSONDecodeError, line: bool = True) -> str:
    """Why a text is not JSON, and at which line: ``Expecting value at line 3`` (without ``line``, the reason
    alone, for a text that is one line of a file). Some of the decoder's reasons end in "at" themselves
    ("Invalid control character at"), which is not repeated; a text nested too deeply has no line to name."""
    reason = error.msg.removesuffix(" at")
    return f"{reason} at line {error.lineno}" if line and not isinstance(error, JSONTooDeep) else reason


def read_json_file(path: str | os.PathLike, what: str, error: type[Exception]) -> Any:
    """The JSON value in ``path``; ``error`` (an AutoproxError) naming the file and ``what`` it
    should be when it cannot be read or parsed: the one reading of user-given JSON files
    (proxy, ensemble and manifest files) so that they fail alike."""
    try:
        return load_json(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise error(f"{path}: not {what} ({exc})") from None
