"""The page of ``autoprox report``: one self-contained HTML file of a run or of a protocol.

The page holds everything it shows: figures are inline SVG (Matplotlib), the style is a
small inline stylesheet, and nothing is loaded from anywhere (no network, no CDN, no
JavaScript framework), so the file opens from disk and can be mailed or attached to a
paper's supplement. A served page (``--serve``, :mod:`autoprox.reports.html.serve`) adds a
few lines of inline script that reload it when the run writes a new iteration.

This module holds the page frame and the small HTML helpers; the run's sections are in
:mod:`autoprox.reports.html.run`, the protocols' in :mod:`autoprox.reports.html.protocol` and
:mod:`autoprox.reports.html.spaces`, the figures in :mod:`autoprox.reports.html.figures`, and
:mod:`autoprox.reports.html.report` makes the report of a folder and writes it.
"""

from __future__ import annotations

import datetime as _dt
import html
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from autoprox import __version__

#: The file ``search --report`` writes into its run directory, and ``report``'s default output.
REPORT_FILE = "report.html"
#: The tag in the head of every page ``report`` writes: how a re-run recognises its own file.
GENERATOR = '<meta name="generator" content="autoprox'
#: What ends a page written before :data:`GENERATOR` was put in (its footer), and what began a table search's.
_OLD_FOOTER = b"<footer>written by autoprox "
_OLD_TABLE_HEAD = b"<!doctype html><html><head><meta charset='utf-8'><title>autoprox table search "

STYLE = """
:root { --ink: #1d2330; --muted: #5b6475; --rule: #d9dde5; --band: #f4f6f9; --accent: #1f6fb4; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
       color: var(--ink); background: #fff; }
main { max-width: 1180px; margin: 0 auto; padding: 24px 28px 48px; }
header.top { border-bottom: 3px solid var(--accent); padding-bottom: 10px; margin-bottom: 8px; }
h1 { font-size: 24px; margin: 0 0 4px; }
h2 { font-size: 19px; margin: 32px 0 8px; padding-bottom: 4px; border-bottom: 1px solid var(--rule); }
h3 { font-size: 16px; margin: 20px 0 6px; }
p, li { max-width: 80em; }
.muted, .note { color: var(--muted); font-size: 13.5px; }
.status { display: inline-block; padding: 1px 9px; border-radius: 10px; font-size: 13px; font-weight: 600;
          background: #e6f4ea; color: #17653a; }
.status.unfinished { background: #fdf0e0; color: #8a4b00; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 18px; margin: 10px 0; }
dl.facts dt { color: var(--muted); }
dl.facts dd { margin: 0; }
code, .mono { font-family: ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 13px; }
pre.command { background: var(--band); padding: 8px 12px; border-radius: 4px; overflow-x: auto; }
table { border-collapse: collapse; margin: 8px 0 4px; font-size: 13px; }
th, td { padding: 4px 8px; border-bottom: 1px solid var(--rule); text-align: right; vertical-align: middle; }
th { background: var(--band); font-weight: 600; }
th.group { text-align: center; border-bottom: 1px solid #b9c0cc; }
td.text, th.text { text-align: left; }
td.num { font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.chosen td { background: #fff8e1; }
td.formula svg { display: block; max-width: 400px; height: auto; }
.wide { overflow-x: auto; }
figure { margin: 12px 0 20px; }
figure svg { max-width: 100%; height: auto; display: block; }
figcaption { color: var(--muted); font-size: 13.5px; margin-top: 4px; max-width: 80em; }
footer { margin-top: 40px; color: var(--muted); font-size: 12.5px; border-top: 1px solid var(--rule); padding-top: 8px; }
"""


def esc(value) -> str:
    """Text escaped for HTML."""
    return html.escape(str(value), quote=True)


