"""``autoprox export``: a proxy as a standalone Python module."""

from __future__ import annotations

import argparse

from autoprox.cli.options import finite_float


def add_parser(sub) -> None:
    export = sub.add_parser("export", help="write a proxy as a standalone Python module (torch only)")
    export.add_argument("source", help="a run directory (its best.json), a proxy JSON, or a genome string")
    export.add_argument("--out", required=True, help="the module to write, e.g. proxy.py")
    export.add_argument("--rank", type=int, default=None, help="export the hall of fame's entry of this rank instead")
    export.add_argument("--no-simplify", action="store_true", help="put the formula in the docstring as built")
    export.add_argument("--timeout", type=finite_float, default=None, help="seconds allowed to simplify the formula (default 10)")


def run(args: argparse.Namespace) -> int:
    from autoprox.reports.export import export_proxy

    path, formula = export_proxy(args.source, args.out, rank=args.rank, simplify=not args.no_simplify,
                                 timeout=args.timeout)
    print(f"wrote {path}: score(model, inputs, targets) -> float, depends on torch only "
          f"(architecture terminals, if any, are read from the model; pass descriptors=... to give them)")
    print(f"score = {formula.text}")
    if formula.note:
        print(f"({formula.note})")
    return 0
