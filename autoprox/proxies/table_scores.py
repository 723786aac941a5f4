"""Scoring a proxy on a proxy table: its published columns, no network built.

On a table (:class:`autoprox.data.proxy_tables.ProxyTable`) a proxy is scored from the
columns the table has:

* a proxy named as a column (``params``, ``flops``, ``nwot``, a table's own column) is that
  column;
* a rank formula reads the columns through its within-space transforms;
* a one-member ensemble of a column (the form ``recommended:any/joint`` took when it was the
  parameter count) is that column;
* anything that needs a network (a genome of the per-block statistics, a zoo proxy the table
  lacks) is refused in one line naming what is missing.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping

import numpy as np

from autoprox.core.correlation import correlate
from autoprox.core.errors import GenomeError, ProxyError
from autoprox.data.proxy_tables import STANDARD_PROXIES, ProxyTable, TableSpace
from autoprox.genome.rank_formula import Node, RankFormula, unmeasured_rows

__all__ = ["UNMEASURED", "check_placed", "reading_note", "table_figures", "table_scores", "space_kendall",
           "unscored_warning"]


def _column(proxy, table: ProxyTable) -> str | None:
    """The table column a non-formula proxy stands for, or None."""
    name = getattr(proxy, "zoo", None) or getattr(proxy, "name", None)
    if name in table.proxies:
        return name
    members = getattr(proxy, "members", None)
    if isinstance(members, Mapping) and len(members) == 1:  # a per-target ensemble: its one target's members
        members = next(iter(members.values()))
    if isinstance(members, (list, tuple)) and len(members) == 1:
        member = members[0]
        member_name = getattr(member, "value", None)
        if getattr(member, "kind", "") == "proxy" and isinstance(member_name, str) and member_name in table.proxies:
            return member_name
    return None


def table_scores(proxy, table: ProxyTable, missing: str | None = None) -> np.ndarray:
    """The scores of every row of ``table`` under ``proxy`` (a :class:`~autoprox.proxies.proxy.Proxy`,
    a :class:`RankFormula`, or a column name).

    Parameters
    ----------
    missing : {"refuse", "neutral"}, optional
        For a rank formula: what a column the table lacks does (default: the proxy's own
        policy, ``refuse`` for a formula typed in).

    Raises
    ------
    ProxyError
        A proxy that needs networks, or reads a column the table lacks, naming it; or reads a column the table has as
        an accuracy column (:func:`check_placed`).
    """
    if isinstance(proxy, str):
        if proxy not in table.proxies:
            raise ProxyError(table.misplaced(proxy, "proxy") or f"{table.source or table.name} has no proxy column "
                             f"{proxy!r} (it has {', '.join(table.proxies) or 'none'})")
        return table.proxies[proxy].copy()
    check_placed(proxy, table)
    formula = proxy if isinstance(proxy, RankFormula) else getattr(proxy, "formula", None)
    if formula is not None and not isinstance(formula, RankFormula) \
            and not any(c in table.proxies for c in formula.columns):
        raise ProxyError(f"{table.source or table.name} has none of the proxy columns the formula reads "
                         f"({', '.join(formula.columns)}; it has {', '.join(table.proxies) or 'none'}): every "
                         "row would score the same")
    if formula is not None:
        policy = missing or getattr(proxy, "missing", "refuse")
        try:
            scores = formula.score(table.proxies, missing=policy)
            read = formula.resolved(table.proxies).columns
        except GenomeError as exc:
            raise ProxyError(f"{table.source or table.name}: {exc}") from None
        return _unscored_where_unmeasured(scores, table, read)
    column = _column(proxy, table)
    if column is not None:
        return table.proxies[column].copy()
    name = getattr(proxy, "name", str(proxy))
    if name in STANDARD_PROXIES:
        raise ProxyError(f"{table.source or table.name} has no proxy column {name!r} "
                         f"(it has {', '.join(table.proxies) or 'none'})")
    kind = getattr(proxy, "kind", "proxy")
    raise ProxyError(f"{name} ({kind}) cannot be scored on the proxy table {table.source or table.name}: it needs "
                     f"networks or a column the table lacks (it has {', '.join(table.proxies) or 'no proxy column'}); "
                     "a table is scored by its proxy columns or a rank formula over them")


def check_placed(proxy, table: ProxyTable) -> None:
    """Refuse, in one line, a formula that reads a column ``table`` has as an accuracy column (one before its first
    standard proxy column): read as a column the table lacks, it would count as no information, and the scores would
    quietly leave out the column the user meant."""
    formula = proxy if isinstance(proxy, RankFormula) else getattr(proxy, "formula", None)
    for column in getattr(formula, "columns", ()):
        problem = None if column in table.proxies else table.misplaced(column, "proxy")
        if problem:
            raise ProxyError(f"the proxy reads {column!r}, and {problem}")


def _unscored_where_unmeasured(scores: np.ndarray, table: ProxyTable, read) -> np.ndarray:
    """``scores`` with NaN (no score) on each row of ``table`` that has no value in any of the columns ``read``: a
    formula reads an empty cell as no information, so such a row would get a score made of nothing measured."""
    scores = np.asarray(scores, dtype=np.float64).copy()
    scores[unmeasured_rows(table.proxies, read, len(table))] = np.nan
    return scores


def unscored_warning(ids, scores: np.ndarray, why: str) -> str | None:
    """The one line ``score`` (and :func:`autoprox.score_rows`) warns with when some rows got no score: how many,
    the first ids, ``why``; None when every row has one."""
    missing = np.flatnonzero(~np.isfinite(np.asarray(scores, dtype=np.float64)))
    if not len(missing):
        return None
    shown = ", ".join(repr(str(ids[i])[:60]) for i in missing[:3]) + (", ..." if len(missing) > 3 else "")
    return (f"{len(missing)} of the {len(scores)} rows got no score ({shown}): {why}; their score is left empty, "
            "and they rank after every scored row")


#: Why a row of a proxy table gets no score (:func:`unscored_warning`).
UNMEASURED = "none of the columns the proxy reads has a value there"


def reading_note(proxy, table: ProxyTable) -> str | None:
    """One line saying how a formula reads ``table`` when the table lacks some of its columns: what a rank
    formula scores there (a ``first(...)``'s alternative, each log-rank sum over the columns the table has),
    and the columns read as no information (every column a weighted formula lacks is); None when the table
    has every column the formula reads (or the proxy is not a formula)."""
    formula = proxy if isinstance(proxy, RankFormula) else getattr(proxy, "formula", None)
    if formula is None:
        return None
    check_placed(formula, table)  # before any note: the error is the one line said
    absent = [c for c in formula.columns if c not in table.proxies]
    if not absent:
        return None
    if not isinstance(formula, RankFormula):  # a weighted formula: each column it lacks enters as 0
        return (f"{table.source or table.name} lacks {', '.join(absent)}{_cased(absent, table)}: read as no "
                f"information (0 after centring); scored from "
                f"{', '.join(c for c in formula.columns if c in table.proxies)}")
    resolved = formula.resolved(table.proxies)
    shown = RankFormula(_present_only(resolved.root, table.proxies))
    lacking = [c for c in resolved.required if c not in table.proxies]
    if (lacking and getattr(proxy, "missing", "refuse") == "refuse") or _has_empty_lrsum(resolved.root, table.proxies):
        return None  # refused: the error names the column(s)
    note = f"{table.source or table.name} lacks {', '.join(absent)}: scored as {shown}"
    if lacking:
        note += f", {', '.join(lacking)} read as no information"
    return note


def _cased(absent, table: ProxyTable) -> str:
    """`` (it has 'NWOT': names are case-sensitive)`` when a column of ``table`` differs from one ``absent`` only by
    case (a renamed header), else ``""``."""
    lowered = {name.lower(): name for name in table.proxies}
    found = [lowered[c.lower()] for c in absent if c.lower() in lowered]
    return f" (it has {', '.join(map(repr, found))}: names are case-sensitive)" if found else ""


def _has_empty_lrsum(node: Node, available) -> bool:
    """Whether an lrsum of ``node`` has none of its columns in ``available`` (scoring it is refused)."""
    if node.op == "lrsum":
        return not any(c in available for c in node.columns)
    return any(_has_empty_lrsum(c, available) for c in node.children or ())


def _present_only(node: Node, available) -> Node:
    """``node`` with each lrsum cut to the columns ``available`` has (kept whole when it has none)."""
    if node.op == "lrsum":
        present = tuple(c for c in node.columns if c in available)
        return Node("lrsum", columns=present or node.columns)
    if not node.children:
        return node
    return replace(node, children=tuple(_present_only(c, available) for c in node.children))


def table_figures(scores: np.ndarray, table: ProxyTable, targets) -> dict[str, dict]:
    """Kendall, Spearman and Pearson of ``scores`` against each target of ``table`` (rows whose score is
    not a number are left out, as rows whose accuracy was not measured are)."""
    figures = {}
    for target in targets:
        accuracy = table.accuracies[target].copy()
        accuracy[~np.isfinite(scores)] = np.nan
        figures[target] = correlate(np.where(np.isfinite(scores), scores, 0.0), accuracy)
    return figures


def space_kendall(proxy, space: TableSpace, missing: str | None = None) -> tuple[float, dict[str, float]]:
    """The space's figure for ``proxy``: the mean Kendall over its (table, target) pairs, and each pair's
    Kendall keyed ``TABLE/TARGET``."""
    pairs = {}
    for table, targets in zip(space.tables, space.targets):
        scores = table_scores(proxy, table, missing)
        for target, figure in table_figures(scores, table, targets).items():
            pairs[f"{table.name}/{target}"] = figure["kendall"]
    values = [v for v in pairs.values() if np.isfinite(v)]
    return (float(np.mean(values)) if values else float("nan")), pairs
