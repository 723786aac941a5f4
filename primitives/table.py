"""The primitive table: 24 unary + 4 binary ops of Auto-Prox Table 14, each defined once.

One :class:`Primitive` record per op holds everything the engine knows about it: the
paper's id and name, its arity and kind, which typed forms exist and what each returns,
which of them free trees never generate (and why), its SymPy rendering in every form
(for printing and simplifying discovered proxies), and, for the ops that SymPy cannot
write element-wise, the named function standing for it (its text name, its LaTeX name
and what is known of its value). The torch function itself is the function of the same
name in :mod:`autoprox.primitives.unary` or :mod:`autoprox.primitives.binary`, whose source text is copied
verbatim into exported proxies (:attr:`Primitive.source`); an op whose torch kernel is slow
here also has a NumPy form of the same name in :mod:`autoprox.primitives.fast` (:attr:`Primitive.fast`),
which the ``numpy`` kernel set (:data:`KERNEL_SETS`) evaluates genomes with.

This module imports neither torch nor SymPy: torch is imported when a primitive's function is first
used, so that the SymPy worker process (``autoprox.reports.sympy_worker``) starts fast, and SymPy when a
primitive's SymPy form is first built (a formula printed, simplified or exported), so that a command that
builds none (``autoprox --help``, a table search) does not pay its import. Each primitive's SymPy forms stay
in its record, as callables that read ``sympy`` when called.
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Callable, Mapping

from autoprox.core.errors import RegistryError
from autoprox.core.registry import Registry

KINDS = ("elementwise", "rowwise", "matrixwise", "reduction", "binary")
OUTPUT_KINDS = ("matrix", "scalar")
#: The paper's two forms of every op: on matrices and on scalars (56 forms in all).
FORMS = ("matrix", "scalar")
#: The forms of a binary op with one scalar and one matrix operand (the scalar broadcast).
BROADCAST_FORMS = ("matrix_scalar", "scalar_matrix")

if TYPE_CHECKING:
    import sympy
else:
    class _SymPy:
        """``sympy`` for the forms below: SymPy itself, imported at the first name a form reads from it."""

        def __getattr__(self, name: str) -> Any:
            import sympy as module

            return getattr(module, name)

    sympy = _SymPy()


def eps_symbol() -> sympy.Symbol:
    """The paper's epsilon (1e-9) as a SymPy symbol, ``EPS_SYMBOL``; :data:`autoprox.primitives.EPS` is its value."""
    return sympy.Symbol("eps", positive=True)  # SymPy keeps one symbol per name and assumptions


def __getattr__(name: str) -> Any:
    """``EPS_SYMBOL``, made (and SymPy imported) when first asked for."""
    if name == "EPS_SYMBOL":
        return eps_symbol()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True)
class NamedFunction:
    """A SymPy function standing for an op that looks at a whole matrix (or row).

    ``name`` is how formulas print it (``frobenius``), ``latex`` how LaTeX prints it,
    ``assumptions`` what is known of its value (element-wise for matrix-valued ones): it
    lets SymPy drop, for instance, the absolute value of a norm.
    """

    name: str
    assumptions: Mapping[str, bool] = field(default_factory=dict)

    @property
    def latex(self) -> str:
        escaped = self.name.replace("_", r"\_")
        return rf"\operatorname{{{escaped}}}"

    def function(self) -> sympy.FunctionClass:
        """The SymPy function (an undefined function carrying :attr:`assumptions`)."""
        return sympy.Function(self.name, **dict(self.assumptions))


