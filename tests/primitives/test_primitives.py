"""Tests for primitives/: the 56 forms of Auto-Prox Table 14."""

from __future__ import annotations

import dataclasses
import math
import statistics

import pytest
import sympy
import torch

import autoprox.primitives as P
from autoprox.primitives import binary, unary
from tests.conftest import REPO

EPS = 1e-9

# Tiny test matrices: MIX has negatives, a zero and positives; POS is strictly positive.
MIX_ROWS = [[-2.0, -0.5, 0.0], [1.0, 0.5, 3.0]]
POS_ROWS = [[1.0, 2.0, 4.0], [0.25, 0.5, 8.0]]
PAPER_UNARY_ORDER = [
    "no_op", "element_wise_abs", "element_wise_tanh", "element_wise_pow",
    "element_wise_exp", "element_wise_log", "element_wise_relu",
    "element_wise_leaky_relu", "element_wise_swish", "element_wise_mish",
    "element_wise_invert", "element_wise_normalized_sum", "normalize", "sigmoid",
    "logsoftmax", "softmax", "element_wise_sqrt", "element_wise_revert",
    "frobenius_norm", "element_wise_abslog", "l1_norm", "min_max_normalize",
    "to_mean_scalar", "to_std_scalar",
]
PAPER_BINARY_ORDER = [
    "element_wise_sum", "element_wise_difference", "element_wise_product",
    "matrix_multiplication",
]


def mat(rows: list[list[float]]) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.float32)


def sc(v: float) -> torch.Tensor:
    return torch.tensor(v, dtype=torch.float32)


def finite(t: torch.Tensor) -> bool:
    """Every entry finite: what the engine requires of a proxy's values."""
    return bool(torch.isfinite(t).all())


def close(got: torch.Tensor, expected, atol: float = 1e-6) -> None:
    exp = torch.as_tensor(expected, dtype=torch.float32)
    assert got.dtype == torch.float32
    assert got.shape == exp.shape
    torch.testing.assert_close(got, exp, rtol=1e-5, atol=atol, equal_nan=True)


def elementwise(f, rows: list[list[float]]) -> list[list[float]]:
    """Hand computation: a Python scalar formula applied entry by entry."""
    return [[f(v) for v in row] for row in rows]


def unary_inputs() -> list[torch.Tensor]:
    """Inputs for a unary op: both forms; NaN outputs (e.g. log of MIX) are expected."""
    return [mat(MIX_ROWS), mat(POS_ROWS), sc(0.5), sc(-2.0), sc(3.0)]


