"""A small progress line with rate and ETA, written to stderr (silent when not a terminal
unless forced), so long steps say how far they are."""

from __future__ import annotations

import sys
import time
from typing import TextIO


def format_seconds(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


class Progress:
    """Call with (done, total); prints ``label [####    ] 12/100 00:10<01:13``.

    ``note`` (optional) is printed after the times: what the step has reached so far, such
    as a search's best fitness.

    On a terminal the line is redrawn in place; elsewhere (logs, CI) a line is printed
    at most every ``every`` seconds and at the end.
    """

    def __init__(self, label: str, stream: TextIO | None = None, every: float = 10.0, width: int = 24) -> None:
        self.label = label
        self.stream = stream or sys.stderr
        self.every = every
        self.width = width
        self.start = time.perf_counter()
        self.last_print = -float("inf")
        self.first_done: int | None = None
        self.interactive = hasattr(self.stream, "isatty") and self.stream.isatty()

    def __call__(self, done: int, total: int, note: str | None = None) -> None:
        now = time.perf_counter()
        if self.first_done is None:
            self.first_done = done
            self.start = now
        finished = done >= total
        if not finished and now - self.last_print < (0.2 if self.interactive else self.every):
            return
        self.last_print = now
        elapsed = now - self.start
        fresh = done - self.first_done
        eta = elapsed / fresh * (total - done) if fresh > 0 else float("nan")
        filled = int(self.width * done / total) if total else self.width
        bar = "#" * filled + " " * (self.width - filled)
        eta_text = format_seconds(eta) if eta == eta else "--:--"
        line = f"{self.label} [{bar}] {done}/{total} {format_seconds(elapsed)}<{eta_text}" + (f" {note}" if note else "")
        if self.interactive:
            self.stream.write("\r" + line + ("\n" if finished else ""))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()
