"""``autoprox report PATH --serve``: the report on 127.0.0.1, refreshed as the run writes new iterations.

The standard library's HTTP server, bound to the loopback address only. ``/`` is the
report (the same page ``autoprox report`` writes, plus a few lines of inline script);
``/state`` is a short token of the run's files (their sizes and modification times).
The page asks for ``/state`` every two seconds and reloads itself when the token
changes; the server renders a new page only then, reusing what it already computed
(formulas, loaded statistics, test figures). Ctrl-C stops it.
"""

from __future__ import annotations

import errno
import sys
import threading
import warnings
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable

from autoprox.core.errors import AutoproxError, ReportError, one_line
from autoprox.reports.html.page import ReportMemo, esc
from autoprox.reports.html.report import render_report, report_kind
from autoprox.search.rundir import BEST, EVALUATIONS, HALL_OF_FAME, LOG, PROTOCOL, lock_holder

#: The only address served: the page is for the person at this machine.
HOST = "127.0.0.1"
#: Seconds between two questions of the page for ``/state``.
POLL_SECONDS = 2

#: Files whose change means a new page: a run's, and a protocol's record.
WATCHED = (LOG, EVALUATIONS, HALL_OF_FAME, BEST, PROTOCOL)


def state_token(path: Path) -> str:
    """Sizes and modification times of the watched files of ``path`` (changes when the run writes)."""
    parts = []
    for name in WATCHED:
        try:
            info = (path / name).stat()
        except OSError:
            parts.append("-")
            continue
        parts.append(f"{info.st_size}.{info.st_mtime_ns}")
    return ":".join(parts)


def reload_script(token: str) -> str:
    """The inline script of a served page: reload when ``/state`` no longer answers ``token``."""
    return ("<script>(function () { var shown = " + _js_string(token) + "; setInterval(function () {"
            " fetch('state', {cache: 'no-store'}).then(function (r) { return r.text(); }).then(function (t) {"
            " if (t.trim() !== shown) { location.reload(); } }).catch(function () {}); }, "
            f"{POLL_SECONDS * 1000}); }})();</script>")


def _js_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def being_written(path: Path) -> bool:
    """Whether a process holds the run's lock (:meth:`autoprox.search.rundir.RunDirectory.lock`): a search is running."""
    return lock_holder(path) is not None


class LiveReport:
    """The served page of one run or protocol, rendered again only when its files changed."""

    def __init__(self, path: str | Path, simplify: bool = True, progress: Callable[[str], None] | None = None) -> None:
        self.path = Path(path)
        self.simplify = simplify
        self.progress = progress
        self.memo = ReportMemo()
        self.lock = threading.Lock()
        self.token = ""
        self.document = ""

    def page(self) -> str:
        """The current page: the last one, or a new one when the run has written since."""
        with self.lock:
            token = state_token(self.path)
            if token != self.token:
                first = not self.document
                # The first page computes what it lacks, unless a search is running (its test split's statistics
                # come at its end); later pages use the cache only.
                compute = first and not being_written(self.path)
                try:
                    self.document = render_report(self.path, compute=compute, simplify=self.simplify, memo=self.memo,
                                                  script=reload_script(token), progress=self.progress)
                    self.token = token
                except AutoproxError as exc:
                    if first:
                        raise
                    warnings.warn(f"the page is kept as it was: {one_line(exc)}", stacklevel=2)
            return self.document


def _handler(report: LiveReport) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            route = self.path.split("?", 1)[0]
            if route == "/state":
                self._send(200, "text/plain; charset=utf-8", state_token(report.path))
            elif route in ("/", "/index.html", "/report.html"):
                try:
                    self._send(200, "text/html; charset=utf-8", report.page())
                except AutoproxError as exc:
                    self._send(500, "text/html; charset=utf-8", f"<p>{esc(one_line(exc))}</p>")
            else:
                self._send(404, "text/plain; charset=utf-8", "not found: the report is at /")

        def _send(self, status: int, kind: str, body: str) -> None:
            data = body.encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args) -> None:
            return

    return Handler


def bind(report: LiveReport, port: int) -> ThreadingHTTPServer:
    """The server of ``report`` bound to 127.0.0.1:``port``; ReportError when the port cannot be had."""
    if not 0 <= port <= 65535:
        raise ReportError(f"--port must be between 0 and 65535, got {port}")
    try:
        server = ThreadingHTTPServer((HOST, port), _handler(report))
    except OSError as exc:
        reason = "the address is already in use" if exc.errno == errno.EADDRINUSE else (exc.strerror or str(exc))
        raise ReportError(f"cannot serve on {HOST}:{port}: {reason} (choose another --port)") from None
    server.daemon_threads = True
    return server


def serve_report(path: str | Path, port: int, simplify: bool = True) -> None:
    """Serve the report of ``path`` on 127.0.0.1:``port`` until Ctrl-C."""
    report_kind(path)  # ReportError for a folder that is neither a run nor a protocol, before binding
    report = LiveReport(path, simplify=simplify,
                        progress=lambda message: print(f"autoprox report: {message}", file=sys.stderr, flush=True))
    server = bind(report, port)
    try:
        report.page()  # the first page now: bad input is said before anything is served
        print(f"serving the report of {path} at http://{HOST}:{server.server_address[1]}/ (Ctrl-C stops)", flush=True)
        server.serve_forever(poll_interval=0.5)
    except KeyboardInterrupt:
        print("stopped serving", file=sys.stderr, flush=True)
    finally:
        server.server_close()


__all__ = ["HOST", "LiveReport", "bind", "reload_script", "serve_report", "state_token"]
