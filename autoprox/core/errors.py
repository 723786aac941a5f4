"""The errors that mean bad input, as opposed to bugs.

Every error the engine raises because of something a user gave it (a file, an option,
a genome string, a run directory) derives from :class:`AutoproxError`. The command line
prints such an error as one line, ``autoprox: error: ...``, and exits with status 2;
anything else is a bug and keeps its traceback. Each subclass also derives from
``ValueError`` (or ``RuntimeError`` where the old class did), so code that caught the
built-in class keeps working.
"""

from __future__ import annotations

import os


class AutoproxError(Exception):
    """Bad input: a file, an option, a name or a run that cannot be used as asked."""

    #: Exit status of the command line for this error.
    exit_status = 2


class BenchmarkError(AutoproxError, ValueError):
    """A benchmark file that cannot be read, or a target it does not have."""


class ArchitectureError(AutoproxError, ValueError):
    """An architecture config that does not belong to a known space."""


class GenomeError(AutoproxError, ValueError):
    """A genome string or tree that is not a valid proxy expression."""


class ProxyError(AutoproxError, ValueError):
    """A proxy name, genome or file that cannot be used."""


class InputSpecError(AutoproxError, ValueError):
    """A minibatch specification (``--input``, ``--batch-size``) that cannot be used."""


class RunDirError(AutoproxError, ValueError):
    """A run directory that cannot be used as asked."""


class NotFittedError(RunDirError, AttributeError):
    """A fitted attribute (``best_``, ``hall_of_fame_``, ...) of a ``ProxySearch`` read before ``fit`` or
    ``from_run``; an ``AttributeError`` too, so that ``hasattr`` says False, as scikit-learn's does."""


class SearchError(AutoproxError, RuntimeError):
    """A search that cannot start or go on as configured."""


class CacheError(AutoproxError, OSError):
    """A statistics cache that cannot be written or read."""


class ExportError(AutoproxError, ValueError):
    """A proxy that cannot be exported as asked."""


class FormulaError(AutoproxError, ValueError):
    """A genome whose formula cannot be built."""


class CurvesError(AutoproxError, ValueError):
    """Runs whose curves cannot be drawn."""


class VitSearchError(AutoproxError, ValueError):
    """A ViT search that cannot run as configured (budget, space, options)."""


class ModelError(AutoproxError, ValueError):
    """A PyTorch model given to score that a proxy cannot read: no transformer blocks with timm's names, a
    descriptor it cannot count, a statistic its forward pass does not give."""


class ConfigError(AutoproxError, ValueError):
    """Settings that contradict each other or a run's recorded settings."""


class SchedulerLostError(ConfigError):
    """The Dask scheduler a command was given stopped answering while the command ran.

    ``address`` is the scheduler's address, ``reason`` what Dask said; the message ends with
    :attr:`hint`, how to go on (a command that knows more, such as ``search``, gives its own:
    :meth:`with_hint`).
    """

    def __init__(self, address: str, reason: str,
                 hint: str = "what was computed is kept: run the command again") -> None:
        self.address, self.reason, self.hint = address, reason, hint
        super().__init__(f"the Dask scheduler at {address} went away ({reason}); {hint}")

    def with_hint(self, hint: str) -> "SchedulerLostError":
        """The same error ending with ``hint`` instead."""
        return SchedulerLostError(self.address, self.reason, hint)


class RegistryError(ConfigError):
    """A name that cannot be registered (taken in its registry's name space) or that is not
    registered (:class:`autoprox.core.registry.Registry`)."""


class ReportError(AutoproxError, ValueError):
    """A folder or an output that an HTML report cannot be made of or written to."""


class DiskFullError(AutoproxError, OSError):
    """A file that could not be written because its file system is full (ENOSPC) or over quota (EDQUOT)."""


class PathTooLongError(AutoproxError, OSError):
    """A path given (a file, a folder, a run directory, or a string read as one) with a part longer than its
    file system allows (ENAMETOOLONG)."""


def path_too_long(error: OSError) -> PathTooLongError:
    """The one-line error for an ``OSError`` of errno ENAMETOOLONG: the part over 255 bytes, or the whole path's
    length where every part is short, and the path."""
    path = str(error.filename) if error.filename is not None else ""
    size = max((len(part.encode(errors="surrogateescape")) for part in path.replace("\\", "/").split("/")), default=0)
    whole = len(path.encode(errors="surrogateescape"))
    if size > 255:
        what = f"a part of {size:,} bytes, where the file system allows 255 bytes a part on most"
    elif whole >= 4096:  # every part short enough: the whole path is over the system's limit (PATH_MAX)
        what = f"{whole:,} bytes in all, where the system allows 4,095 bytes a path"
    else:
        what = "where the file system allows 255 bytes a part on most"
    return PathTooLongError(f"path too long ({what}; give a shorter one): {path}".rstrip(": "))


def one_line(error: BaseException) -> str:
    """The first line of an error's message (its class name when it has none)."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def no_such_path(path: object, expects: str) -> str | None:
    """``PATH: no such file or folder (EXPECTS)`` when ``path`` names nothing at all (no file, folder or link), so
    that a mistyped path is not reported as a folder of the wrong kind; None where it exists or cannot be a path
    (a genome longer than a file name). ``expects``: what the command takes instead, e.g. ``give a run
    directory``."""
    try:
        os.lstat(path)  # type: ignore[arg-type]
    except FileNotFoundError:
        return f"{path}: no such file or folder ({expects})"
    except (OSError, ValueError, TypeError):  # a part too long, a file on the way: the callers' own lines say so
        return None
    return None


#: Longest run of non-blank characters a message shows whole (a genome, a value pasted in).
LONGEST_WORD = 200


def cut_long_words(text: str, limit: int = LONGEST_WORD) -> str:
    """``text`` with every run of more than ``limit`` non-blank characters cut to its start and
    its length, so that a 100 KB genome or value pasted into a command is not echoed whole."""
    import re

    return re.sub(rf"\S{{{limit + 1},}}", lambda m: f"{m.group()[:limit // 2]}... ({len(m.group()):,} characters)",
                  text)


def mark_resume_said(exc: BaseException, command: str) -> None:
    """Note on an interruption that ``command``, how to continue, has been printed, so that an outer
    layer (a protocol around a search) does not print the same line again."""
    exc.autoprox_resume_said = command  # type: ignore[attr-defined]


def resume_said(exc: BaseException) -> str | None:
    """The command :func:`mark_resume_said` noted on ``exc``, if any."""
    said = getattr(exc, "autoprox_resume_said", None)
    return said if isinstance(said, str) else None


__all__ = [
    "AutoproxError", "ArchitectureError", "BenchmarkError", "CacheError", "ConfigError", "CurvesError",
    "DiskFullError", "ExportError", "FormulaError", "GenomeError", "InputSpecError", "PathTooLongError", "ProxyError",
    "RegistryError", "ReportError", "RunDirError", "SchedulerLostError", "SearchError", "VitSearchError",
    "cut_long_words", "mark_resume_said", "no_such_path", "one_line", "path_too_long", "resume_said",
]
