"""Making and writing the report of a folder: a run directory or a protocol directory.

:func:`render_report` tells which the folder is and puts the page together from
:mod:`autoprox.reports.html.run`, :mod:`autoprox.reports.html.protocol` or
:mod:`autoprox.reports.html.spaces`; :func:`write_report`
writes it atomically; :class:`CheckpointReports` is ``search --report``'s hook.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable

from autoprox.core.atomic import output_write
from autoprox.core.errors import ReportError, no_such_path
from autoprox.reports.html.page import REPORT_FILE, ReportMemo, check_report_out, page, write_page
from autoprox.reports.html.spaces import cross_space_body, is_cross_space
from autoprox.reports.html.protocol import protocol_body
from autoprox.reports.html.run import run_body
from autoprox.reports.html.spaces import SPACE_PROTOCOL_FORMAT, space_protocol_body
from autoprox.search.rundir import CONFIG, PROTOCOL, RUN_FILES, RunDirectory, runs_inside_note


#: What ``report`` takes, as its errors say it.
EXPECTED = f"report takes a run directory (holding {CONFIG}) or a protocol directory (holding {PROTOCOL})"
#: The files of a run or a protocol directory, named when one of them is given in place of its folder.
_FOLDER_FILES = {**{name: "a run's" for name in RUN_FILES}, PROTOCOL: "a protocol's"}


def _what_file(path: Path) -> tuple[str, str]:
    """What the file ``path``, given in place of a folder, is, in words (a run's file, a benchmark, ...),
    and what to do instead (empty when nothing more can be said)."""
    import shlex

    if path.name in _FOLDER_FILES:
        return f"{_FOLDER_FILES[path.name]} {path.name}", f"; give its folder: autoprox report {shlex.quote(str(path.parent))}"
    if path.suffix.lower() in (".pth", ".jsonl", ".json", ".csv"):
        from autoprox.core.errors import AutoproxError
        from autoprox.data.benchmark import load_benchmark

        try:
            bench = load_benchmark(path)
        except (AutoproxError, OSError):
            return "a file", ""
        return (f"a benchmark file ({bench.space}, {len(bench)} architectures), not a run",
                f"; a search on it makes one: autoprox search --bench {shlex.quote(str(path))} --out RUN")
    return "a file", ""


def report_kind(path: str | Path) -> str:
    """``run`` or ``protocol``; ReportError naming what the folder lacks when it is neither, or what the
    path is when it is no folder (a benchmark file given by mistake, a run's best.json)."""
    path = Path(path)
    missing = no_such_path(path, "give a run directory or a protocol directory")
    if missing:
        raise ReportError(missing)
    if path.is_file():
        what, instead = _what_file(path)
        raise ReportError(f"{path} is {what}: {EXPECTED}{instead}")
    if not path.is_dir():
        raise ReportError(f"{path} is not a directory: give a run directory or a protocol directory")
    if RunDirectory(path).has_protocol():
        return "protocol"
    if RunDirectory(path).exists():
        return "run"
    raise ReportError(f"{path} is neither a run directory (no {CONFIG}) nor a protocol directory "
                      f"(no {PROTOCOL}){runs_inside_note(path)}")


def render_report(path: str | Path, compute: bool = True, simplify: bool = True, memo: ReportMemo | None = None,
                  script: str = "", progress: Callable[[str], None] | None = None) -> str:
    """The HTML of the report of the run or protocol in ``path``.

    ``compute``: statistics missing from the cache are computed (progress on stderr) for the
    figures that need them; false: only what the cache holds is used, the rest said missing
    (a search in progress, whose test split is computed at its end). ``memo`` carries work
    from one rendering to the next.
    """
    memo = memo if memo is not None else ReportMemo()
    say = progress if progress is not None else _stderr
    if report_kind(path) == "protocol":
        protocol = RunDirectory(path).protocol()
        if protocol.get("format") == SPACE_PROTOCOL_FORMAT:
            title, body = space_protocol_body(Path(path) / PROTOCOL)
        elif is_cross_space(protocol):
            title, body = cross_space_body(Path(path), protocol, simplify=simplify, memo=memo)
        else:
            title, body = protocol_body(Path(path), simplify=simplify, memo=memo, protocol=protocol)
    else:
        title, body = run_body(Path(path), compute=compute, simplify=simplify, memo=memo, progress=say)
    return page(title, body, script)


def write_report(path: str | Path, out: str | Path | None = None, compute: bool = True, simplify: bool = True,
                 memo: ReportMemo | None = None, progress: Callable[[str], None] | None = None,
                 announce: Callable[[str], None] | None = None) -> Path:
    """Write the report of ``path`` into ``out`` (default ``PATH/report.html``); return where it went.

    A file at ``out`` that ``report`` did not write (its ``<meta name="generator">``) is refused with
    ReportError before anything is rendered, and left as it is; a report written before is replaced.
    ``announce``: told in one line, once the checks have passed, what the rendering's seconds go to.
    """
    report_kind(path)  # a file given in place of a folder is named as what it is, before anything is written
    out = Path(path) / REPORT_FILE if out is None else out
    target = check_report_out(out)  # a loop of links, a folder, someone else's file: refused; a link is written through
    out = Path(out)
    _check_writable(target)  # before the rendering's seconds are spent
    if announce is not None:
        announce(f"report of {path}: reading its statistics, scoring its proxies, drawing its figures"
                 + (" and simplifying its formulas (--no-simplify skips this)" if simplify else "") + " ...")
    document = render_report(path, compute=compute, simplify=simplify, memo=memo, progress=progress)
    return write_page(out, document)


class CheckpointReports:
    """``search --report``: called after each checkpoint, writes ``report.html`` into the run directory.

    Rendering a page takes seconds, an iteration may take less: a new page is written when at
    least ``every`` seconds (and three times the last rendering's duration) have passed since the
    last one (``every`` 0: at every checkpoint). Only cached statistics are read (the search computes the test split's at its end);
    a report that cannot be written is said once, as a warning, and the search goes on.
    """

    def __init__(self, every: float = 30.0, simplify: bool = True) -> None:
        self.every = every
        self.simplify = simplify
        self.memo = ReportMemo()
        self.next_time = 0.0
        self.warned = False

    def __call__(self, run) -> None:
        import time
        import warnings

        from autoprox.core.errors import AutoproxError, one_line

        now = time.monotonic()
        if now < self.next_time:
            return
        try:
            write_report(run.path, compute=False, simplify=self.simplify, memo=self.memo, progress=lambda _: None)
        except AutoproxError as exc:
            if not self.warned:
                warnings.warn(f"report.html not written at this checkpoint: {one_line(exc)}", stacklevel=2)
                self.warned = True
        took = time.monotonic() - now
        self.next_time = time.monotonic() + (max(self.every, 3 * took) if self.every > 0 else 0.0)


def _check_writable(out: Path) -> None:
    """ReportError when no file can be created beside ``out`` (a read-only folder, a missing one that cannot be made)."""
    import tempfile

    with output_write(out, ReportError):  # the one wording of a write the file system refuses
        out.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out.parent, prefix=f".{out.name}.", suffix=".check"):
            pass


def _stderr(message: str) -> None:
    print(f"autoprox report: {message}", file=sys.stderr, flush=True)


__all__ = ["CheckpointReports", "render_report", "report_kind", "write_report"]
