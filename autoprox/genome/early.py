"""Reducing early: the mean of a sum, difference or scaled matrix from its operands' means.

``to_mean_scalar(a ± b) = mean(a) ± mean(b)`` and ``to_mean_scalar(s * M) = s * mean(M)``
hold exactly in real numbers; in float32 the two sides differ by rounding only, provided
nothing overflows or underflows. A matrix operand is summarised per block as (mean, largest
magnitude, shape id, number of entries) (:class:`BranchTable`, kept per architecture between
genomes); :func:`combine_means` gives the reduced value, or None wherever the summaries cannot
guarantee that both forms stay finite and normal, so that the caller computes it the exact
way. The tree walk that uses this is :func:`autoprox.genome.tree._reduced_early`.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

#: Largest finite float32: below it, no partial sum of either form overflows.
FLOAT32_MAX = 3.4028234663852886e38
#: Operations whose mean can be taken of the operands first: a sum or difference (of two
#: matrices of one shape, or a matrix and a scalar), a product of a matrix and a scalar.
LINEAR_UNDER_MEAN = ("element_wise_sum", "element_wise_difference", "element_wise_product")
#: A product whose largest entry is below this (in magnitude) is computed the exact way:
#: its entries may fall under float32's normal range, where they lose precision.
TINY_PRODUCT = 2.0 ** -100

#: (mean, largest magnitude, shape id (-1 for a scalar), number of entries).
Summary = tuple[float, float, int, int]


def scalar_summary(value) -> Summary | None:
    """A 0-d operand's summary; None when it is not finite."""
    number = float(value)
    return (number, abs(number), -1, 1) if abs(number) < FLOAT32_MAX else None


def combine_means(op: str, a: Summary, b: Summary):
    """The 0-d float32 tensor ``to_mean_scalar(op(a, b))`` from the operands' summaries, or None
    when it must be computed the exact way (shapes differ, a Hadamard product, a possible
    overflow, or a product too small for float32's normal range)."""
    (mean_a, bound_a, shape_a, numel_a), (mean_b, bound_b, shape_b, numel_b) = a, b
    numel = max(numel_a, numel_b)
    if op == "element_wise_product":
        if shape_a >= 0 and shape_b >= 0:
            return None  # the mean of a Hadamard product is not the product of the means
        largest = bound_a * bound_b
        if not numel * largest < FLOAT32_MAX or 0.0 < largest < TINY_PRODUCT:
            return None
        value = mean_a * mean_b
    elif op in LINEAR_UNDER_MEAN:
        if (shape_a >= 0 and shape_b >= 0 and shape_a != shape_b) or not numel * (bound_a + bound_b) < FLOAT32_MAX:
            return None
        value = mean_a + mean_b if op == "element_wise_sum" else mean_a - mean_b
    else:
        return None
    import torch

    return torch.tensor(value, dtype=torch.float32)


class BranchTable:
    """Per matrix branch (keyed by its canonical string), each block's :data:`Summary`.

    Kept compactly (one float64 row per block, shapes numbered), as a search meets
    thousands of branches on each of its architectures.
    """

    def __init__(self, blocks: int) -> None:
        self.blocks = blocks
        self.rows: dict[str, np.ndarray] = {}
        self._shape_ids: dict[tuple[int, ...], int] = {}
        self._numels: list[int] = []

    def __len__(self) -> int:
        return len(self.rows)

    def clear(self) -> None:
        self.rows.clear()

    def summary(self, key: str, index: int, evaluate: Callable[[], object]) -> Summary | None:
        """Block ``index``'s summary of branch ``key`` (``evaluate()`` gives its value when not
        kept); None when the value is not a finite float32 matrix (nothing is kept then)."""
        rows = self.rows.get(key)
        if rows is None:
            rows = self.rows[key] = np.full((self.blocks, 3), -1.0)
        mean, bound, shape_id = rows[index]
        if shape_id < 0:
            import torch

            matrix = evaluate()
            if not isinstance(matrix, torch.Tensor) or matrix.dim() == 0 or matrix.dtype != torch.float32:
                return None
            low, high = torch.aminmax(matrix)
            bound = max(-float(low), float(high))
            if not bound < FLOAT32_MAX:  # NaN or inf somewhere: the exact path decides
                return None
            mean = float(torch.mean(matrix))
            shape_id = self._shape_ids.setdefault(tuple(matrix.shape), len(self._shape_ids))
            if shape_id == len(self._numels):
                self._numels.append(matrix.numel())
            rows[index] = (mean, bound, shape_id)
        shape_id = int(shape_id)
        return float(mean), float(bound), shape_id, self._numels[shape_id]
