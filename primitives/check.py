"""Checks of a primitive record: once on sample values when it is made, and on every call during a search.

:func:`check_primitive` runs a primitive's torch function on a few seeded sample values in each of its
typed forms (a matrix of mixed signs, a positive one, scalars of either sign) and refuses, in one line
naming the primitive and the value, a record whose function raises on them, returns something other
than a tensor (a Python number included: it is refused, not converted), returns the wrong shape for its
kind (a matrix of the input's shape, a 0-d tensor for a scalar), changes its input, is declared
element-wise but is not, or disagrees with its SymPy form (which formulas, reports and LaTeX print) by
more than float32 rounding. Every built-in primitive passes it (``tests/primitives/test_check.py``).

:func:`checked` wraps a registered primitive's function for searches: an exception or a result of the
wrong type or shape becomes :class:`~autoprox.primitives.binary.InvalidResult`, so the genome is invalid
on both evaluation paths, as one giving NaN is.
"""

from __future__ import annotations

from itertools import product
from typing import Callable, Mapping, Protocol, Sequence, runtime_checkable

import sympy
import torch
from sympy.core.function import AppliedUndef

from autoprox.core.errors import ConfigError

from .binary import InvalidResult
from .unary import EPS

#: ``autoprox.primitives.EPS_SYMBOL`` (a SymPy symbol is its name and assumptions): the table imports this
#: module, so this module does not import the table.
EPS_SYMBOL = sympy.Symbol("eps", positive=True)

#: Agreement of the torch function and its SymPy form: float32 rounding (and EPS) apart.
RELATIVE_TOLERANCE = 1e-4


@runtime_checkable
class PrimitiveRecord(Protocol):
    """What the checks read of a primitive record: :class:`autoprox.primitives.table.Primitive`, which this
    module does not import (the table imports this module)."""

    @property
    def name(self) -> str: ...

    @property
    def arity(self) -> int: ...

    @property
    def kind(self) -> str: ...

    @property
    def output_kind(self) -> str: ...

    @property
    def not_generated(self) -> Mapping[str, str]: ...

    @property
    def torch_function(self) -> Callable[..., object] | None: ...

    @property
    def function(self) -> Callable[..., object]: ...

    @property
    def forms(self) -> tuple[str, ...]: ...

    def signature(self, form: str) -> tuple[tuple[str, ...], str]: ...

    def sympy(self, *args: sympy.Expr, form: str = "matrix") -> sympy.Expr: ...


def _samples() -> dict[str, list[torch.Tensor]]:
    """Seeded sample values: 3x4 matrices (mixed signs, positive; magnitudes 0.2 to 2, away from
    every op's singular points), 3x3 ones for binary operations (a matrix product is defined), scalars."""
    generator = torch.Generator().manual_seed(0)
    magnitudes = 0.2 + 1.8 * torch.rand(3, 4, generator=generator)
    signs = torch.tensor([[1.0, -1.0, 1.0, -1.0], [-1.0, 1.0, 1.0, -1.0], [1.0, 1.0, -1.0, -1.0]])
    square = 0.2 + 1.8 * torch.rand(3, 3, generator=generator)
    return {"matrix": [magnitudes * signs, magnitudes.clone()],
            "square": [square * signs[:, :3], square.clone()],
            "scalar": [torch.tensor(0.7), torch.tensor(-1.3), torch.tensor(2.0)]}


def _inputs(primitive: PrimitiveRecord, form: str) -> list[tuple[torch.Tensor, ...]]:
    """The sample arguments of ``form``: each sample (unary) or pairs of them (binary)."""
    samples = _samples()
    kinds = primitive.signature(form)[0]
    if primitive.arity == 1:
        return [(value,) for value in samples[kinds[0]]]
    pools = [samples["square" if kind == "matrix" else "scalar"] for kind in kinds]
    return [(pools[0][i % len(pools[0])], pools[1][(i + 1) % len(pools[1])]) for i in range(2)]


def _describe(args: Sequence[torch.Tensor]) -> str:
    return " and ".join(f"the scalar {float(a):g}" if a.dim() == 0 else f"a {'x'.join(map(str, a.shape))} matrix" for a in args)


def expected_shape(primitive: PrimitiveRecord, args: Sequence[torch.Tensor]) -> tuple[int, ...]:
    """The shape ``primitive`` promises for ``args``: a 0-d tensor where its matrix form returns a scalar
    and every operand is a matrix, else the operands' (broadcast) shape."""
    if primitive.output_kind == "scalar" and all(a.dim() > 0 for a in args):
        return ()
    return tuple(torch.broadcast_shapes(*(a.shape for a in args)))


def _result_problem(primitive: PrimitiveRecord, args: Sequence[torch.Tensor], value: object) -> str | None:
    if not isinstance(value, torch.Tensor):
        return f"returned a {type(value).__name__}, not a torch tensor"
    shape = expected_shape(primitive, args)
    if tuple(value.shape) != shape:
        promised = "a 0-d tensor" if not shape else f"shape {shape}"
        return f"returned shape {tuple(value.shape)}, not {promised}"
    return None


