"""The primitive table: 24 unary + 4 binary ops of Auto-Prox Table 14, 56 forms in all.

Each ``Primitive`` records the paper's id and name, its arity, its kind (how it
treats a matrix), what its matrix form returns, the function itself, its source
text (for exporting a proxy as a standalone file) and a SymPy rendering (for
printing and simplifying discovered proxies).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from types import MappingProxyType
from typing import Callable, Mapping

import sympy

from . import binary as _binary
from . import unary as _unary

KINDS = ("elementwise", "rowwise", "matrixwise", "reduction", "binary")
OUTPUT_KINDS = ("matrix", "scalar")
FORMS = ("matrix", "scalar")


def _fn(name: str) -> sympy.FunctionClass:
    """A named, undefined SymPy function standing for a matrix-level op."""
    return sympy.Function(name)


# SymPy renderings, keyed by op name.  Element-wise ops map to SymPy functions of
# the argument; ops that look at the whole matrix (or a whole row) and reductions
# map to named undefined functions, since SymPy symbols here stand for the values
# flowing through the tree, not for matrices.  matmul is a plain undefined
# Function, so matmul(a, b) and matmul(b, a) stay distinct (non-commutative).
_SYMPY: Mapping[str, Callable[..., sympy.Expr]] = MappingProxyType(
    {
        "no_op": lambda x: x,
        "element_wise_abs": lambda x: sympy.Abs(x),
        "element_wise_tanh": lambda x: sympy.tanh(x),
        "element_wise_pow": lambda x: x**2,
        "element_wise_exp": lambda x: sympy.exp(x),
        "element_wise_log": lambda x: sympy.log(x),
        "element_wise_relu": lambda x: sympy.Max(0, x),
        "element_wise_leaky_relu": lambda x: sympy.Max(x / 10, x),
        "element_wise_swish": lambda x: x / (1 + sympy.exp(-x)),
        "element_wise_mish": lambda x: x * sympy.tanh(sympy.log(1 + sympy.exp(x))),
        "element_wise_invert": lambda x: 1 / x,
        "element_wise_normalized_sum": lambda x: _fn("sum_norm")(x),
        "normalize": lambda x: _fn("normalize")(x),
        "sigmoid": lambda x: 1 / (1 + sympy.exp(-x)),
        "logsoftmax": lambda x: _fn("logsoftmax")(x),
        "softmax": lambda x: _fn("softmax")(x),
        "element_wise_sqrt": lambda x: sympy.sqrt(x),
        "element_wise_revert": lambda x: -x,
        "frobenius_norm": lambda x: _fn("frobenius")(x),
        "element_wise_abslog": lambda x: sympy.Abs(sympy.log(x)),
        "l1_norm": lambda x: _fn("l1")(x),
        "min_max_normalize": lambda x: _fn("minmax")(x),
        "to_mean_scalar": lambda x: _fn("mean")(x),
        "to_std_scalar": lambda x: _fn("std")(x),
        "element_wise_sum": lambda a, b: a + b,
        "element_wise_difference": lambda a, b: a - b,
        "element_wise_product": lambda a, b: a * b,
        "matrix_multiplication": lambda a, b: _fn("matmul")(a, b),
    }
)


@dataclass(frozen=True)
class Primitive:
    """One op of Table 14.

    kind: "elementwise", "rowwise" (softmax, logsoftmax: along the last axis),
    "matrixwise" (normalize, min_max_normalize: whole-matrix statistics),
    "reduction" (matrix -> scalar) or "binary".
    output_kind: what the MATRIX form returns, "matrix" or "scalar"; the scalar
    form always returns a scalar.
    """

    op_id: str
    name: str
    arity: int
    kind: str
    function: Callable[..., object]
    output_kind: str

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"{self.name}: unknown kind {self.kind!r}")
        if self.output_kind not in OUTPUT_KINDS:
            raise ValueError(f"{self.name}: unknown output_kind {self.output_kind!r}")
        if self.arity not in (1, 2) or (self.arity == 2) != (self.kind == "binary"):
            raise ValueError(f"{self.name}: arity {self.arity} inconsistent with kind {self.kind!r}")

    def __call__(self, *args: object) -> object:
        return self.function(*args)

    @property
    def source(self) -> str:
        """The function's source text, to copy verbatim into an exported proxy file."""
        return inspect.getsource(self.function)

    def sympy(self, *args: sympy.Expr) -> sympy.Expr:
        """This op applied to SymPy argument expressions."""
        if len(args) != self.arity:
            raise TypeError(f"{self.name} takes {self.arity} argument(s), got {len(args)}")
        return _SYMPY[self.name](*args)


