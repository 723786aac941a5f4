"""``autoprox curves``: the evolution of one or more runs as a PNG."""

from __future__ import annotations

import argparse
from pathlib import Path

from autoprox.cli.options import argparse_type
from autoprox.search.conversions import integer
from autoprox.search.options import MAX_ITERATIONS


def add_parser(sub) -> None:
    curves = sub.add_parser("curves", help="plot the evolution of one or more runs (PNG)")
    curves.add_argument("runs", nargs="+", metavar="RUN", help="run directories, overlaid")
    curves.add_argument("--out", required=True,
                        help="PNG to write (a file curves did not write is refused, never overwritten)")
    curves.add_argument("--csv", nargs="?", const=True, default=None, metavar="CSV",
                        help="also write the plotted numbers (default path: --out with .csv)")
    curves.add_argument("--window", type=argparse_type(integer(1, MAX_ITERATIONS), "window"), default=10,
                        help="iterations in the rolling acceptance rate (default 10; at most a search's iterations)")


def run(args: argparse.Namespace) -> int:
    from autoprox.core.atomic import refuse_empty_path
    from autoprox.core.errors import CurvesError
    from autoprox.reports.curves import write_curves

    refuse_empty_path(args.out, "--out", CurvesError)
    csv_path = Path(args.out).with_suffix(".csv") if args.csv is True else args.csv
    runs = write_curves(args.runs, args.out, csv_path, window=args.window)
    print(f"wrote {args.out}" + (f" and {csv_path}" if csv_path else "") + f" ({len(runs)} run(s))")
    return 0
