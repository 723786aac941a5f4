"""A weighted formula (a table search's proxy, :class:`~autoprox.genome.weighted.WeightedFormula`) as a standalone
Python module that needs only NumPy: ``score(columns) -> array``, where ``columns`` maps each proxy column's name to
its values on the rows to rank (NaN or None: not measured; an infinite value ranks beyond the column's finite ones,
as the table reader places it). The module computes each column's centred rank within
those rows, each member of its basis, each evolved term, and the weighted sum, exactly as ``autoprox score`` does (to float rounding): its
transforms are the engine's own code, copied."""

from __future__ import annotations

import datetime as _dt
from pathlib import Path

from autoprox.core.errors import ExportError, ProxyError
from autoprox.genome.rank_formula import Node, built_in_transform_function, transforms_source
from autoprox.genome.weighted import WEIGHTED_FORMULA_FORMAT, WeightedFormula
from autoprox.search.rundir import BEST

__all__ = ["is_weighted_source", "weighted_export_source"]

#: Each operator and transform of a term as a Python expression over its arguments' code.
_EXPRESSIONS = {
    "add": "({0} + {1})", "sub": "({0} - {1})", "mul": "({0} * {1})", "max": "np.maximum({0}, {1})",
    "min": "np.minimum({0}, {1})", "neg": "(-{0})", "rerank": "_rank({0})",
}

#: The exported module's own helpers: a column by name (its infinite cells placed beyond its finite ones by the
#: reader's own :func:`~autoprox.data.proxy_tables.order_infinities`, copied below, as ``score`` reads a table), and
#: the average ranks that the transforms it copies from :func:`~autoprox.genome.rank_formula.transforms_source` read
#: (the engine's own use SciPy).
_OWN_RUNTIME = '''
def _column(columns, name, length):
    if name not in columns:
        return np.full(length, np.nan)
    return order_infinities(np.asarray([np.nan if v is None else v for v in columns[name]], dtype=np.float64))[0]


def _ranks(values):
    """Average ranks (1 = smallest) of the finite entries, NaN elsewhere, and how many are finite."""
    values = np.asarray(values, dtype=np.float64)
    out = np.full(values.shape, np.nan)
    finite = np.flatnonzero(np.isfinite(values))
    if finite.size:
        order = np.argsort(values[finite], kind="mergesort")
        sorted_values = values[finite][order]
        ranks = np.empty(finite.size)
        start = 0
        while start < finite.size:
            stop = start
            while stop + 1 < finite.size and sorted_values[stop + 1] == sorted_values[start]:
                stop += 1
            ranks[start:stop + 1] = (start + stop) / 2.0 + 1.0
            start = stop + 1
        out[finite[order]] = ranks
    return out, finite.size


'''


def _code(node: Node) -> str:
    """A term's tree as a Python expression over ``C`` (the transformed columns by name)."""
    if node.column:
        function = built_in_transform_function(node.op)
        if function is None:
            raise ExportError(f"transform {node.op!r} has no exported form (only the built-in transforms have)")
        return f"{function}(_column(columns, {node.column!r}, length))"
    if node.op not in _EXPRESSIONS:
        raise ExportError(f"operator {node.op!r} of a term has no exported form (lrsum and first are not terms)")
    return _EXPRESSIONS[node.op].format(*(_code(child) for child in node.children))


def _in_docstring(text: str) -> str:
    """``text`` as it reads inside the module's docstring: its backslashes and quotes escaped (a quoted column name
    holds both) and each line break written as ``\\n``, so no text closes the docstring or starts a line."""
    return (text.replace("\\", "\\\\").replace('"', '\\"').replace("\r", "\\r").replace("\n", "\\n"))


def weighted_export_source(formula: WeightedFormula, source: str = "", target: str = "") -> str:
    """The module's source text."""
    lines = []
    for weight, member in zip(formula.weights, formula.members):
        lines.append(f"    total += {weight!r} * np.nan_to_num({_code(member)}, nan=0.0, posinf=0.0, neginf=0.0)"
                     f"  # {member}")
    today = _dt.date.today().isoformat()
    source, target = _in_docstring(source), _in_docstring(target)
    header = (f'"""A proxy exported by autoprox on {today}: a weighted formula over proxy columns'
              f'{" (" + source + ")" if source else ""}{", fitted to " + target if target else ""}.\n\n'
              f"    {_in_docstring(str(formula))}\n\n"
              "score(columns) -> numpy array: columns maps each proxy column's name to its values on the rows to\n"
              "rank (NaN or None where not measured; a column left out reads as no information; a row with none\n"
              "measured scores NaN; inf and -inf rank above and below the column's finite values, as in autoprox\n"
              "score). Each column enters\n"
              "through its rank within these rows, so rank the architectures you compare together. Higher: predicted\n"
              'better. Depends on NumPy only."""\n\nimport math\n\nimport numpy as np\n')
    body = ("\n\ndef score(columns):\n"
            '    """The proxy on every row of ``columns`` (a dict of equal-length sequences)."""\n'
            "    if not columns:\n        raise ValueError('no proxy column given')\n"
            f"    read = {list(formula.columns)!r}\n"
            "    if not any(name in columns for name in read):\n"
            "        raise ValueError('none of the columns this proxy reads is given: ' + ', '.join(read))\n"
            "    length = len(next(iter(columns.values())))\n"
            f"    total = np.full(length, {formula.intercept!r})\n" + "\n".join(lines) + "\n"
            "    measured = np.zeros(length, dtype=bool)\n"
            "    for name in read:\n"
            "        if name in columns:\n"
            "            measured |= ~np.isnan(_column(columns, name, length))\n"
            "    total[~measured] = np.nan  # a row with none of the columns measured: no score\n"
            "    return total\n")
    return header + _OWN_RUNTIME + _reader_source() + "\n\n" + transforms_source() + body


def _reader_source() -> str:
    """The source of the reader's :func:`~autoprox.data.proxy_tables.order_infinities`, copied verbatim: the exported
    module reads an infinite cell (a proxy that overflowed) as ``score`` does, a measurement beyond the column's
    finite values, not as a missing one."""
    import inspect

    from autoprox.data.proxy_tables import order_infinities

    return inspect.getsource(order_infinities)


def is_weighted_source(source: str) -> tuple[WeightedFormula, str, str] | None:
    """The weighted formula a run directory of a table search or its ``best.json`` holds (with its source and
    target), else None."""
    from autoprox.core.atomic import read_json_file

    path = Path(source)
    try:
        file = path / BEST if path.is_dir() else path
        if not file.is_file() or file.suffix != ".json":
            return None
    except (OSError, ValueError):
        return None
    try:  # a file that does not name the format is another proxy's: its export names any problem
        if WEIGHTED_FORMULA_FORMAT not in file.read_text(encoding="utf-8", errors="replace"):
            return None
    except OSError:
        return None
    data = read_json_file(file, "a proxy file", ProxyError)
    if not isinstance(data, dict) or data.get("format") != WEIGHTED_FORMULA_FORMAT:
        return None
    from autoprox.core.errors import GenomeError

    try:
        formula = WeightedFormula.from_json(data.get("formula"))
    except GenomeError as exc:
        raise ProxyError(f"{file}: {exc}") from None
    return formula, str(data.get("run") or file), str(data.get("target") or "")