def binary_inputs(name: str) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Valid operand pairs for a binary op: scalar form, and matrix forms."""
    pairs = [(sc(0.5), sc(-2.0)), (sc(3.0), sc(4.0))]
    if name == "matrix_multiplication":
        return pairs + [(mat(MIX_ROWS), mat(POS_ROWS).T.contiguous())]
    return pairs + [
        (mat(MIX_ROWS), mat(POS_ROWS)),
        (sc(2.0), mat(MIX_ROWS)),
        (mat(MIX_ROWS), sc(2.0)),
    ]


def all_calls():
    """(primitive, args) for every op on every valid test input, both forms."""
    for p in P.UNARY.values():
        for x in unary_inputs():
            yield p, (x,)
    for p in P.BINARY.values():
        for args in binary_inputs(p.name):
            yield p, args


CALLS = list(all_calls())
CALL_IDS = [f"{p.name}-{'x'.join(str(tuple(a.shape)) for a in args)}-{i}" for i, (p, args) in enumerate(CALLS)]


# --- the table ---------------------------------------------------------------------------


def test_counts_and_forms():
    assert len(P.UNARY) == 24
    assert len(P.BINARY) == 4
    assert len(P.PRIMITIVES) == 28
    f = P.forms()
    assert len(f) == 56
    assert len(set(f)) == 56
    assert {form for _, form in f} == {"matrix", "scalar"}
    assert {name for name, _ in f} == {p.name for p in P.PRIMITIVES.values()}


def test_paper_order_and_ids():
    # keyed by paper name, in paper order, each carrying its op id
    assert list(P.UNARY) == PAPER_UNARY_ORDER
    assert list(P.BINARY) == PAPER_BINARY_ORDER
    assert [p.op_id for p in P.UNARY.values()] == [f"UOP{i:02d}" for i in range(24)]
    assert [p.op_id for p in P.BINARY.values()] == [f"BOP{i:02d}" for i in range(1, 5)]
    assert list(P.PRIMITIVES) == PAPER_UNARY_ORDER + PAPER_BINARY_ORDER
    for name, p in P.PRIMITIVES.items():
        assert p.name == name
        assert P.get_primitive(p.op_id) is p
        module = unary if p.arity == 1 else binary
        assert p.function is getattr(module, p.name)


def test_kinds_and_output_kinds():
    kinds = {p.name: p.kind for p in P.PRIMITIVES.values()}
    assert {n for n, k in kinds.items() if k == "rowwise"} == {"softmax", "logsoftmax"}
    assert {n for n, k in kinds.items() if k == "matrixwise"} == {"normalize", "min_max_normalize"}
    reductions = {
        "element_wise_normalized_sum", "frobenius_norm", "l1_norm",
        "to_mean_scalar", "to_std_scalar",
    }
    assert {n for n, k in kinds.items() if k == "reduction"} == reductions
    assert P.REDUCTIONS == frozenset(reductions)
    assert {n for n, k in kinds.items() if k == "binary"} == set(PAPER_BINARY_ORDER)
    for p in P.PRIMITIVES.values():
        assert p.output_kind == ("scalar" if p.name in reductions else "matrix")
        assert p.arity == (2 if p.kind == "binary" else 1)


def test_a_primitive_is_one_value_by_name_and_by_id():
    """Name and paper id find the same registered primitive, and a changed copy of it (the only way to
    change one) leaves the registry as it was: no caller can alter another search's primitive set."""
    by_name, by_id = P.get_primitive("softmax"), P.get_primitive("UOP15")
    assert by_name is by_id
    changed = dataclasses.replace(by_name, name="other")
    assert changed != by_name and changed.op_id == "UOP15"
    assert P.get_primitive("UOP15") is by_name and P.PRIMITIVES["softmax"] is by_name
    assert "other" not in P.PRIMITIVES


def test_get_primitive():
    assert P.get_primitive("softmax").op_id == "UOP15"
    assert P.get_primitive("UOP15").name == "softmax"
    assert P.get_primitive("matrix_multiplication").op_id == "BOP04"
    with pytest.raises(KeyError) as err:
        P.get_primitive("element_wise_cube")
    message = str(err.value)
    assert "element_wise_cube" in message
    for name in PAPER_UNARY_ORDER + PAPER_BINARY_ORDER:
        assert name in message


# --- output form ------------------------------------------------------------------------


@pytest.mark.parametrize("p,args", CALLS, ids=CALL_IDS)
def test_output_form(p, args):
    out = p.function(*args)
    assert isinstance(out, torch.Tensor)
    assert out.dtype == torch.float32
    if all(a.dim() == 0 for a in args) or p.output_kind == "scalar":
        assert out.dim() == 0
    else:
        assert out.dim() == 2


# --- purity -----------------------------------------------------------------------------


@pytest.mark.parametrize("p,args", CALLS, ids=CALL_IDS)
def test_purity(p, args):
    clones = [a.clone() for a in args]
    versions = [a._version for a in args]
    p.function(*args)
    for a, c, v in zip(args, clones, versions):
        assert torch.equal(a, c)
        assert a._version == v  # no in-place op touched the input


# --- unary values, matrix form ----------------------------------------------------------

def sig(v: float) -> float:
    return 1.0 / (1.0 + math.exp(-v))


ELEMENTWISE_EXPECTED = {
    "no_op": (MIX_ROWS, lambda v: v),
    "element_wise_abs": (MIX_ROWS, abs),
    "element_wise_tanh": (MIX_ROWS, math.tanh),
    "element_wise_pow": (MIX_ROWS, lambda v: v * v),
    "element_wise_exp": (MIX_ROWS, math.exp),
    "element_wise_log": (POS_ROWS, math.log),
    "element_wise_relu": (MIX_ROWS, lambda v: max(0.0, v)),
    "element_wise_leaky_relu": (MIX_ROWS, lambda v: max(0.1 * v, v)),
    "element_wise_swish": (MIX_ROWS, lambda v: v * sig(v)),
    "element_wise_mish": (MIX_ROWS, lambda v: v * math.tanh(math.log(1.0 + math.exp(v)))),
    "element_wise_invert": (POS_ROWS, lambda v: 1.0 / v),
    "sigmoid": (MIX_ROWS, sig),
    "element_wise_sqrt": (POS_ROWS, math.sqrt),
    "element_wise_revert": (MIX_ROWS, lambda v: -v),
    "element_wise_abslog": (POS_ROWS, lambda v: abs(math.log(v))),
}


