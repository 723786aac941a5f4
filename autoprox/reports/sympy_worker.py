"""SymPy-only rewriting of proxy formulas, run as a separate process by :mod:`autoprox.reports.simplify`.

``python -m autoprox.reports.sympy_worker`` reads one JSON object per line on stdin,
``{"id": N, "expr": TREE}``, and answers ``{"id": N, "status": "ok", "expr": TREE}``
(or ``"status": "error"``) on stdout. TREE is a plain JSON form of an expression
(:func:`to_data`) over a fixed whitelist of node types, names and symbols (the statistics',
the descriptors', ``eps``, and the zoo terminals', which all begin ``Z_``), read back
by :func:`from_data`: no ``sympify``, ``eval`` or pickle on either side. The module
imports nothing but SymPy and the primitive table (:mod:`autoprox.primitives.table`, which needs
no torch), so that the process starts fast, and a runaway ``sympy.simplify`` is ended by
killing the process. The named functions (``frobenius``, ``matmul``, ...), what is known
of their values, and ``eps`` are the primitive table's.
"""

from __future__ import annotations

import json
import re
import sys

import sympy
from sympy.core.function import AppliedUndef

from autoprox.primitives import EPS_SYMBOL
from autoprox.primitives import NAMED_FUNCTIONS as _PRIMITIVE_OF_FUNCTION

#: The eight statistics as SymPy symbols are named for what they are (see autoprox.reports.simplify).
STAT_SYMBOL_NAMES = ("W_qkv", "G_qkv", "W_proj", "G_proj", "W_fc1", "G_fc1", "H_mlp", "G_H_mlp")
#: The spread statistics S1g, S2g, S3g, S4, S4g (standard deviations over the batch: nonnegative).
SPREAD_SYMBOL_NAMES = ("sd_G_qkv", "sd_G_proj", "sd_G_fc1", "sd_H_mlp", "sd_G_H_mlp")
#: Architecture-level terminals (scalars; ``A_params``, ``A_log_depth``, ...), kept in sync with
#: ``autoprox.spaces.descriptors.terminal_names`` (a test checks it). Descriptors are positive.
ARCH_SYMBOL_NAMES = tuple(f"A_{log}{name}" for name in ("params", "macs", "depth", "width", "heads", "mlp_ratio")
                          for log in ("", "log_"))
#: Zoo proxies' values as terminals (``Z_snip``, ``Z_log_synflow``, ...; real-valued): this process knows them
#: by the name every zoo terminal has (``autoprox.proxies.zoo.ZOO_TERMINAL_PREFIX``), not by a copy of the zoo's
#: registry, which it does not import; the names registered now are
#: ``autoprox.reports.formula_check.ZOO_SYMBOL_NAMES``.
ZOO_SYMBOL = re.compile(r"Z_[A-Za-z0-9_]+")
EPS_NAME = EPS_SYMBOL.name
#: Named functions of the primitive table (``Primitive.named``).
NAMED_FUNCTIONS = frozenset(_PRIMITIVE_OF_FUNCTION)
#: Named functions that reduce a matrix to a scalar (those of the reductions).
REDUCTIONS = frozenset(name for name, p in _PRIMITIVE_OF_FUNCTION.items() if p.kind == "reduction")
#: Named functions that keep a matrix a matrix.
#: SymPy node types an expression may hold (anything else is not passed between processes).
NODES = {
    "Add": sympy.Add, "Mul": sympy.Mul, "Pow": sympy.Pow, "exp": sympy.exp, "log": sympy.log,
    "tanh": sympy.tanh, "Abs": sympy.Abs, "Max": sympy.Max, "Min": sympy.Min, "sign": sympy.sign,
    "sinh": sympy.sinh, "cosh": sympy.cosh, "atan": sympy.atan,
}
_NODE_NAMES = {cls: name for name, cls in NODES.items()}


class Unsupported(ValueError):
    """An expression node outside the whitelist."""


def make_symbol(name: str) -> sympy.Symbol:
    """The symbol of a statistic (real; a spread statistic nonnegative) or of ``eps`` (positive)."""
    if name == EPS_NAME:
        return EPS_SYMBOL
    if name in STAT_SYMBOL_NAMES:
        return sympy.Symbol(name, real=True)
    if name in SPREAD_SYMBOL_NAMES:
        return sympy.Symbol(name, nonnegative=True)
    if name in ARCH_SYMBOL_NAMES:
        return sympy.Symbol(name, positive=True) if "log_" not in name else sympy.Symbol(name, real=True)
    if is_zoo_symbol(name):
        return sympy.Symbol(name, real=True)
    raise Unsupported(f"unknown symbol {name!r}")


def is_zoo_symbol(name: str) -> bool:
    """Whether ``name`` is spelt as a zoo terminal is (``Z_`` and a plain name)."""
    return ZOO_SYMBOL.fullmatch(name) is not None


def is_scalar_symbol(name: str) -> bool:
    """Whether ``name`` is a scalar terminal's symbol (a descriptor's or a zoo proxy's): one value per
    architecture, the same in every block."""
    return name in ARCH_SYMBOL_NAMES or is_zoo_symbol(name)


def make_function(name: str):
    """The named function ``name`` with what is known of its value (``NamedFunction.assumptions``)."""
    if name not in NAMED_FUNCTIONS:
        raise Unsupported(f"unknown function {name!r}")
    return _PRIMITIVE_OF_FUNCTION[name].named.function()