@dataclass(frozen=True)
class Primitive:
    """One op of Table 14, in all its forms.

    kind: "elementwise", "rowwise" (softmax, logsoftmax: along the last axis),
    "matrixwise" (normalize, min_max_normalize: whole-matrix statistics),
    "reduction" (matrix -> scalar) or "binary".
    output_kind: what the MATRIX form returns, "matrix" or "scalar"; the scalar
    form always returns a scalar.
    symbolic: the SymPy rendering of the matrix form (element-wise ops act on a symbol
    standing for a whole matrix as on a number); ``named`` replaces it by a named function.
    symbolic_forms: the SymPy rendering of another form where it differs from the matrix
    form's (``to_std_scalar`` of a scalar is 0, ...); ``sympy.nan`` for a form that is
    always invalid.
    not_generated: form -> why free trees never generate it (it stays valid in a genome).
    fast: whether :mod:`autoprox.primitives.fast` holds a NumPy form of the op, under its name
    (equal to the torch form's values to a few float32 ulps; the ``numpy`` kernel set's).
    """

    op_id: str
    name: str
    arity: int
    kind: str
    output_kind: str
    symbolic: Callable[..., sympy.Expr] | None = None
    named: NamedFunction | None = None
    symbolic_forms: Mapping[str, Callable[..., sympy.Expr]] = field(default_factory=dict)
    not_generated: Mapping[str, str] = field(default_factory=dict)
    fast: bool = False
    #: A primitive registered from outside this package (:func:`make_primitive`): its torch
    #: function itself, and the source text an exported proxy copies (default: the function's).
    torch_function: Callable[..., object] | None = field(default=None, compare=False)
    export_source: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"{self.name}: unknown kind {self.kind!r}")
        if self.output_kind not in OUTPUT_KINDS:
            raise ValueError(f"{self.name}: unknown output_kind {self.output_kind!r}")
        if self.arity not in (1, 2) or (self.arity == 2) != (self.kind == "binary"):
            raise ValueError(f"{self.name}: arity {self.arity} inconsistent with kind {self.kind!r}")
        if (self.symbolic is None) == (self.named is None):
            raise ValueError(f"{self.name}: give either a SymPy rendering or a named function")
        for form in (*self.symbolic_forms, *self.not_generated):
            if form not in self.forms:
                raise ValueError(f"{self.name}: no form {form!r}")

    @property
    def function(self) -> Callable[..., object]:
        """The torch function (``autoprox.primitives.unary.NAME`` or ``autoprox.primitives.binary.NAME``, or a registered
        one's own, checked on every call: :func:`autoprox.primitives.check.checked`)."""
        if self.torch_function is not None:
            return self._checked_function
        module = importlib.import_module(f"{__package__}.{'unary' if self.arity == 1 else 'binary'}")
        return getattr(module, self.name)

    @cached_property
    def _checked_function(self) -> Callable[..., object]:
        from .check import checked

        return checked(self)

    def kernel(self, kernels: str = "torch") -> Callable[..., object]:
        """The function that computes this op in the kernel set ``kernels`` (:data:`KERNEL_SETS`):
        the torch function, or in the ``numpy`` set the fast form where the op has one.
        KeyError naming the known sets when ``kernels`` is none of them."""
        if kernels not in KERNEL_SETS:
            raise KeyError(f"unknown kernel set {kernels!r}; known: {', '.join(KERNEL_SETS)}")
        return KERNEL_SETS[kernels](self)

    def __call__(self, *args: object) -> object:
        return self.function(*args)

    @property
    def source(self) -> str:
        """The function's source text, to copy verbatim into an exported proxy file."""
        if self.export_source is not None:
            return self.export_source
        return inspect.getsource(self.function)

    @property
    def forms(self) -> tuple[str, ...]:
        """The typed forms that exist: every op has a matrix and a scalar form; a binary op
        also takes a scalar with a matrix, in either order (the scalar broadcast)."""
        return FORMS + (BROADCAST_FORMS if self.arity == 2 else ())

    def signature(self, form: str) -> tuple[tuple[str, ...], str]:
        """(argument kinds, result kind) of ``form``, each "matrix" or "scalar"."""
        if form == "matrix":
            return ("matrix",) * self.arity, self.output_kind
        if form == "scalar":
            return ("scalar",) * self.arity, "scalar"
        if form in self.forms:
            return tuple(form.split("_")), "matrix"
        raise ValueError(f"{self.name} has no form {form!r}")

    def sympy(self, *args: sympy.Expr, form: str = "matrix") -> sympy.Expr:
        """This op's ``form`` applied to SymPy argument expressions."""
        if len(args) != self.arity:
            raise TypeError(f"{self.name} takes {self.arity} argument(s), got {len(args)}")
        if form not in self.forms:
            raise ValueError(f"{self.name} has no form {form!r}")
        if form in self.symbolic_forms:
            return self.symbolic_forms[form](*args)
        if self.named is not None:
            return self.named.function()(*args)
        return self.symbolic(*args)


def _const(value: Callable[[], sympy.Expr]) -> Callable[..., sympy.Expr]:
    """A form whose value is ``value()`` whatever its arguments (the constant made on first use, as SymPy is)."""
    return lambda *args: value()


def _nan() -> sympy.Expr:
    return sympy.nan


_NAN_ON_A_SCALAR = "always NaN on a single value"
_SHAPE_MISMATCH = "always a ShapeMismatch (@ is undefined for a 0-d operand)"

