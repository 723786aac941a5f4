"""The ``autoprox`` command line: ``search``, ``transfer``, ``rank``, ``cache build``, reports and ``vit-search``.

Each command is a module of this package with ``add_parser(sub)`` and ``run(args)``,
listed in :data:`COMMANDS`. Bad input (any :class:`autoprox.core.errors.AutoproxError`:
a bad file, an unknown target, a malformed genome) prints one line
``autoprox: error: ...`` and exits with status 2; nothing already computed is lost.
Anything else is a bug and keeps its traceback. ``AUTOPROX_DEBUG=1`` shows the
traceback of bad input too.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from types import ModuleType
from typing import Sequence

from autoprox.cli import (
    cache,
    curves,
    evaluate,
    export,
    rank,
    search,
    show,
    spaces,
    transfer,
    vitsearch,
)
from autoprox.core.errors import AutoproxError, one_line

#: Command name -> its module (``add_parser(sub)``, ``run(args) -> exit status``), in help order.
COMMANDS: dict[str, ModuleType] = {
    "search": search, "transfer": transfer, "rank": rank, "cache": cache, "show": show, "export": export,
    "curves": curves, "vit-search": vitsearch, "evaluate": evaluate, "spaces": spaces,
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="autoprox", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for module in COMMANDS.values():
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return its exit status (2 for bad input, 130 when interrupted)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    with warnings.catch_warnings():
        warnings.filterwarnings("default")
        warnings.showwarning = _show_warning
        return _run(args)


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """One line per warning, ``autoprox: warning: ...``, without Python's source line."""
    print(f"autoprox: warning: {message}", file=sys.stderr if file is None else file)


def _run(args: argparse.Namespace) -> int:
    try:
        return COMMANDS[args.command].run(args)
    except AutoproxError as exc:
        if os.environ.get("AUTOPROX_DEBUG"):
            raise
        print(f"autoprox: error: {one_line(exc)}", file=sys.stderr)
        return exc.exit_status
    except KeyboardInterrupt:
        print("autoprox: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into head & co.
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
