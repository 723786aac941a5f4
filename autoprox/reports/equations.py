"""The hall of fame as a table (PySR's ``equations_``): complexity, formula, search and test figures.

Each row is one entry of the hall of fame, best first: its rank, complexity (nodes),
the readable formula, the genome, the search-split JCM and Kendall per target (what
evolution saw), and the same on the test split (architectures the search never saw),
computed by the run's :class:`~autoprox.search.context.RunContext`. ``to_csv`` and
``to_markdown`` write it for a paper or a spreadsheet.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from autoprox.core.atomic import atomic_write_text
from autoprox.genome.tree import parse_genome
from autoprox.proxies.proxy import Proxy


@dataclass(frozen=True)
class EquationTable:
    """Rows of the hall of fame with their figures; ``columns`` names each row's keys in order."""

    columns: tuple[str, ...]
    rows: tuple[dict, ...]

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> dict:
        return self.rows[index]

    def to_csv(self, path: str | Path | None = None) -> str:
        """The table as CSV (full precision); written atomically to ``path`` when given."""
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=list(self.columns), lineterminator="\n")
        writer.writeheader()
        for row in self.rows:
            writer.writerow({k: ("" if _missing(row[k]) else row[k]) for k in self.columns})
        text = buffer.getvalue()
        if path is not None:
            atomic_write_text(path, text)
        return text

    def to_markdown(self, digits: int = 3) -> str:
        """The table as Markdown, numbers to ``digits`` places (the genome column left out)."""
        shown = [c for c in self.columns if c != "genome"]
        lines = ["| " + " | ".join(shown) + " |", "|" + "---|" * len(shown)]
        for row in self.rows:
            lines.append("| " + " | ".join(_cell(row[c], digits) for c in shown) + " |")
        return "\n".join(lines) + "\n"


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _cell(value: Any, digits: int) -> str:
    if _missing(value):
        return "nan"
    if isinstance(value, float):
        return f"{value:+.{digits}f}"
    return str(value).replace("|", "\\|")


def equation_table(context, entries: Sequence) -> EquationTable:
    """The table of hall-of-fame ``entries`` (objects with ``genome``, ``jcm``, ``kendall``,
    ``complexity``, ``text``) of the run whose :class:`RunContext` is ``context``; test figures are
    computed on its test split (NaN when the run has none or the proxy fails there)."""
    targets = list(context.targets)
    columns = ("rank", "complexity", "formula", "genome", "search_jcm", *[f"search_{t}" for t in targets],
               "test_jcm", *[f"test_{t}" for t in targets])
    has_test = bool(context.indices("test"))
    rows = []
    for rank, entry in enumerate(entries, start=1):
        test = context.evaluate(Proxy(entry.genome, parse_genome(entry.genome)), "test") if has_test else {}
        test_targets = test.get("targets") or {}
        row = {"rank": rank, "complexity": entry.complexity, "formula": entry.text, "genome": entry.genome,
               "search_jcm": entry.jcm, "test_jcm": test.get("jcm", math.nan)}
        for target in targets:
            row[f"search_{target}"] = entry.kendall.get(target, math.nan)
            row[f"test_{target}"] = (test_targets.get(target) or {}).get("kendall", math.nan)
        rows.append(row)
    return EquationTable(columns, tuple(rows))


__all__ = ["EquationTable", "equation_table"]
