"""Primitive operations of the Auto-Prox search space (Table 14).

24 unary ops (UOP00..UOP23) and 4 binary ops (BOP01..BOP04) on matrices (2-D
float32 tensors) and scalars (0-d tensors): 56 primitive forms. Operators of your own
are one record each: :func:`make_primitive` then :func:`register_primitive`. The table
(:mod:`autoprox.primitives.table`) imports neither torch nor SymPy: the torch functions
(:mod:`autoprox.primitives.unary`, :mod:`autoprox.primitives.binary`) and what comes with them
(``EPS``, ``InvalidResult``, ``ShapeMismatch``) are imported on first use, and SymPy when a SymPy form is
first built (or ``EPS_SYMBOL`` first asked for).
"""

from .table import (
    BINARY,
    BROADCAST_FORMS,
    FORMS,
    KERNEL_SETS,
    KINDS,
    NAMED_FUNCTIONS,
    OUTPUT_KINDS,
    PAPER_BINARY,
    PAPER_OPERATORS,
    PAPER_UNARY,
    PRIMITIVES,
    REDUCTIONS,
    UNARY,
    NamedFunction,
    check_operators,
    Primitive,
    export_preamble,
    forms,
    get_primitive,
    make_primitive,
    named_function,
    register_primitive,
    unregister_primitive,
)


def __getattr__(name: str):
    """The names that need torch or SymPy, imported when first asked for."""
    if name in ("InvalidResult", "ShapeMismatch"):
        from . import binary

        return getattr(binary, name)
    if name == "EPS":
        from . import unary

        return unary.EPS
    if name == "EPS_SYMBOL":
        from .table import eps_symbol

        return eps_symbol()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "BINARY",
    "BROADCAST_FORMS",
    "EPS",
    "EPS_SYMBOL",
    "FORMS",
    "KERNEL_SETS",
    "KINDS",
    "NAMED_FUNCTIONS",
    "OUTPUT_KINDS",
    "PAPER_BINARY",
    "PAPER_OPERATORS",
    "PAPER_UNARY",
    "PRIMITIVES",
    "REDUCTIONS",
    "UNARY",
    "check_operators",
    "InvalidResult",
    "NamedFunction",
    "Primitive",
    "ShapeMismatch",
    "export_preamble",
    "forms",
    "get_primitive",
    "make_primitive",
    "named_function",
    "register_primitive",
    "unregister_primitive",
]