def to_data(expr: sympy.Basic):
    """A JSON-able nested list for ``expr``; Unsupported for a node outside the whitelist."""
    if isinstance(expr, sympy.Symbol):
        make_symbol(expr.name)
        return ["Symbol", expr.name]
    if expr is sympy.nan:
        return ["NaN"]
    if isinstance(expr, sympy.Integer):
        return ["Integer", str(int(expr))]
    if isinstance(expr, sympy.Rational):
        return ["Rational", str(int(expr.p)), str(int(expr.q))]
    if isinstance(expr, sympy.Float):
        return ["Float", repr(float(expr))]
    if expr is sympy.E:
        return ["E"]
    if expr is sympy.pi:
        return ["Pi"]
    if isinstance(expr, AppliedUndef):
        name = expr.func.__name__
        if name not in NAMED_FUNCTIONS:
            raise Unsupported(f"unknown function {name!r}")
        return ["Function", name, *(to_data(a) for a in expr.args)]
    name = _NODE_NAMES.get(expr.func)
    if name is None:
        raise Unsupported(f"unsupported node {type(expr).__name__}")
    return [name, *(to_data(a) for a in expr.args)]


def from_data(data, depth: int = 0) -> sympy.Basic:
    """The expression of :func:`to_data`'s output; Unsupported for anything else."""
    if depth > 200 or not isinstance(data, list) or not data or not isinstance(data[0], str):
        raise Unsupported("malformed expression data")
    kind, rest = data[0], data[1:]
    try:
        if kind == "Symbol":
            return make_symbol(str(rest[0]))
        if kind == "NaN":
            return sympy.nan
        if kind == "Integer":
            return sympy.Integer(int(rest[0]))
        if kind == "Rational":
            return sympy.Rational(int(rest[0]), int(rest[1]))
        if kind == "Float":
            return sympy.Float(float(rest[0]))
        if kind == "E":
            return sympy.E
        if kind == "Pi":
            return sympy.pi
        if kind == "Function":
            return make_function(str(rest[0]))(*(from_data(a, depth + 1) for a in rest[1:]))
    except (IndexError, TypeError, ValueError) as exc:
        raise Unsupported(f"malformed {kind} node ({exc})") from None
    if kind not in NODES:
        raise Unsupported(f"unsupported node {kind!r}")
    return NODES[kind](*(from_data(a, depth + 1) for a in rest))


def node_count(expr: sympy.Basic) -> int:
    """Size of an expression: the number of nodes of its SymPy tree."""
    return sum(1 for _ in sympy.preorder_traversal(expr))


def is_matrix(expr: sympy.Basic) -> bool:
    """Whether ``expr`` is matrix-valued: a statistic reaches it without passing a reduction."""
    if isinstance(expr, sympy.Symbol):
        return expr.name in STAT_SYMBOL_NAMES or expr.name in SPREAD_SYMBOL_NAMES
    if isinstance(expr, AppliedUndef) and expr.func.__name__ in REDUCTIONS:
        return False
    return any(is_matrix(arg) for arg in expr.args)


def expand_means(expr: sympy.Basic) -> sympy.Basic:
    """Push ``mean`` through sums and scalar factors: mean(s*M + N) = s*mean(M) + mean(N).

    The mean of all entries is linear, and a scalar (an expression with no
    statistic outside a reduction) is its own mean. Other reductions are left alone.
    """
    if not expr.args:
        return expr
    args = [expand_means(arg) for arg in expr.args]
    if not (isinstance(expr, AppliedUndef) and expr.func.__name__ == "mean"):
        return expr.func(*args)
    mean = expr.func
    (inner,) = args
    if not is_matrix(inner):
        return inner
    if isinstance(inner, sympy.Add):
        return sympy.Add(*(expand_means(mean(term)) for term in inner.args))
    if isinstance(inner, sympy.Mul):
        scalars = [f for f in inner.args if not is_matrix(f)]
        if scalars:
            matrices = [f for f in inner.args if is_matrix(f)]
            return sympy.Mul(*scalars) * mean(sympy.Mul(*matrices))
    return mean(inner)


def _supported(expr: sympy.Basic) -> bool:
    try:
        to_data(expr)
    except Unsupported:
        return False
    return True


def simplify_expression(expr: sympy.Basic) -> sympy.Basic:
    """The smallest (by :func:`node_count`) of the expression and its rewritings.

    Candidates, in order of preference on a tie: the original, the means expanded,
    ``sympy.simplify`` of each (only those made of whitelisted nodes). The original
    wins unless another is strictly smaller.
    """
    expanded = expand_means(expr)
    candidates = [expr, expanded]
    for start in (expanded, expr):
        candidates.append(sympy.simplify(start))
    best = candidates[0]
    for candidate in candidates[1:]:
        if node_count(candidate) < node_count(best) and _supported(candidate):
            best = candidate
    return best


def main() -> int:
    print(json.dumps({"id": None, "status": "ready"}), flush=True)
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        ident = None
        try:
            message = json.loads(line)
            ident = message["id"]
            result = to_data(simplify_expression(from_data(message["expr"])))
            reply = {"id": ident, "status": "ok", "expr": result}
        except Exception as exc:  # noqa: BLE001 - any failure is reported back, not raised
            reply = {"id": ident, "status": "error", "message": f"{type(exc).__name__}: {exc}"[:300]}
        print(json.dumps(reply), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