def test_elementwise_table_is_complete():
    names = {p.name for p in P.UNARY.values() if p.kind == "elementwise"}
    assert names == set(ELEMENTWISE_EXPECTED)


@pytest.mark.parametrize("name", sorted(ELEMENTWISE_EXPECTED))
def test_elementwise_matrix_and_scalar(name):
    rows, f = ELEMENTWISE_EXPECTED[name]
    fn = P.get_primitive(name).function
    close(fn(mat(rows)), elementwise(f, rows))
    for v in (rows[0][1], rows[1][2]):
        close(fn(sc(v)), f(v))


def test_leaky_relu_negatives():
    close(unary.element_wise_leaky_relu(mat([[-2.0, -0.5, 0.0]])), [[-0.2, -0.05, 0.0]])
    close(unary.element_wise_leaky_relu(sc(-3.0)), -0.3)
    close(unary.element_wise_relu(sc(-3.0)), 0.0)


def test_pow_is_square_and_revert_is_negation():
    close(unary.element_wise_pow(mat(MIX_ROWS)), [[4.0, 0.25, 0.0], [1.0, 0.25, 9.0]])
    close(unary.element_wise_revert(sc(2.5)), -2.5)


def test_mish_is_stable():
    out = unary.element_wise_mish(mat([[100.0, -100.0, 1000.0]]))
    assert finite(out)
    close(out, [[100.0, 0.0, 1000.0]], atol=1e-6)


def test_abslog_is_abs_of_log():
    close(unary.element_wise_abslog(mat([[0.5, 2.0, 1.0]])), [[math.log(2), math.log(2), 0.0]])
    assert torch.isnan(unary.element_wise_abslog(sc(-2.0)))  # |ln x|, not ln|x|


def test_softmax_rows():
    x = mat(MIX_ROWS)
    out = unary.softmax(x)
    expected = []
    for row in MIX_ROWS:
        z = sum(math.exp(v) for v in row)
        expected.append([math.exp(v) / z for v in row])
    close(out, expected)
    close(out.sum(dim=-1), [1.0, 1.0])  # each row sums to 1 (last axis)
    assert not torch.allclose(out.sum(dim=0), torch.ones(3))
    assert finite(unary.softmax(mat([[1000.0, 0.0, -1000.0]])))  # stable


def test_logsoftmax_rows():
    x = mat(MIX_ROWS)
    out = unary.logsoftmax(x)
    expected = []
    for row in MIX_ROWS:
        lse = math.log(sum(math.exp(v) for v in row))
        expected.append([v - lse for v in row])
    close(out, expected)
    close(out, torch.log(unary.softmax(x)))


def test_normalize_population_std():
    x = mat(MIX_ROWS)
    flat = [v for row in MIX_ROWS for v in row]
    m, s = statistics.fmean(flat), statistics.pstdev(flat)
    out = unary.normalize(x)
    close(out, elementwise(lambda v: (v - m) / s, MIX_ROWS))
    close(out.mean(), 0.0)
    close(out.std(correction=0), 1.0)
    assert torch.isnan(unary.normalize(torch.ones(2, 3))).all()  # unprotected 0/0


def test_min_max_normalize():
    out = unary.min_max_normalize(mat(MIX_ROWS))
    close(out, [[0.0, 0.3, 0.4], [0.6, 0.5, 1.0]])
    assert out.min() == 0.0 and out.max() == 1.0
    assert ((out >= 0) & (out <= 1)).all()


def test_reductions_matrix_form():
    x = mat(MIX_ROWS)
    flat = [v for row in MIX_ROWS for v in row]
    close(unary.element_wise_normalized_sum(x), sum(flat) / (6 + EPS))
    close(unary.frobenius_norm(mat([[3.0, 4.0]])), 5.0)
    close(unary.frobenius_norm(x), math.sqrt(14.5))
    close(unary.l1_norm(x), 7.0 / 6.0)
    close(unary.to_mean_scalar(x), 1.0 / 3.0)
    close(unary.to_std_scalar(x), statistics.pstdev(flat))


