"""``autoprox report``: a run's or a protocol's one-file HTML report, or the report served live."""

from __future__ import annotations

import argparse
import sys

#: The port ``report --serve`` listens on unless ``--port`` says otherwise.
DEFAULT_PORT = 8000


def add_parser(sub) -> None:
    report = sub.add_parser("report", help="write a run's or a protocol's report as one self-contained HTML file, "
                                           "or serve it live while the run goes on")
    report.add_argument("path", metavar="PATH", help="run directory or protocol directory")
    report.add_argument("--out", metavar="FILE.html", help="HTML file to write (default PATH/report.html)")
    report.add_argument("--serve", action="store_true",
                        help="serve the report on 127.0.0.1 instead, refreshed as the run writes new iterations "
                             "(Ctrl-C stops)")
    report.add_argument("--port", type=int, default=None, help=f"port of --serve (default {DEFAULT_PORT}; 0: any free port)")
    report.add_argument("--no-simplify", action="store_true",
                        help="show the formulas as built, without SymPy simplification (faster)")


def run(args: argparse.Namespace) -> int:
    from autoprox.core.errors import ReportError
    from autoprox.reports.html.report import write_report

    if args.serve:
        from autoprox.reports.html.serve import serve_report

        if args.out is not None:
            raise ReportError("--serve serves the report and writes no file: leave out --out")
        serve_report(args.path, DEFAULT_PORT if args.port is None else args.port, simplify=not args.no_simplify)
        return 0
    if args.port is not None:
        raise ReportError("--port is the port of --serve, and this writes a file: give --serve too, or leave out --port")
    from autoprox.reports.html.protocol import few_labels_record, write_few_labels_report
    from autoprox.reports.table_run import is_table_run_dir, table_report_html

    if few_labels_record(args.path) is not None:
        print(f"wrote {write_few_labels_report(args.path, args.out)}")
        return 0

    if is_table_run_dir(args.path):
        print(f"wrote {table_report_html(args.path, args.out)}")
        return 0
    out = write_report(args.path, args.out, simplify=not args.no_simplify,
                       announce=lambda line: print(line, file=sys.stderr, flush=True))
    print(f"wrote {out}")
    return 0