# Paper order UOP00..UOP23; the scalar forms follow each function's docstring in unary.py.
_UNARY = (
    Primitive("UOP00", "no_op", 1, "elementwise", "matrix", lambda x: x),
    Primitive("UOP01", "element_wise_abs", 1, "elementwise", "matrix", lambda x: sympy.Abs(x)),
    Primitive("UOP02", "element_wise_tanh", 1, "elementwise", "matrix", lambda x: sympy.tanh(x),
              fast=True),
    Primitive("UOP03", "element_wise_pow", 1, "elementwise", "matrix", lambda x: x**2),
    Primitive("UOP04", "element_wise_exp", 1, "elementwise", "matrix", lambda x: sympy.exp(x),
              fast=True),
    Primitive("UOP05", "element_wise_log", 1, "elementwise", "matrix", lambda x: sympy.log(x),
              fast=True),
    Primitive("UOP06", "element_wise_relu", 1, "elementwise", "matrix", lambda x: sympy.Max(0, x)),
    Primitive("UOP07", "element_wise_leaky_relu", 1, "elementwise", "matrix", lambda x: sympy.Max(x / 10, x)),
    Primitive("UOP08", "element_wise_swish", 1, "elementwise", "matrix", lambda x: x / (1 + sympy.exp(-x))),
    Primitive("UOP09", "element_wise_mish", 1, "elementwise", "matrix",
              lambda x: x * sympy.tanh(sympy.log(1 + sympy.exp(x))), fast=True),
    Primitive("UOP10", "element_wise_invert", 1, "elementwise", "matrix", lambda x: 1 / x),
    Primitive("UOP11", "element_wise_normalized_sum", 1, "reduction", "scalar",
              named=NamedFunction("sum_norm", {"real": True}),
              symbolic_forms={"scalar": lambda x: x / (1 + eps_symbol())}),
    Primitive("UOP12", "normalize", 1, "matrixwise", "matrix", named=NamedFunction("normalize", {"real": True}),
              symbolic_forms={"scalar": _const(_nan)}, not_generated={"scalar": _NAN_ON_A_SCALAR}),
    Primitive("UOP13", "sigmoid", 1, "elementwise", "matrix", lambda x: 1 / (1 + sympy.exp(-x))),
    Primitive("UOP14", "logsoftmax", 1, "rowwise", "matrix", named=NamedFunction("logsoftmax", {"nonpositive": True}),
              symbolic_forms={"scalar": _const(lambda: sympy.Integer(0))}, not_generated={"scalar": "the constant 0"}),
    Primitive("UOP15", "softmax", 1, "rowwise", "matrix", named=NamedFunction("softmax", {"positive": True}),
              symbolic_forms={"scalar": _const(lambda: sympy.Integer(1))}, not_generated={"scalar": "the constant 1"}),
    Primitive("UOP16", "element_wise_sqrt", 1, "elementwise", "matrix", lambda x: sympy.sqrt(x)),
    Primitive("UOP17", "element_wise_revert", 1, "elementwise", "matrix", lambda x: -x),
    Primitive("UOP18", "frobenius_norm", 1, "reduction", "scalar",
              named=NamedFunction("frobenius", {"nonnegative": True}),
              symbolic_forms={"scalar": lambda x: sympy.Abs(x)}),
    Primitive("UOP19", "element_wise_abslog", 1, "elementwise", "matrix", lambda x: sympy.Abs(sympy.log(x)),
              fast=True),
    Primitive("UOP20", "l1_norm", 1, "reduction", "scalar", named=NamedFunction("l1", {"nonnegative": True}),
              symbolic_forms={"scalar": lambda x: sympy.Abs(x)}),
    Primitive("UOP21", "min_max_normalize", 1, "matrixwise", "matrix",
              named=NamedFunction("minmax", {"nonnegative": True}),
              symbolic_forms={"scalar": _const(_nan)}, not_generated={"scalar": _NAN_ON_A_SCALAR}),
    Primitive("UOP22", "to_mean_scalar", 1, "reduction", "scalar", named=NamedFunction("mean", {"real": True}),
              symbolic_forms={"scalar": lambda x: x}),
    Primitive("UOP23", "to_std_scalar", 1, "reduction", "scalar", named=NamedFunction("std", {"nonnegative": True}),
              symbolic_forms={"scalar": _const(lambda: sympy.Integer(0))}, not_generated={"scalar": "the constant 0"}),
)

