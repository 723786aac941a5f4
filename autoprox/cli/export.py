"""``autoprox export``: a proxy as a standalone Python module."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from autoprox.cli.options import non_negative_float, positive_int, refuse_proxy_list


def add_parser(sub) -> None:
    export = sub.add_parser("export", help="write a proxy as a standalone Python module (torch only)")
    export.add_argument("source", help="a run directory (its best.json), a proxy JSON, an ensemble JSON, a recommended:SPACE/TARGET name, or a genome string")
    export.add_argument("--out", required=True,
                        help="the module to write, e.g. proxy.py (a file export did not write is refused)")
    export.add_argument("--rank", type=positive_int, default=None, help="export the hall of fame's entry of this rank instead")
    export.add_argument("--no-simplify", action="store_true", help="put the formula in the docstring as built")
    export.add_argument("--timeout", type=non_negative_float, default=None, help="seconds allowed to simplify the formula (default 10)")


def _ensemble_file(source: str):
    """The ensemble ``source`` names when it is an ensemble file, else None."""
    from autoprox.proxies.ensemble import EnsembleProxy
    from autoprox.proxies.proxy import resolve_proxy
    from autoprox.proxies.recommended import is_recommended_name

    if is_recommended_name(source):
        proxy = resolve_proxy(source)
        return proxy if isinstance(proxy, EnsembleProxy) else None
    try:
        if not Path(source).is_file() or not source.endswith(".json"):
            return None
    except (OSError, ValueError):
        return None
    proxy = resolve_proxy(source)
    return proxy if isinstance(proxy, EnsembleProxy) else None


def _refuse_unfinished_table_run(source: str) -> None:
    """ExportError for a table search's run directory with no readable ``best.json``: its proxy is fitted only
    when the search ends (its hall of fame holds terms, not weights), so there is nothing to export yet."""
    from autoprox.core.errors import ExportError
    from autoprox.search.table_run import table_run_config

    if table_run_config(source) is None:
        return  # not a table run: the export names what is wrong
    raise ExportError(f"{source} is a table search with no readable best.json yet: its proxy is fitted when the "
                      f"search ends; continue it with autoprox search --resume --out {shlex.quote(source)}, then "
                      "export it")


def run(args: argparse.Namespace) -> int:
    from autoprox.reports.export import check_export_out, export_proxy
    from autoprox.reports.weighted_export import is_weighted_source

    check_export_out(args.out)  # a file export did not write is refused before any work
    refuse_proxy_list(args.source, "export", "export them one at a time, each to its own module", option=None)

    weighted = is_weighted_source(args.source)
    if weighted is not None:
        from autoprox.core.errors import ExportError
        from autoprox.reports.export import write_export
        from autoprox.reports.weighted_export import weighted_export_source

        if args.rank is not None:
            raise ExportError("--rank takes a run of the statistics; a table search's proxy is its best.json")
        formula, source, target = weighted
        path = write_export(args.out, weighted_export_source(formula, source, target))
        print(f"wrote {path}: score(columns) -> array, a weighted formula over proxy columns, depends on numpy only")
        return 0
    _refuse_unfinished_table_run(args.source)
    ensemble = _ensemble_file(args.source)
    if ensemble is not None:
        from autoprox.core.errors import ExportError
        from autoprox.reports.ensemble_export import ensemble_export_source
        from autoprox.reports.export import write_export

        if args.rank is not None:
            raise ExportError("--rank needs a run directory, not an ensemble file")
        path = write_export(args.out, ensemble_export_source(ensemble))
        print(f"wrote {path}: scores(model, inputs, targets) -> {{target: float}} and score(..., target=None) -> "
              f"float, depends on torch only ({ensemble.name}: "
              f"{'joint' if ensemble.joint else 'per target: ' + ', '.join(ensemble.targets)})")
        return 0

    from autoprox.proxies.recommended import is_recommended_name, resolve_recommended

    source = args.source
    if is_recommended_name(source):  # a recommended genome: export its proxy file
        source = str(resolve_recommended(source)[0])
    path, formula = export_proxy(source, args.out, rank=args.rank, simplify=not args.no_simplify,
                                 timeout=args.timeout)
    print(f"wrote {path}: score(model, inputs, targets) -> float, depends on torch only "
          f"(architecture terminals, if any, are read from the model; pass descriptors=... to give them)")
    print(f"score = {formula.text}")
    if formula.note:
        print(f"({formula.note})")
    return 0