def checked(primitive: PrimitiveRecord) -> Callable[..., torch.Tensor]:
    """``primitive``'s own torch function, turning an exception or a result that is not a tensor of the
    promised shape (:func:`expected_shape`) into :class:`InvalidResult`."""
    function, name = primitive.torch_function, primitive.name

    def call(*args: torch.Tensor) -> torch.Tensor:
        try:
            value = function(*args)
        except InvalidResult:
            raise
        except Exception as exc:
            raise InvalidResult(f"{name} raised {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                                ) from None
        problem = _result_problem(primitive, args, value)
        if problem is not None:
            raise InvalidResult(f"{name} {problem}")
        return value

    call.__name__ = call.__qualname__ = name
    return call


def _sympy_value(expression: sympy.Expr, symbols: Sequence[sympy.Symbol], values: Sequence[float]) -> complex | None:
    """The expression's value at ``values`` (a complex number; NaN where it has none), or None where it
    cannot be evaluated (a named function, another symbol)."""
    value = expression.subs({**dict(zip(symbols, map(sympy.Float, values))), EPS_SYMBOL: sympy.Float(EPS)})
    if value.atoms(AppliedUndef) or value.free_symbols:
        return None
    value = sympy.N(value)
    try:
        return complex(value)
    except TypeError:
        return complex("nan")


def _disagreement(primitive: PrimitiveRecord, form: str, args: Sequence[torch.Tensor], value: torch.Tensor) -> str | None:
    """Where the SymPy form of ``form`` differs from the torch result, entry by entry (element-wise forms) or
    on scalars; None where they agree or the SymPy form has no numeric value."""
    symbols = sympy.symbols("x" if primitive.arity == 1 else "a b", real=True, seq=True)
    expression = primitive.sympy(*symbols, form=form)
    shape = tuple(value.shape)
    if any(a.dim() > 0 for a in args) and (primitive.kind not in ("elementwise", "binary") or not shape):
        return None
    operands = [a.expand(shape) for a in args]
    for index in product(*(range(n) for n in shape)):
        got = float(value[index])
        if got != got or got in (float("inf"), float("-inf")):
            continue  # an invalid value: no formula is shown for it
        at = [float(a[index]) for a in operands]
        expected = _sympy_value(expression, symbols, at)
        if expected is None:
            return None
        if (abs(expected.imag) > 1e-12 or expected.real != expected.real
                or abs(got - expected.real) > RELATIVE_TOLERANCE * max(1.0, abs(expected.real))):
            shown = f"{expected.real:.6g}" if abs(expected.imag) <= 1e-12 else str(expected)
            where = ", ".join(f"{s} = {v:.6g}" for s, v in zip(symbols, at))
            return (f"disagrees with its SymPy form: at {where} the torch function gives {got:.6g}, "
                    f"the SymPy form {expression} gives {shown}")
    return None


def _not_elementwise(primitive: PrimitiveRecord, args: Sequence[torch.Tensor], value: torch.Tensor) -> str | None:
    """Where an element-wise primitive's entry of a matrix is not its value on that entry alone."""
    (matrix,) = args
    for i in range(matrix.shape[0]):
        for j in range(matrix.shape[1]):
            try:
                alone = primitive.torch_function(matrix[i, j].clone())
            except Exception:
                return None  # its scalar form is checked on its own
            if not isinstance(alone, torch.Tensor) or alone.numel() != 1:
                return None
            got, single = float(value[i, j]), float(alone)
            if got == got and single == single and abs(got - single) > RELATIVE_TOLERANCE * max(1.0, abs(single)):
                return (f"is declared element-wise, but its value at entry ({i}, {j}) of a matrix ({got:.6g}) is not "
                        f"its value on that entry alone ({single:.6g}): give its kind (rowwise, matrixwise, reduction)")
    return None


def check_primitive(primitive: PrimitiveRecord) -> None:
    """ConfigError, in one line naming ``primitive`` and a sample value, unless its torch function, on the
    sample values of each typed form, returns a tensor of the promised shape without changing its input,
    is element-wise where declared so, and agrees with its SymPy form (see the module's docstring).
    An :class:`InvalidResult` on a sample is allowed (an op may be undefined there)."""
    function = primitive.torch_function if primitive.torch_function is not None else primitive.function
    for form in primitive.forms:
        for args in _inputs(primitive, form):
            copies = [a.clone() for a in args]
            where = f"{_describe(args)} (its {form} form)"
            try:
                value = function(*copies)
            except InvalidResult:
                continue
            except Exception as exc:
                raise ConfigError(f"primitive {primitive.name!r} raised {type(exc).__name__} on {where}: "
                                  f"{str(exc).splitlines()[0] if str(exc) else ''}") from None
            problem = _result_problem(primitive, args, value)
            if problem is None and any(not torch.equal(a, c) for a, c in zip(args, copies)):
                problem = "changed its input in place (return a new tensor)"
            if problem is None and form == "matrix" and primitive.kind == "elementwise" and value.dim() == 2:
                problem = _not_elementwise(primitive, args, value)
            if problem is None and form not in primitive.not_generated:
                problem = _disagreement(primitive, form, args, value)
            if problem is not None:
                raise ConfigError(f"primitive {primitive.name!r} {problem}, on {where}")


__all__ = ["RELATIVE_TOLERANCE", "PrimitiveRecord", "check_primitive", "checked", "expected_shape"]