# Paper order BOP01..BOP04. matmul is a named (non-commutative) function, so matmul(a, b)
# and matmul(b, a) stay distinct.
_BINARY = (
    Primitive("BOP01", "element_wise_sum", 2, "binary", "matrix", lambda a, b: a + b),
    Primitive("BOP02", "element_wise_difference", 2, "binary", "matrix", lambda a, b: a - b),
    Primitive("BOP03", "element_wise_product", 2, "binary", "matrix", lambda a, b: a * b),
    Primitive("BOP04", "matrix_multiplication", 2, "binary", "matrix", named=NamedFunction("matmul", {"real": True}),
              symbolic_forms={"scalar": lambda a, b: a * b, "matrix_scalar": _const(_nan),
                              "scalar_matrix": _const(_nan)},
              not_generated={"scalar": "a duplicate of element_wise_product's scalar form",
                             "matrix_scalar": _SHAPE_MISMATCH, "scalar_matrix": _SHAPE_MISMATCH}),
)

# Tables keyed by the op name (the token used in genome strings): the paper's in paper
# order UOP00..UOP23 and BOP01..BOP04, then any registered with register_primitive.
# Each Primitive carries its op_id.
PRIMITIVES: Registry[str, Primitive] = Registry(
    "primitive", describe=lambda p: f"{p.op_id}, {p.kind}, arity {p.arity}",
    same=lambda held, new: same_definition(held, new))
for _primitive in (*_UNARY, *_BINARY):
    PRIMITIVES.add(_primitive.name, _primitive)
#: Live views of :data:`PRIMITIVES`: the unary and the binary operations.
UNARY: Mapping[str, Primitive] = PRIMITIVES.where(lambda p: p.arity == 1)
BINARY: Mapping[str, Primitive] = PRIMITIVES.where(lambda p: p.arity == 2)
#: The paper's operators (Table 14), in paper order UOP00..UOP23 and BOP01..BOP04, each in its matrix and its
#: scalar form (the paper's 56 primitives): the default operator set of every search, written out rather than read
#: from the table, so that a primitive registered or added to the table later changes no default search (a search
#: records its operators in ``config.json``; a run without that record used these).
PAPER_UNARY: tuple[str, ...] = (
    "no_op", "element_wise_abs", "element_wise_tanh", "element_wise_pow", "element_wise_exp", "element_wise_log",
    "element_wise_relu", "element_wise_leaky_relu", "element_wise_swish", "element_wise_mish", "element_wise_invert",
    "element_wise_normalized_sum", "normalize", "sigmoid", "logsoftmax", "softmax", "element_wise_sqrt",
    "element_wise_revert", "frobenius_norm", "element_wise_abslog", "l1_norm", "min_max_normalize", "to_mean_scalar",
    "to_std_scalar",
)
PAPER_BINARY: tuple[str, ...] = ("element_wise_sum", "element_wise_difference", "element_wise_product",
                                 "matrix_multiplication")
PAPER_OPERATORS: tuple[str, ...] = PAPER_UNARY + PAPER_BINARY
REDUCTIONS: frozenset[str] = frozenset(p.name for p in UNARY.values() if p.kind == "reduction")
#: Named SymPy functions (``frobenius``, ``matmul``, ...) -> the primitive each stands for.
NAMED_FUNCTIONS: Mapping[str, Primitive] = MappingProxyType(
    {p.named.name: p for p in PRIMITIVES.values() if p.named is not None})


def _torch_kernel(primitive: Primitive) -> Callable[..., object]:
    return primitive.function


def _numpy_kernel(primitive: Primitive) -> Callable[..., object]:
    if not primitive.fast:
        return primitive.function
    return getattr(importlib.import_module(f"{__package__}.fast"), primitive.name)


#: Kernel sets a genome can be evaluated with, each mapping a primitive to its function:
#: ``torch`` (the default: the torch forms, bitwise those of every committed run) and
#: ``numpy`` (the :mod:`autoprox.primitives.fast` forms of the ops that have one, torch's elsewhere).
KERNEL_SETS: Mapping[str, Callable[[Primitive], Callable[..., object]]] = MappingProxyType(
    {"torch": _torch_kernel, "numpy": _numpy_kernel})


_NAME = __import__("re").compile(r"[a-z][a-z0-9_]*")
#: Names a registered primitive may not take: the statistics, aggregations and typed-form suffixes
#: live in the same token namespace as the operators.
_RESERVED_PREFIXES = ("block_",)
#: Words an operator list (``--operators``, ``operators=``) reads as something else than an operator:
#: ``paper`` stands for the paper's 28 (:func:`autoprox.search.conversions.operator_list`).
RESERVED_NAMES = frozenset({"paper"})