def number(value, digits: int = 3, signed: bool = True) -> str:
    """A figure as the tables print it (``n/a`` when missing or not finite)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return "n/a"
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


@dataclass(frozen=True)
class Cell:
    """A table cell: its HTML (already escaped) and its kind (``num``, ``text``, ``formula``)."""

    html: str
    kind: str = "num"


def num(value, digits: int = 3, signed: bool = True) -> Cell:
    return Cell(esc(number(value, digits, signed)))


def text(value) -> Cell:
    return Cell(esc(value), "text")


def table(headers: Sequence[str], rows: Iterable[Sequence[Cell]], row_classes: Sequence[str] | None = None,
          table_id: str | None = None, groups: Sequence[tuple[str, int]] | None = None) -> str:
    """An HTML table; each header's alignment follows its column's cells. ``groups``: an upper header
    row of (label, columns spanned)."""
    rows = [list(r) for r in rows]
    kinds = [rows[0][i].kind if rows and i < len(rows[0]) else "num" for i in range(len(headers))]
    head = "".join(f'<th class="{"text" if k != "num" else "num"}">{esc(h).replace("_", "_<wbr>")}</th>'
                   for h, k in zip(headers, kinds))
    body = []
    for index, row in enumerate(rows):
        css = row_classes[index] if row_classes else ""
        cells = "".join(f'<td class="{c.kind}">{c.html}</td>' for c in row)
        body.append(f'<tr class="{css}">{cells}</tr>' if css else f"<tr>{cells}</tr>")
    ident = f' id="{esc(table_id)}"' if table_id else ""
    upper = ""
    if groups:
        upper = "<tr>" + "".join(f'<th class="group" colspan="{span}">{esc(label)}</th>' for label, span in groups) + "</tr>"
    return (f'<div class="wide"><table{ident}><thead>{upper}<tr>{head}</tr></thead><tbody>{"".join(body)}</tbody>'
            "</table></div>")


def formula_cell(formula, memo: "ReportMemo", prefix: str) -> Cell:
    """A table cell holding a readable formula drawn as SVG (its text as a tooltip); the text when mathtext cannot draw it."""
    from autoprox.reports.html.figures import formula_svg

    key = formula.latex
    if key not in memo.formula_svgs:
        memo.formula_svgs[key] = formula_svg(formula.latex, "f")
    image = memo.formula_svgs[key]
    plain = esc(formula.text)
    if image is None:
        return Cell(f'<span class="mono">{plain}</span>', "formula")
    image = image.replace('id="f-', f'id="{prefix}-').replace('#f-', f'#{prefix}-')
    return Cell(f'<span role="img" aria-label="{plain}" title="{plain}">{image}</span>', "formula")


def figure(svg: str, caption: str, figure_id: str) -> str:
    return f'<figure id="{esc(figure_id)}">{svg}<figcaption>{caption}</figcaption></figure>'


def facts(pairs: Iterable[tuple[str, str]]) -> str:
    """A definition list of (label, HTML) pairs."""
    return '<dl class="facts">' + "".join(f"<dt>{esc(k)}</dt><dd>{v}</dd>" for k, v in pairs) + "</dl>"


def page(title: str, body: str, script: str = "") -> str:
    """The whole HTML document: inline style, the body, and an optional inline script."""
    written = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    return ("<!DOCTYPE html>\n"
            f'<html lang="en"><head><meta charset="utf-8">{generator_tag()}<title>{esc(title)}</title>'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<style>{STYLE}</style></head><body><main>{body}"
            f"<footer>written by autoprox {esc(__version__)} at {esc(written)}; a self-contained file: "
            "its figures are inline SVG and it loads nothing.</footer></main>"
            f"{script}</body></html>\n")


def generator_tag() -> str:
    """The ``<meta name="generator">`` tag of a page ``report`` writes (:data:`GENERATOR`, with the version)."""
    return f'{GENERATOR} {esc(__version__)}">'


def is_report_page(head: bytes, tail: bytes) -> bool:
    """Whether a file with this ``head`` and ``tail`` is a page ``report`` wrote: :data:`GENERATOR` in its head,
    or (a page written before that tag) the footer or the table search's title autoprox wrote then."""
    return GENERATOR.encode() in head or _OLD_FOOTER in tail or head.startswith(_OLD_TABLE_HEAD)


def check_report_out(out: str | os.PathLike) -> Path:
    """ReportError (one line, nothing written) unless ``out`` can take a report: new, or one ``report`` wrote.

    Parameters
    ----------
    out : str or os.PathLike
        The HTML file to write.

    Returns
    -------
    Path
        The file the write replaces (a symbolic link's target).
    """
    from autoprox.core.atomic import check_output_file
    from autoprox.core.errors import ReportError

    return check_output_file(out, "report", is_report_page, "--out", ReportError)


def write_page(out: str | os.PathLike, document: str) -> Path:
    """Write the HTML ``document`` to ``out`` atomically; a file system that refuses it is one line (ReportError),
    a full disk its own error (DiskFullError). Check ``out`` first with :func:`check_report_out`."""
    from autoprox.core.atomic import atomic_write_text, output_write
    from autoprox.core.errors import ReportError

    with output_write(out, ReportError):
        atomic_write_text(out, document)
    return Path(out)


@dataclass
class ReportMemo:
    """What a report may reuse from one rendering to the next (a served page, a search's checkpoints):
    readable formulas and test-split figures by genome, and loaded statistics by part."""

    formulas: dict = field(default_factory=dict)
    figures: dict = field(default_factory=dict)
    statistics: dict = field(default_factory=dict)
    formula_svgs: dict = field(default_factory=dict)
    warned: set = field(default_factory=set)


__all__ = ["GENERATOR", "REPORT_FILE", "STYLE", "Cell", "ReportMemo", "check_report_out", "esc", "facts", "figure",
           "formula_cell", "generator_tag", "is_report_page", "num", "number", "page", "table", "text"]
