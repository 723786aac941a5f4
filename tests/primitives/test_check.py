"""A primitive record is checked on sample values when made and on every call in a search: its torch function
against its SymPy form and against the shape its kind promises."""

from __future__ import annotations

import pytest
import sympy
import torch

from autoprox.core.errors import ConfigError
from autoprox.primitives import PRIMITIVES, InvalidResult, make_primitive
from autoprox.primitives.check import check_primitive, checked


def liar(x):
    return 2 * x


def wrong_shape(x):
    return x.sum(dim=0)


def gives_float(x):
    return 1.5


def raises(x):
    raise RuntimeError("boom")


def in_place(x):
    return x.mul_(2)


def centred(x):
    return x - x.mean()


def times_two(x):
    return 2 * x


@pytest.mark.parametrize("name", list(PRIMITIVES))
def test_every_registered_primitive_agrees_with_its_sympy_form_and_its_kind(name):
    check_primitive(PRIMITIVES[name])


def test_a_sympy_form_that_disagrees_with_the_torch_function_is_refused():
    with pytest.raises(ConfigError, match=r"primitive 'liar' disagrees with its SymPy form: at x = \S+ the torch "
                                          r"function gives \S+, the SymPy form 3\*x gives"):
        make_primitive("liar", liar, lambda x: 3 * x)
    assert make_primitive("times_two", times_two, lambda x: 2 * x).name == "times_two"


@pytest.mark.parametrize("function, message", [
    (wrong_shape, r"'wrong_shape' returned shape \(4,\), not shape \(3, 4\), on a 3x4 matrix \(its matrix form\)"),
    (gives_float, r"'gives_float' returned a float, not a torch tensor"),
    (raises, r"'raises' raised RuntimeError on a 3x4 matrix \(its matrix form\): boom"),
    (in_place, r"'in_place' changed its input in place"),
    (centred, r"'centred' is declared element-wise, but its value at entry \(0, 0\)"),
])
def test_a_function_that_breaks_its_kinds_promise_is_refused_in_one_line(function, message):
    with pytest.raises(ConfigError, match=message) as caught:
        make_primitive(function.__name__, function, lambda x: x)
    assert "\n" not in str(caught.value)


def test_a_reduction_returns_a_0d_tensor():
    def total(x):
        return x.sum(dim=0)

    with pytest.raises(ConfigError, match=r"'total' returned shape \(4,\), not a 0-d tensor"):
        make_primitive("total", total, lambda x: sympy.Function("total")(x), kind="reduction", output_kind="scalar")


def test_in_a_search_an_exception_or_a_wrong_shape_is_an_invalid_result():
    def sometimes(x):
        if bool((x.abs() > 10).any()):
            raise KeyError("large")
        return x.sum(dim=0) if bool((x < -10).any()) else x

    record = make_primitive("sometimes", sometimes, lambda x: x, source="def sometimes(x):\n    return x\n")
    function = checked(record)
    assert torch.equal(function(torch.ones(2, 3)), torch.ones(2, 3))
    with pytest.raises(InvalidResult, match="sometimes raised KeyError"):
        function(torch.full((2, 3), 20.0))
    record2 = make_primitive("sometimes", lambda x: x.sum(dim=0) if bool((x < -5).any()) else x, lambda x: x,
                             source="def sometimes(x):\n    return x\n")
    with pytest.raises(InvalidResult, match=r"sometimes returned shape \(3,\), not shape \(2, 3\)"):
        record2.function(torch.full((2, 3), -6.0))


def test_the_checks_annotations_resolve_and_every_registered_primitive_is_the_record_they_read():
    """``Primitive`` in the annotations named nothing this module defines or imports (the table imports it):
    resolving them was a NameError. They name the protocol of what the checks read, which every record meets."""
    import typing

    from autoprox.primitives import check

    for function in (check.check_primitive, check.checked, check.expected_shape):
        assert typing.get_type_hints(function)["primitive"] is check.PrimitiveRecord
    assert all(isinstance(primitive, check.PrimitiveRecord) for primitive in PRIMITIVES.values())
    assert not isinstance(object(), check.PrimitiveRecord)