def make_primitive(name: str, function: Callable[..., object], sympy_form: Callable[..., sympy.Expr],
                   arity: int = 1, kind: str | None = None, output_kind: str = "matrix",
                   source: str | None = None, scalar_forms: Mapping[str, Callable[..., sympy.Expr]] | None = None,
                   not_generated: Mapping[str, str] | None = None) -> Primitive:
    """A primitive record of an operator of your own, in the manner of gplearn's ``make_function``.

    Parameters
    ----------
    name : str
        The token genomes write it with (lower case, digits, ``_``; not a built-in's name).
    function : callable
        The torch function: a 2-D float32 tensor (or a 0-d one, for the scalar form) in, a
        tensor out (``arity`` arguments). It must be a top-level function whose source reads
        only torch, EPS, InvalidResult and ShapeMismatch, unless ``source`` is given: exported
        proxies copy that source verbatim.
    sympy_form : callable
        The same operation on SymPy expressions, for readable formulas (``lambda x: x / (1 + sympy.Abs(x))``).
    arity : {1, 2}
    kind : str, optional
        One of :data:`KINDS`; default ``"elementwise"`` for arity 1, ``"binary"`` for arity 2.
    output_kind : {"matrix", "scalar"}
        What the matrix form returns (``"scalar"`` for a reduction).
    source : str, optional
        The source text exported proxies hold for it (default: ``inspect.getsource(function)``).
    scalar_forms, not_generated : mapping, optional
        As :class:`Primitive`'s ``symbolic_forms`` and ``not_generated``.

    Returns
    -------
    Primitive
        The record; :func:`register_primitive` makes genomes, searches and exports know it.
    """
    if not isinstance(name, str) or not _NAME.fullmatch(name) or name.startswith(_RESERVED_PREFIXES):
        raise ValueError(f"a primitive's name is lower case letters, digits and '_', not starting with "
                         f"'block_'; got {name!r}")
    if name in RESERVED_NAMES:
        raise RegistryError(f"{name!r} cannot name a primitive: an operator list reads it as the paper's 24 + 4 "
                         "operators; give it another name")
    if name in PAPER_OPERATORS:
        PRIMITIVES.check_free(name)
    if not callable(function) or not callable(sympy_form):
        raise ValueError(f"{name}: function and sympy_form must be callables")
    kind = kind or ("binary" if arity == 2 else "elementwise")
    if source is None:
        if getattr(function, "__name__", None) != name:
            raise ValueError(f"{name}: the function's source cannot be read as a function called {name!r} (a "
                             "lambda, or another name?): exported proxies call it by that name; give source=, "
                             f"the text defining {name}(...) that an exported proxy will hold")
        try:
            source = inspect.getsource(function)
        except (OSError, TypeError):
            raise ValueError(f"{name}: the function's source cannot be read; give source=, the text an exported "
                             "proxy will hold") from None
    record = Primitive(f"USER:{name}", name, arity, kind, output_kind, sympy_form,
                       symbolic_forms=dict(scalar_forms or {}), not_generated=dict(not_generated or {}),
                       torch_function=function, export_source=source)
    _check(record)
    return record


def _check(primitive: Primitive) -> None:
    from .check import check_primitive

    check_primitive(primitive)


def same_definition(held: Primitive, new: Primitive) -> bool:
    """Whether ``new`` defines the primitive ``held`` is: the same record, or a registered one of the
    same typing, the same function source and the same SymPy form in every form (a notebook cell run again)."""
    if held is new or (held == new and held.function is new.function):
        return True
    if held.torch_function is None or new.torch_function is None:
        return False
    if not _same_captures(held.torch_function, new.torch_function):
        return False
    typing = ("op_id", "name", "arity", "kind", "output_kind", "named", "fast", "export_source")
    if any(getattr(held, a) != getattr(new, a) for a in typing) or dict(held.not_generated) != dict(new.not_generated):
        return False
    symbols = sympy.symbols("x" if held.arity == 1 else "a b", real=True, seq=True)
    for form in held.forms:
        before, after = held.sympy(*symbols, form=form), new.sympy(*symbols, form=form)
        if before != after and sympy.simplify(before - after) != 0:
            return False
    return True