# --- unary values, scalar form ----------------------------------------------------------


def test_scalar_forms_of_matrix_level_ops():
    s = sc(0.5)
    close(unary.softmax(s), 1.0)
    close(unary.logsoftmax(s), 0.0)
    assert torch.isnan(unary.normalize(s))
    assert torch.isnan(unary.min_max_normalize(s))
    close(unary.element_wise_normalized_sum(s), 0.5 / (1 + EPS))
    close(unary.frobenius_norm(sc(-2.0)), 2.0)
    close(unary.l1_norm(sc(-2.0)), 2.0)
    close(unary.to_mean_scalar(sc(-2.0)), -2.0)
    close(unary.to_std_scalar(sc(-2.0)), 0.0)
    close(unary.no_op(s), 0.5)


def test_scalar_forms_propagate_invalid_input():
    for name in ("softmax", "logsoftmax", "to_std_scalar"):
        assert not finite(P.get_primitive(name).function(sc(float("nan"))))


# --- binary -----------------------------------------------------------------------------


def test_element_wise_binary_values():
    a, b = mat(MIX_ROWS), mat(POS_ROWS)
    close(binary.element_wise_sum(a, b), [[-1.0, 1.5, 4.0], [1.25, 1.0, 11.0]])
    close(binary.element_wise_difference(a, b), [[-3.0, -2.5, -4.0], [0.75, 0.0, -5.0]])
    close(binary.element_wise_product(a, b), [[-2.0, -1.0, 0.0], [0.25, 0.25, 24.0]])
    close(binary.element_wise_sum(sc(1.5), sc(2.0)), 3.5)
    close(binary.element_wise_difference(sc(1.5), sc(2.0)), -0.5)
    close(binary.element_wise_product(sc(1.5), sc(2.0)), 3.0)
    # scalar broadcast over a matrix, both orders
    close(binary.element_wise_sum(sc(1.0), a), elementwise(lambda v: 1.0 + v, MIX_ROWS))
    close(binary.element_wise_difference(sc(1.0), a), elementwise(lambda v: 1.0 - v, MIX_ROWS))
    close(binary.element_wise_difference(a, sc(1.0)), elementwise(lambda v: v - 1.0, MIX_ROWS))
    close(binary.element_wise_product(a, sc(2.0)), elementwise(lambda v: 2.0 * v, MIX_ROWS))


def test_matrix_multiplication_values():
    close(binary.matrix_multiplication(mat([[1.0, 2.0], [3.0, 4.0]]), mat([[5.0], [6.0]])), [[17.0], [39.0]])
    a, b = mat(MIX_ROWS), mat(POS_ROWS).T
    expected = [[sum(x * y for x, y in zip(r, c)) for c in POS_ROWS] for r in MIX_ROWS]
    close(binary.matrix_multiplication(a, b), expected)
    close(binary.matrix_multiplication(sc(3.0), sc(-2.0)), -6.0)


@pytest.mark.parametrize("name", ["element_wise_sum", "element_wise_difference", "element_wise_product"])
def test_element_wise_shape_mismatch(name):
    fn = P.get_primitive(name).function
    a = mat(MIX_ROWS)
    with pytest.raises(P.ShapeMismatch):
        fn(a, a.T)
    with pytest.raises(P.ShapeMismatch):
        fn(a, a[:1])  # a row is never silently broadcast
    with pytest.raises(P.ShapeMismatch):
        fn(torch.ones(1, 1), a)


def test_matmul_shape_mismatch():
    a = mat(MIX_ROWS)
    with pytest.raises(P.ShapeMismatch):
        binary.matrix_multiplication(a, a)  # (2x3) @ (2x3)
    with pytest.raises(P.ShapeMismatch):
        binary.matrix_multiplication(sc(2.0), a)
    with pytest.raises(P.ShapeMismatch):
        binary.matrix_multiplication(a, sc(2.0))
    with pytest.raises(P.ShapeMismatch):
        binary.matrix_multiplication(torch.ones(3), torch.ones(3))


def test_exception_hierarchy():
    assert issubclass(P.ShapeMismatch, P.InvalidResult)
    assert issubclass(P.InvalidResult, ValueError)


# --- validity ---------------------------------------------------------------------------


