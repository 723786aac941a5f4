"""Primitive operations of the Auto-Prox search space (Table 14).

24 unary ops (UOP00..UOP23) and 4 binary ops (BOP01..BOP04) on matrices (2-D
float32 tensors) and scalars (0-d tensors): 56 primitive forms.
"""

from .binary import InvalidResult, ShapeMismatch
from .table import (
    BINARY,
    FORMS,
    KINDS,
    OUTPUT_KINDS,
    PRIMITIVES,
    REDUCTIONS,
    UNARY,
    Primitive,
    export_preamble,
    forms,
    get_primitive,
)
from .unary import EPS
from .validity import is_valid

__all__ = [
    "BINARY",
    "EPS",
    "FORMS",
    "KINDS",
    "OUTPUT_KINDS",
    "PRIMITIVES",
    "REDUCTIONS",
    "UNARY",
    "InvalidResult",
    "Primitive",
    "ShapeMismatch",
    "export_preamble",
    "forms",
    "get_primitive",
    "is_valid",
]
