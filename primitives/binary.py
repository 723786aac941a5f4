"""Binary primitive operations BOP01..BOP04 (Auto-Prox Table 14) and the error types.

Each value in a proxy tree is a matrix (2-D tensor) or a scalar (0-d tensor), so every
op has a matrix form and a scalar form.  The two exception classes live here, at the
top, with no imports other than ``torch``: an exported proxy file reproduces them by
copying their source text (``inspect.getsource``) verbatim, together with the source
of the op functions, which depend only on ``torch`` and these classes.

No op modifies its inputs in place; the evolution engine shares cached statistics
between thousands of trees.
"""

from __future__ import annotations

import torch


class InvalidResult(ValueError):
    """A proxy value that cannot be computed; the engine marks the proxy invalid."""


class ShapeMismatch(InvalidResult):
    """Operand shapes are incompatible for the op (never silently broadcast)."""


def element_wise_sum(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """BOP01: a + b.

    Scalar form: two scalars give their scalar sum.
    Matrix form: a scalar and a matrix give the scalar broadcast over the matrix;
    two matrices must have identical shapes, else ShapeMismatch (a row or a 1x1
    matrix is never silently broadcast: that would hide a mismatch of statistics).
    """
    if a.dim() > 0 and b.dim() > 0 and a.shape != b.shape:
        raise ShapeMismatch(
            f"element_wise_sum: shapes {tuple(a.shape)} and {tuple(b.shape)} differ"
        )
    return a + b


def element_wise_difference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """BOP02: a - b (order matters: the first operand minus the second).

    Scalar form: two scalars give their scalar difference.
    Matrix form: a scalar and a matrix give the scalar broadcast over the matrix
    (s - M or M - s); two matrices must have identical shapes, else ShapeMismatch
    (never silently broadcast a row or a 1x1 matrix).
    """
    if a.dim() > 0 and b.dim() > 0 and a.shape != b.shape:
        raise ShapeMismatch(
            f"element_wise_difference: shapes {tuple(a.shape)} and {tuple(b.shape)} differ"
        )
    return a - b


def element_wise_product(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """BOP03: a * b (Hadamard product).

    Scalar form: two scalars give their scalar product.
    Matrix form: a scalar and a matrix give the matrix scaled by the scalar; two
    matrices must have identical shapes, else ShapeMismatch (never silently
    broadcast a row or a 1x1 matrix).
    """
    if a.dim() > 0 and b.dim() > 0 and a.shape != b.shape:
        raise ShapeMismatch(
            f"element_wise_product: shapes {tuple(a.shape)} and {tuple(b.shape)} differ"
        )
    return a * b


def matrix_multiplication(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """BOP04: a @ b.

    Matrix form: (m x k) @ (k x n) -> (m x n); both operands must be 2-D with a
    matching inner dimension, else ShapeMismatch (no batched or 1-D matmul).
    Scalar form: two scalars give their product (the 1x1 matrix product).
    A scalar with a matrix is a ShapeMismatch: ``@`` is undefined for a 0-d operand
    (torch and numpy both refuse it), and reading it as scaling would duplicate
    element_wise_product and hide a type error in the tree.
    """
    if a.dim() == 0 and b.dim() == 0:
        return a * b
    if a.dim() != 2 or b.dim() != 2:
        raise ShapeMismatch(
            f"matrix_multiplication: needs two matrices or two scalars, "
            f"got shapes {tuple(a.shape)} and {tuple(b.shape)}"
        )
    if a.shape[1] != b.shape[0]:
        raise ShapeMismatch(
            f"matrix_multiplication: inner dimensions differ, "
            f"{tuple(a.shape)} @ {tuple(b.shape)}"
        )
    return a @ b