def test_unprotected_ops_give_non_finite_values():
    assert finite(mat(MIX_ROWS)) and finite(sc(0.0))
    assert not finite(unary.element_wise_log(sc(-1.0)))  # NaN
    assert not finite(unary.element_wise_log(mat(MIX_ROWS)))  # NaN and -inf
    assert not finite(unary.element_wise_invert(sc(0.0)))  # inf
    assert not finite(unary.element_wise_sqrt(mat(MIX_ROWS)))
    assert not finite(unary.element_wise_exp(sc(1000.0)))  # overflow


# --- SymPy ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(ELEMENTWISE_EXPECTED))
def test_sympy_elementwise_matches_torch(name):
    p = P.get_primitive(name)
    x = sympy.Symbol("x")
    expr = p.sympy(x)
    for v in (0.5, 3.0, 1.7):
        got = float(expr.subs(x, sympy.Float(v)).evalf())
        close(p.function(sc(v)), got)
    if name not in ("element_wise_log", "element_wise_sqrt", "element_wise_abslog", "element_wise_invert"):
        v = -1.3
        close(p.function(sc(v)), float(expr.subs(x, sympy.Float(v)).evalf()))


def test_sympy_matrix_level_ops_are_named_functions():
    x = sympy.Symbol("x")
    expected = {
        "normalize": "normalize", "softmax": "softmax", "logsoftmax": "logsoftmax",
        "min_max_normalize": "minmax", "element_wise_normalized_sum": "sum_norm",
        "frobenius_norm": "frobenius", "l1_norm": "l1", "to_mean_scalar": "mean",
        "to_std_scalar": "std",
    }
    for name, fname in expected.items():
        expr = P.get_primitive(name).sympy(x)
        assert expr.func.__name__ == fname and expr.func == P.named_function(fname).function()
        assert expr.args == (x,)
        assert P.NAMED_FUNCTIONS[fname] is P.get_primitive(name)
    # what is known of their values (SymPy drops |frobenius(x)|, keeps |mean(x)|)
    assert P.get_primitive("frobenius_norm").sympy(x).is_nonnegative
    assert P.get_primitive("softmax").sympy(x).is_positive
    assert P.get_primitive("to_mean_scalar").sympy(x).is_nonnegative is None
    assert P.named_function("sum_norm").latex == r"\operatorname{sum\_norm}"
    assert P.named_function("l1").latex == r"\operatorname{l1}"


def test_sympy_binary():
    a, b = sympy.symbols("a b")
    assert P.get_primitive("element_wise_sum").sympy(a, b) == a + b
    assert P.get_primitive("element_wise_difference").sympy(a, b) == a - b
    assert P.get_primitive("element_wise_product").sympy(a, b) == a * b
    mm = P.get_primitive("matrix_multiplication")
    assert mm.sympy(a, b).func.__name__ == "matmul"
    assert mm.sympy(a, b) != mm.sympy(b, a)  # non-commutative
    with pytest.raises(TypeError):
        mm.sympy(a)


def test_sympy_specific_forms():
    x = sympy.Symbol("x")
    assert P.get_primitive("element_wise_relu").sympy(x) == sympy.Max(0, x)
    assert P.get_primitive("element_wise_leaky_relu").sympy(x) == sympy.Max(x / 10, x)
    assert P.get_primitive("element_wise_pow").sympy(x) == x**2
    assert P.get_primitive("sigmoid").sympy(x) == 1 / (1 + sympy.exp(-x))
    assert P.get_primitive("element_wise_abslog").sympy(x) == sympy.Abs(sympy.log(x))


def test_scalar_and_broadcast_forms_in_sympy_follow_the_torch_functions():
    """Each form's SymPy rendering gives what the torch function gives on scalars."""
    x, y = sympy.Symbol("x", real=True), sympy.Symbol("y", real=True)
    for p in P.UNARY.values():
        expr = p.sympy(x, form="scalar")
        for v in (0.5, 3.0):
            value = expr.subs({x: v, P.EPS_SYMBOL: EPS})
            torch_value = p.function(sc(v))
            if value is sympy.nan:
                assert torch.isnan(torch_value), p.name
            else:
                close(torch_value, float(value))
    mm = P.get_primitive("matrix_multiplication")
    assert mm.sympy(x, y, form="scalar") == x * y
    assert mm.sympy(x, y, form="matrix_scalar") is sympy.nan  # always a ShapeMismatch
    assert P.get_primitive("element_wise_sum").sympy(x, y, form="scalar_matrix") == x + y
    with pytest.raises(ValueError, match="no form"):
        P.get_primitive("sigmoid").sympy(x, form="matrix_scalar")


