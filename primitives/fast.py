"""NumPy kernels of the element-wise primitives whose torch kernels are slow in this torch build.

The CPU build of torch used here (2.13, AVX512) does not vectorise ``tanh``, ``exp`` and
``log``: NumPy's kernels are 2 to 7 times faster on a statistic of 40k to 140k values
(BENCHMARKS.md, issue 12, fourth session). Each function here computes the primitive of
the same name in :mod:`autoprox.primitives.unary` with NumPy when its input is a CPU float32
tensor without autograd (any shape, 0-d included) and calls the torch form otherwise, so
no caller has to assume where its tensors live. NaN and inf come out as torch's do (log of
a negative value is NaN, log 0 is -inf, exp overflows to inf), with NumPy's warnings
silenced. The values agree with the torch forms to a few float32 ulps, not bitwise
(``tests/primitives/test_kernels.py``).

Which primitive has a fast form is the table's (:attr:`autoprox.primitives.table.Primitive.fast`);
exported proxies keep the torch source.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch

from . import unary


def numpy_ready(x: torch.Tensor) -> bool:
    """Whether ``x`` can be read as a NumPy array without a copy: a CPU float32 strided tensor
    that needs no gradient and carries no lazy negation."""
    return (x.is_cpu and x.dtype is torch.float32 and x.layout is torch.strided
            and not x.requires_grad and not x.is_neg())


def _apply(ufunc: Callable[..., np.ndarray], x: torch.Tensor) -> torch.Tensor:
    """``ufunc`` of ``x`` into a new array of ``x``'s shape and layout (a 0-d one stays an array)."""
    values = x.numpy()
    out = np.empty_like(values)
    with np.errstate(all="ignore"):
        ufunc(values, out=out)
    return torch.from_numpy(out)


def element_wise_tanh(x: torch.Tensor) -> torch.Tensor:
    """UOP02 with NumPy's tanh."""
    return _apply(np.tanh, x) if numpy_ready(x) else unary.element_wise_tanh(x)


def element_wise_exp(x: torch.Tensor) -> torch.Tensor:
    """UOP04 with NumPy's exp (overflow gives inf)."""
    return _apply(np.exp, x) if numpy_ready(x) else unary.element_wise_exp(x)


def element_wise_log(x: torch.Tensor) -> torch.Tensor:
    """UOP05 with NumPy's log (negative values give NaN, zero gives -inf)."""
    return _apply(np.log, x) if numpy_ready(x) else unary.element_wise_log(x)


def element_wise_mish(x: torch.Tensor) -> torch.Tensor:
    """UOP09: torch's softplus (as fast as NumPy's here, and its threshold at 20 kept), then
    NumPy's tanh and product, in place in the softplus's result."""
    if not numpy_ready(x):
        return unary.element_wise_mish(x)
    softplus = torch.nn.functional.softplus(x).numpy()
    with np.errstate(all="ignore"):
        np.tanh(softplus, out=softplus)
        np.multiply(x.numpy(), softplus, out=softplus)
    return torch.from_numpy(softplus)


def element_wise_abslog(x: torch.Tensor) -> torch.Tensor:
    """UOP19: NumPy's log, then the absolute value in place (negative values give NaN, zero inf)."""
    if not numpy_ready(x):
        return unary.element_wise_abslog(x)
    result = _apply(np.log, x)
    np.abs(result.numpy(), out=result.numpy())
    return result


__all__ = ["element_wise_abslog", "element_wise_exp", "element_wise_log", "element_wise_mish",
           "element_wise_tanh", "numpy_ready"]