def _same_captures(held: Callable[..., object], new: Callable[..., object]) -> bool:
    """Whether two functions of the same source compute alike: the same code, defaults and closure values (a
    cell run again after a captured constant changed is another definition). A value that cannot be compared
    counts as different."""
    def captured(function) -> tuple:
        cells = tuple(cell.cell_contents for cell in (getattr(function, "__closure__", None) or ()))
        return (getattr(function, "__code__", None), getattr(function, "__defaults__", None),
                getattr(function, "__kwdefaults__", None), cells)

    try:
        return bool(captured(held) == captured(new))
    except Exception:  # an array-like default or closure value: == gives no truth value
        return False


def register_primitive(primitive: Primitive) -> Primitive:
    """Make ``primitive`` (from :func:`make_primitive`) known to genomes, searches and exports.

    A search uses it only where its genome space names it (``operators``); the default
    operator set stays :data:`PAPER_OPERATORS`. Registering the same definition again (the same
    record, or one of the same function source, typing and SymPy forms: a notebook cell run again)
    does nothing; another definition under a taken name is refused (RegistryError, a ValueError):
    :func:`unregister_primitive` first replaces it. The record is checked on sample values first
    (:func:`autoprox.primitives.check.check_primitive`; ConfigError in one line).
    """
    if primitive.name in RESERVED_NAMES:
        raise RegistryError(f"{primitive.name!r} cannot name a primitive: an operator list reads it as the paper's "
                         "24 + 4 operators; give it another name")
    if primitive.named is not None and primitive.name not in PRIMITIVES:
        raise ValueError(f"{primitive.name}: a registered primitive gives its SymPy form, not a named function")
    held = PRIMITIVES.get(primitive.name)
    if held is not None and same_definition(held, primitive):
        return held
    if held is not None and primitive.name not in PAPER_OPERATORS and held.torch_function is not None:
        raise RegistryError(f"cannot register primitive {primitive.name!r}: another definition of that name is "
                            f"already registered; unregister_primitive({primitive.name!r}) first to replace it, or "
                            "give this one another name")
    if primitive.torch_function is not None:
        _check(primitive)
    return PRIMITIVES.add(primitive.name, primitive)


def unregister_primitive(name: str) -> None:
    """Forget a primitive :func:`register_primitive` registered (the paper's cannot be removed)."""
    if name in PAPER_OPERATORS:
        raise ValueError(f"{name!r} is one of the paper's primitives")
    PRIMITIVES.unregister(name)


def check_operators(names) -> None:
    """ValueError unless ``names`` are registered operations, none twice, at least one unary and one binary."""
    missing = [name for name in names if name not in PRIMITIVES]
    if missing:
        raise ValueError(f"operator {missing[0]!r} is not registered here: a primitive of your own is registered "
                         "(autoprox.primitives.register_primitive) before a search, resume or export that uses it")
    if len(set(names)) != len(names):
        raise ValueError("an operator is named twice")
    if not any(name in UNARY for name in names) or not any(name in BINARY for name in names):
        raise ValueError("operators need at least one unary and one binary operation")


def get_primitive(name: str) -> Primitive:
    """The primitive with this paper name (e.g. "softmax") or op id (e.g. "UOP15").

    Raises KeyError listing the known names when unknown.
    """
    if name in PRIMITIVES:
        return PRIMITIVES[name]
    by_id = next((p for p in PRIMITIVES.values() if p.op_id == name), None)
    if by_id is not None:
        return by_id
    known = ", ".join(PRIMITIVES)
    raise KeyError(f"unknown primitive {name!r}; known primitives: {known}")


def named_function(name: str) -> NamedFunction:
    """The named SymPy function ``name`` (``frobenius``, ...); KeyError when there is none."""
    if name not in NAMED_FUNCTIONS:
        raise KeyError(f"unknown function {name!r}")
    return NAMED_FUNCTIONS[name].named


def forms() -> list[tuple[str, str]]:
    """The paper's 56 primitive forms: each of its 28 ops in its "matrix" and "scalar" form."""
    return [(name, form) for name in PAPER_OPERATORS for form in FORMS]


def export_preamble() -> str:
    """Text that makes any primitive's ``source`` runnable in a standalone file.

    It imports torch, defines EPS and the two exception classes, copied verbatim.
    """
    from . import binary, unary

    classes = "\n\n".join(inspect.getsource(cls) for cls in (binary.InvalidResult, binary.ShapeMismatch))
    return f"import torch\n\nEPS = {unary.EPS!r}\n\n\n{classes}\n"