def test_typed_forms_and_what_free_trees_never_generate():
    for p in P.PRIMITIVES.values():
        assert p.forms == (("matrix", "scalar", "matrix_scalar", "scalar_matrix") if p.arity == 2
                           else ("matrix", "scalar"))
        assert p.signature("scalar") == (("scalar",) * p.arity, "scalar")
        assert p.signature("matrix") == (("matrix",) * p.arity, p.output_kind)
    assert P.get_primitive("element_wise_sum").signature("scalar_matrix") == (("scalar", "matrix"), "matrix")
    never = {(p.name, form) for p in P.PRIMITIVES.values() for form in p.not_generated}
    assert never == {("normalize", "scalar"), ("min_max_normalize", "scalar"), ("softmax", "scalar"),
                     ("logsoftmax", "scalar"), ("to_std_scalar", "scalar"),
                     ("matrix_multiplication", "scalar"), ("matrix_multiplication", "matrix_scalar"),
                     ("matrix_multiplication", "scalar_matrix")}
    for name, form in never:  # each one really is NaN, a constant, a duplicate or a mismatch
        p = P.get_primitive(name)
        if p.arity == 1:
            value = p.function(sc(0.7))
            assert torch.isnan(value) or float(value) in (0.0, 1.0)
    with pytest.raises(P.ShapeMismatch):
        P.get_primitive("matrix_multiplication").function(sc(2.0), mat(MIX_ROWS))


def test_the_table_imports_without_torch():
    """The SymPy worker reads the table; it must not pay for importing torch."""
    import subprocess
    import sys

    code = "import sys, autoprox.primitives as primitives; primitives.get_primitive('softmax').sympy; print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                            cwd=str(REPO))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_the_table_imports_sympy_when_a_sympy_form_is_first_built():
    """Every command reads the table (a quarter of a second of SymPy, ``autoprox --help`` included); SymPy comes
    with the first SymPy form built, each primitive's forms kept in its record, constants and EPS_SYMBOL too."""
    import subprocess
    import sys

    code = ("import sys, autoprox.primitives as P; before = 'sympy' in sys.modules; "
            "x = __import__('sympy').Symbol('x', real=True); "
            "print(before, P.get_primitive('normalize').sympy(x, form='scalar'), "
            "P.get_primitive('element_wise_normalized_sum').sympy(x, form='scalar'), "
            "P.get_primitive('softmax').sympy(x, form='scalar'), P.EPS_SYMBOL.is_positive)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                            cwd=str(REPO))
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "nan", "x/(eps", "+", "1)", "1", "True"]


# --- export path: source text runs standalone -------------------------------------------


def same(a: torch.Tensor, b: torch.Tensor) -> None:
    assert a.shape == b.shape and a.dtype == b.dtype
    torch.testing.assert_close(a, b, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("p", list(P.PRIMITIVES.values()), ids=lambda p: p.name)
def test_source_runs_in_fresh_namespace(p):
    namespace: dict = {"torch": torch, "EPS": unary.EPS}
    if p.arity == 2:
        namespace["InvalidResult"] = binary.InvalidResult
        namespace["ShapeMismatch"] = binary.ShapeMismatch
    exec(p.source, namespace)  # noqa: S102 - our own source, checked for export
    copy = namespace[p.name]
    assert copy is not p.function
    for q, args in CALLS:
        if q is p:
            same(copy(*args), p.function(*args))
    assert f"def {p.name}(" in p.source
    assert p.function.__doc__ and "Scalar form" in p.function.__doc__


def test_export_preamble_makes_sources_standalone():
    text = P.export_preamble() + "\n\n" + "\n\n".join(p.source for p in P.PRIMITIVES.values())
    namespace: dict = {}
    exec(text, namespace)  # noqa: S102 - our own source, checked for export
    for q, args in CALLS:
        same(namespace[q.name](*args), q.function(*args))
    with pytest.raises(namespace["InvalidResult"]):
        namespace["matrix_multiplication"](sc(1.0), mat(MIX_ROWS))
