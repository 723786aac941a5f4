"""A reader of autoprox's HTML reports for the tests, on the standard library's html.parser."""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser

#: Attributes through which a page would load something.
LOADING = ("src", "href", "xlink:href", "data", "poster", "srcset", "action")


@dataclass
class Svg:
    """One inline <svg>: how many drawing elements it holds, inside which <figure> id (if any)."""

    figure: str | None
    drawn: int = 0


@dataclass
class ParsedReport:
    tables: dict[str, list[list[str]]] = field(default_factory=dict)
    svgs: list[Svg] = field(default_factory=list)
    figures: list[str] = field(default_factory=list)
    texts: dict[str, str] = field(default_factory=dict)
    loads: list[str] = field(default_factory=list)
    tags: set[str] = field(default_factory=set)
    styles: list[str] = field(default_factory=list)
    scripts: list[str] = field(default_factory=list)


class _Reader(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.report = ParsedReport()
        self.figure: str | None = None
        self.svg: Svg | None = None
        self.svg_depth = 0
        self.table: str | None = None
        self.rows: list[list[str]] = []
        self.cell: list[str] | None = None
        self.cell_depth_svg = False
        self.ids: list[tuple[str, str, list[str]]] = []
        self.in_style = self.in_script = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.report.tags.add(tag)
        for name in LOADING:
            if attrs.get(name):
                self.report.loads.append(attrs[name])
        if tag == "figure":
            self.figure = attrs.get("id")
            self.report.figures.append(self.figure)
        if tag == "svg":
            if self.svg_depth == 0:
                self.svg = Svg(self.figure)
                self.report.svgs.append(self.svg)
            self.svg_depth += 1
        elif self.svg is not None and tag in ("path", "use", "rect", "line", "polyline", "circle", "text"):
            self.svg.drawn += 1
        if tag == "table":
            self.table, self.rows = attrs.get("id") or f"table{len(self.report.tables)}", []
        if tag == "tr" and self.table is not None:
            self.rows.append([])
        if tag in ("td", "th") and self.table is not None:
            self.cell = []
        if tag == "style":
            self.in_style = True
        if tag == "script":
            self.in_script = True
        if attrs.get("id") and tag not in ("svg", "figure", "table") and self.svg is None:
            self.ids.append((attrs["id"], tag, []))

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag == "svg":
            self.handle_endtag(tag)

    def handle_endtag(self, tag):
        if tag == "svg" and self.svg_depth:
            self.svg_depth -= 1
            if self.svg_depth == 0:
                self.svg = None
        if tag == "figure":
            self.figure = None
        if tag in ("td", "th") and self.cell is not None and self.rows:
            self.rows[-1].append(" ".join("".join(self.cell).split()))
            self.cell = None
        if tag == "table" and self.table is not None:
            self.report.tables[self.table] = self.rows
            self.table = None
        if tag == "style":
            self.in_style = False
        if tag == "script":
            self.in_script = False
        for index in range(len(self.ids) - 1, -1, -1):
            ident, opened, parts = self.ids[index]
            if opened == tag:
                self.report.texts[ident] = " ".join("".join(parts).split())
                del self.ids[index]
                break

    def handle_data(self, data):
        if self.in_style:
            self.report.styles.append(data)
        if self.in_script:
            self.report.scripts.append(data)
        if self.svg is not None:
            return
        if self.cell is not None:
            self.cell.append(data)
        for _, _, parts in self.ids:
            parts.append(data)


def parse_report(document: str) -> ParsedReport:
    reader = _Reader()
    reader.feed(document)
    reader.close()
    return reader.report


def body_rows(report: ParsedReport, table: str) -> list[list[str]]:
    """The rows of a table below its header rows (those that hold <th> only: the first row, or two)."""
    rows = report.tables[table]
    return rows[2:] if table in ("hall",) else rows[1:]


def header(report: ParsedReport, table: str) -> list[str]:
    rows = report.tables[table]
    return rows[1] if table in ("hall",) else rows[0]
