"""The ``autoprox`` command line: one command per task, each of :data:`COMMANDS`.

Each command is a module of this package with ``add_parser(sub)`` and ``run(args)``,
listed in :data:`COMMANDS`. Bad input (any :class:`autoprox.core.errors.AutoproxError`:
a bad file, an unknown target, a malformed genome) prints one line
``autoprox: error: ...`` and exits with status 2; nothing already computed is lost.
Anything else is a bug and keeps its traceback. ``AUTOPROX_DEBUG=1`` shows the
traceback of bad input too.

SIGTERM stops a command as Ctrl-C does (a search saves its state, writes ``best.json``
and says how to resume); the exit status is then 143 instead of 130.

A closed output pipe (``autoprox ... | head``) ends a command whose product is what it prints
(:data:`LISTINGS`: ``rank``, ``show``, ``spaces``) quietly with status 0, as Unix listings end. Any other
command (a search, whose product is its run directory) stops there with status 141 (128 + SIGPIPE, what a
shell reports for a command killed by its pipe), never 0; what it computed (a search's checkpoint) is kept,
and the line saying so goes to stderr when stderr is still open.
"""

from __future__ import annotations

import argparse
import errno
import os
import signal
import sys
import threading
import warnings
from contextlib import contextmanager
from types import ModuleType
from typing import Iterator, Sequence

from autoprox.cli import (
    cache,
    curves,
    evaluate,
    export,
    rank,
    report,
    score,
    search,
    select,
    show,
    spaces,
    transfer,
    vitsearch,
)
from autoprox.cli.options import HelpFormatter, check_image_input, run_folders_as_best
from autoprox.core.errors import AutoproxError, cut_long_words, one_line, path_too_long

#: Command name -> its module (``add_parser(sub)``, ``run(args) -> exit status``), in help order.
COMMANDS: dict[str, ModuleType] = {
    "search": search, "transfer": transfer, "rank": rank, "score": score, "cache": cache, "show": show, "export": export,
    "curves": curves, "report": report, "vit-search": vitsearch, "evaluate": evaluate, "select": select, "spaces": spaces,
}


#: Exit status after SIGINT (Ctrl-C) and after SIGTERM: 128 + the signal's number, as shells report them.
INTERRUPTED, TERMINATED = 128 + signal.SIGINT, 128 + signal.SIGTERM

#: Exit status of a command stopped by its output pipe closing: 128 + SIGPIPE, as a shell reports a command the
#: signal killed.
PIPE_CLOSED = 128 + 13

#: The commands whose product is what they print to stdout, each module saying so (``LISTING = True``): a closed
#: pipe (``| head``) ends them with status 0.
LISTINGS = frozenset(name for name, module in COMMANDS.items() if getattr(module, "LISTING", False))


class Parser(argparse.ArgumentParser):
    """The parser of ``autoprox`` and of each command: help states each default once."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    from autoprox import __version__

    # the commands named from COMMANDS, so that the first line of the help lists each (it once named six of 13)
    parser = Parser(prog="autoprox", description="The autoprox command line, one command per task: "
                    f"{', '.join(COMMANDS)} (autoprox COMMAND --help for each).")
    parser.add_argument("--version", action="version", version=f"autoprox {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for module in COMMANDS.values():
        module.add_parser(sub)
    return parser


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised as the interruption Ctrl-C raises, so that everything stops the same way."""


@contextmanager
def sigterm_as_interrupt() -> Iterator[dict]:
    """While inside, SIGTERM raises :class:`Terminated`; the yielded dict's ``"signal"`` records it.

    A second SIGTERM while the first is being handled (a search saving its state) is
    ignored; SIGKILL remains for a hard stop. Outside the main thread this does nothing.
    """
    received: dict = {"signal": None}
    if threading.current_thread() is not threading.main_thread():
        yield received
        return

    def stop(signum, frame) -> None:
        if received["signal"] is None:
            received["signal"] = signum
            raise Terminated()

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield received
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return its exit status (2 for bad input, 130 after Ctrl-C, 143 after SIGTERM)."""
    with warnings.catch_warnings():
        # installed before the parser is built: building it lists the spaces, which loads the plug-ins
        warnings.filterwarnings("default")
        warnings.showwarning = _show_warning
        args = build_parser().parse_args(argv)
        with sigterm_as_interrupt() as received:
            status = _run(args)
    return TERMINATED if received["signal"] == signal.SIGTERM and status == INTERRUPTED else status


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """One line per warning, ``autoprox: warning: ...``, without Python's source line."""
    print(f"autoprox: warning: {cut_long_words(str(message))}", file=sys.stderr if file is None else file)