# (name, kind) in paper order UOP00..UOP23.
_UNARY_SPEC: tuple[tuple[str, str], ...] = (
    ("no_op", "elementwise"),
    ("element_wise_abs", "elementwise"),
    ("element_wise_tanh", "elementwise"),
    ("element_wise_pow", "elementwise"),
    ("element_wise_exp", "elementwise"),
    ("element_wise_log", "elementwise"),
    ("element_wise_relu", "elementwise"),
    ("element_wise_leaky_relu", "elementwise"),
    ("element_wise_swish", "elementwise"),
    ("element_wise_mish", "elementwise"),
    ("element_wise_invert", "elementwise"),
    ("element_wise_normalized_sum", "reduction"),
    ("normalize", "matrixwise"),
    ("sigmoid", "elementwise"),
    ("logsoftmax", "rowwise"),
    ("softmax", "rowwise"),
    ("element_wise_sqrt", "elementwise"),
    ("element_wise_revert", "elementwise"),
    ("frobenius_norm", "reduction"),
    ("element_wise_abslog", "elementwise"),
    ("l1_norm", "reduction"),
    ("min_max_normalize", "matrixwise"),
    ("to_mean_scalar", "reduction"),
    ("to_std_scalar", "reduction"),
)

# Names in paper order BOP01..BOP04.
_BINARY_SPEC: tuple[str, ...] = (
    "element_wise_sum",
    "element_wise_difference",
    "element_wise_product",
    "matrix_multiplication",
)


def _unary_table() -> dict[str, Primitive]:
    return {
        name: Primitive(
            op_id=f"UOP{i:02d}",
            name=name,
            arity=1,
            kind=kind,
            function=getattr(_unary, name),
            output_kind="scalar" if kind == "reduction" else "matrix",
        )
        for i, (name, kind) in enumerate(_UNARY_SPEC)
    }


def _binary_table() -> dict[str, Primitive]:
    return {
        name: Primitive(
            op_id=f"BOP{i:02d}",
            name=name,
            arity=2,
            kind="binary",
            function=getattr(_binary, name),
            output_kind="matrix",
        )
        for i, name in enumerate(_BINARY_SPEC, start=1)
    }


# Tables keyed by the paper's op name (the token used in genome strings), in paper
# order UOP00..UOP23 and BOP01..BOP04; each Primitive carries its op_id.
UNARY: dict[str, Primitive] = _unary_table()
BINARY: dict[str, Primitive] = _binary_table()
PRIMITIVES: dict[str, Primitive] = {**UNARY, **BINARY}
_BY_ID: Mapping[str, Primitive] = MappingProxyType({p.op_id: p for p in PRIMITIVES.values()})
REDUCTIONS: frozenset[str] = frozenset(p.name for p in UNARY.values() if p.kind == "reduction")


def get_primitive(name: str) -> Primitive:
    """The primitive with this paper name (e.g. "softmax") or op id (e.g. "UOP15").

    Raises KeyError listing the known names when unknown.
    """
    if name in PRIMITIVES:
        return PRIMITIVES[name]
    if name in _BY_ID:
        return _BY_ID[name]
    known = ", ".join(PRIMITIVES)
    raise KeyError(f"unknown primitive {name!r}; known primitives: {known}")


def forms() -> list[tuple[str, str]]:
    """The 56 primitive forms: each of the 28 ops in its "matrix" and "scalar" form."""
    return [(p.name, form) for p in PRIMITIVES.values() for form in FORMS]


def export_preamble() -> str:
    """Text that makes any primitive's ``source`` runnable in a standalone file.

    It imports torch, defines EPS and the two exception classes, copied verbatim.
    """
    classes = "\n\n".join(
        inspect.getsource(cls) for cls in (_binary.InvalidResult, _binary.ShapeMismatch)
    )
    return f"import torch\n\nEPS = {_unary.EPS!r}\n\n\n{classes}\n"
