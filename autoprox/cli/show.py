"""``autoprox show``: a run's hall of fame with readable formulas."""

from __future__ import annotations

import argparse

from autoprox.cli.options import argparse_type, non_negative_float
from autoprox.core.errors import ConfigError
from autoprox.search.conversions import integer

#: What this command prints is its product (a listing): a closed output pipe (``| head``) ends it with status 0
#: (:data:`autoprox.cli.main.LISTINGS`).
LISTING = True

#: The most rows ``show --top`` prints: far more than a hall of fame holds (20 by default).
MAX_SHOWN = 10_000


def add_parser(sub) -> None:
    show = sub.add_parser("show", help="print a run's hall of fame with readable formulas (works while it runs)")
    show.add_argument("run", help="run directory")
    show.add_argument("--top", type=argparse_type(integer(1, MAX_SHOWN), "top"), default=10,
                      help="rows to print (default 10)")
    show.add_argument("--latex", action="store_true", help="also print each formula as LaTeX")
    show.add_argument("--no-simplify", action="store_true", help="print the formulas as built, without SymPy simplification")
    show.add_argument("--timeout", type=non_negative_float, default=None, help="seconds allowed to simplify one formula (default 10)")
    show.add_argument("--save", action="store_true",
                      help="write the hall of fame into the run directory (for runs made before hall_of_fame.json)")
    show.add_argument("--beyond-size", action="store_true",
                      help="also compute, for each shown entry, its Kendall with the parameter count and the depth, its "
                           "partial Kendall given each, and the best coarse descriptor per target, on the run's search "
                           "split (scores from the statistics cache; takes a while, progress on stderr)")


def run(args: argparse.Namespace) -> int:
    from autoprox.apps.folders import refuse_other_folder
    from autoprox.reports.show import show_run
    from autoprox.reports.table_run import is_table_run_dir, show_table_run

    refuse_other_folder(args.run, "show")
    if is_table_run_dir(args.run):
        given = [flag for flag, value in (("--latex", args.latex), ("--no-simplify", args.no_simplify),
                                          ("--timeout", args.timeout is not None), ("--save", args.save),
                                          ("--beyond-size", args.beyond_size)) if value]
        if given:
            raise ConfigError(f"{given[0]} does not apply to a table search's run ({args.run}): its hall of fame holds "
                              "weighted rank formulas over the table's columns, printed as they are (export writes "
                              "its best as Python)")
        print(show_table_run(args.run, top=args.top), end="")
        return 0

    print(show_run(args.run, top=args.top, simplify=not args.no_simplify, latex=args.latex,
                   timeout=args.timeout, save=args.save, beyond_size=args.beyond_size), end="")
    return 0