def _run(args: argparse.Namespace) -> int:
    try:
        try:
            refuse_missing_proxy_paths(args)
            run_folders_as_best(args)
            refuse_runs_of_unregistered_operators(args)
            check_image_input(args)
            status = COMMANDS[args.command].run(args)
            sys.stdout.flush()  # a pipe closed under a block-buffered stdout fails here, handled, not at exit
            return status
        except OSError as exc:
            # A path given with a part longer than the file system allows (a run directory, --out, --cache-dir,
            # a genome given where a path is read): bad input, whichever command opened it, as one line.
            if exc.errno != errno.ENAMETOOLONG or isinstance(exc, AutoproxError):
                raise
            raise path_too_long(exc) from exc
    except AutoproxError as exc:
        if os.environ.get("AUTOPROX_DEBUG"):
            raise
        print(f"autoprox: error: {cut_long_words(one_line(exc))}", file=sys.stderr)
        return exc.exit_status
    except KeyboardInterrupt as exc:
        print(f"autoprox: {'terminated' if isinstance(exc, Terminated) else 'interrupted'}", file=sys.stderr)
        return INTERRUPTED
    except BrokenPipeError:  # output piped into head & co.
        return _pipe_closed(args)


def refuse_missing_proxy_paths(args: argparse.Namespace) -> None:
    """Each ``--proxy`` part meant as a path that names nothing is said to (:func:`refuse_missing_proxy_path`), where
    the proxy's resolution would read it as a genome; on a proxy table a part may be a column named with a ``/``, and
    :func:`~autoprox.cli.tables.table_proxy` checks it after the table's columns."""
    from autoprox.cli.tables import wants_tables
    from autoprox.proxies.proxy_input import refuse_missing_proxy_path, split_proxy_list

    text = getattr(args, "proxy", None)
    if isinstance(text, str) and text.strip() and not wants_tables(args):
        for part in split_proxy_list(text):
            refuse_missing_proxy_path(part)


def refuse_runs_of_unregistered_operators(args: argparse.Namespace) -> None:
    """A run this command reads (``show RUN``, ``report RUN``, ``export RUN``, ``select RUN``, ``--proxy RUN/best.json``)
    that was searched with an operator of one's own not registered in this process is refused in one line naming it
    (:func:`~autoprox.search.settings.refuse_unregistered_operators`), as ``search --resume`` refuses it."""
    from pathlib import Path

    from autoprox.proxies.proxy_input import split_proxy_list
    from autoprox.search.rundir import BEST
    from autoprox.search.settings import refuse_unregistered_operators

    given = [getattr(args, name, None) for name in ("run", "source", "path")]
    proxy = getattr(args, "proxy", None)
    given += split_proxy_list(proxy) if isinstance(proxy, str) and proxy.strip() else []
    for text in given:
        if not isinstance(text, str) or not text.strip():
            continue
        try:
            path = Path(text)
            folder = path if path.is_dir() else path.parent if path.name == BEST and path.is_file() else None
        except (OSError, ValueError):  # a genome too long for a file name
            continue
        if folder is not None:
            refuse_unregistered_operators(folder)


def _pipe_closed(args: argparse.Namespace) -> int:
    """The exit status of a command whose output pipe closed (0 for a listing, else :data:`PIPE_CLOSED`), said on
    stderr where it is still open; the closed streams are pointed at the null device, so that Python's flush at
    exit neither fails nor prints a traceback."""
    listing = args.command in LISTINGS
    if not listing:
        out = getattr(args, "out", None)
        hint = (f"continue with autoprox search --resume --out {out}" if args.command == "search" and out else
                "run the command again to continue (a search: with --resume)")
        _write_if_open(sys.stderr, f"autoprox: stopped: the pipe its output went to was closed (exit {PIPE_CLOSED}); "
                                   f"what it computed is kept: {hint}\n")
    for stream in (sys.stdout, sys.stderr):
        _write_if_open(stream, "")
    return 0 if listing else PIPE_CLOSED


def _write_if_open(stream, text: str) -> None:
    """``text`` written to ``stream`` and flushed; a stream whose pipe is closed is pointed at the null device."""
    try:
        stream.write(text)
        stream.flush()
    except (BrokenPipeError, ValueError):
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, stream.fileno())
            os.close(devnull)
        except (OSError, ValueError):  # not a file (a capture in tests): nothing left to flush at exit
            pass


if __name__ == "__main__":
    sys.exit(main())
