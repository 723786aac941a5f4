"""Value counts of stored float16 statistics, for evaluating a genome once per distinct value.

A float16 statistic holds at most 65,536 distinct bit patterns ("codes"), and a cache entry
stores each block's statistic as one float16 array times a power-of-two scale ``2**exponent``
(:mod:`autoprox.data.entries`). Over the 60 AutoFormer search architectures each of the eight
statistics takes one to four exponents, and a block's statistic holds 4 to 11 times fewer
distinct codes than entries. So an element-wise function of a statistic is known everywhere
once it is known on the 65,536 codes of each exponent, and a block's sum of it is the dot
product of that block's code counts with those values (:mod:`autoprox.genome.counted`).

:class:`CountedStatistic` holds, for one statistic of every block of a set of architectures,
the codes present in each block and how often each occurs; :func:`count_statistics` builds
them from blocks kept as stored (:class:`~autoprox.data.entries.EncodedBlock`, float16).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Sequence

import numpy as np

from autoprox.data.entries import EncodedBlock, decode_array

if TYPE_CHECKING:
    import scipy.sparse
    import torch

#: Every float16 bit pattern, in code order (code ``c`` is the float16 whose bits are ``c``).
CODES = 65536


@dataclass(frozen=True, eq=False)
class CountedStatistic:
    """One statistic of ``M`` blocks as value counts.

    ``counts`` is an ``M x (G * 65536)`` sparse matrix: row ``m`` holds, at column
    ``g * 65536 + c``, how often code ``c`` occurs in block ``m``, whose values are the float16
    codes times ``2**exponents[g]`` with ``g = group[m]``. So a block's sum of any function of
    its entries is the row's dot product with that function's values at every code
    (:attr:`base_values`, flattened). ``shapes[m]`` is block ``m``'s shape, ``numel[m]`` its
    entry count.
    """

    name: str
    exponents: np.ndarray  # int64 [G], ascending
    group: np.ndarray  # int64 [M], index into exponents
    counts: scipy.sparse.csr_matrix  # float64 [M, G * 65536], int32 indices
    shapes: tuple[tuple[int, ...], ...]
    numel: np.ndarray  # int64 [M]

    @property
    def blocks(self) -> int:
        return len(self.group)

    @property
    def nbytes(self) -> int:
        """Bytes the counts take (12 per distinct code of a block)."""
        return int(self.counts.data.nbytes + self.counts.indices.nbytes + self.counts.indptr.nbytes)

    @cached_property
    def base_values(self) -> torch.Tensor:
        """float32 [G, 65536]: every code decoded at each exponent, as a float32 load decodes it
        (:func:`~autoprox.data.entries.decode_array`), so a value here is bitwise the entry's."""
        import torch  # here, not at the top: the table commands read this module without torch

        every = np.arange(CODES, dtype=np.uint16).view(np.float16)
        return torch.stack([decode_array(every, int(e)) for e in self.exponents])

    @cached_property
    def present(self) -> tuple[np.ndarray, ...]:
        """Per exponent group, the codes that occur in at least one of its blocks (int64, ascending)."""
        seen = np.zeros((len(self.exponents), CODES), dtype=bool)
        seen.ravel()[self.counts.indices] = True
        return tuple(np.flatnonzero(row) for row in seen)

    @cached_property
    def largest_numel(self) -> np.ndarray:
        """int64 [G]: the most entries of any block of each group."""
        out = np.zeros(len(self.exponents), dtype=np.int64)
        np.maximum.at(out, self.group, self.numel)
        return out


def stored_float16(block) -> bool:
    """Whether ``block`` keeps its statistics as stored float16 codes (what can be counted)."""
    return isinstance(block, EncodedBlock) and all(block.stored(name)[0].dtype == np.float16 for name in block)


def count_statistic(name: str, blocks: Sequence[EncodedBlock]) -> CountedStatistic | None:
    """The value counts of statistic ``name`` over ``blocks``, or None where it cannot be counted:
    a block not kept as stored float16 (held as float32, or without that statistic)."""
    import scipy.sparse  # on first use: --help imports this module

    arrays = []
    for block in blocks:
        stored = block.stored(name) if isinstance(block, EncodedBlock) else None
        if stored is None or stored[0].dtype != np.float16:
            return None
        arrays.append(stored)
    exponents = np.array(sorted({int(e) for _, e in arrays}), dtype=np.int64)
    group = np.searchsorted(exponents, np.array([int(e) for _, e in arrays], dtype=np.int64)).astype(np.int64)
    columns, counts, offsets = [], [], [0]
    for (array, _), g in zip(arrays, group):
        histogram = np.bincount(np.ascontiguousarray(array).view(np.uint16).ravel(), minlength=CODES)
        present = np.flatnonzero(histogram)
        columns.append((present + int(g) * CODES).astype(np.int32))
        counts.append(histogram[present].astype(np.float64))
        offsets.append(offsets[-1] + len(present))
    matrix = scipy.sparse.csr_matrix(
        (np.concatenate(counts) if counts else np.zeros(0),
         np.concatenate(columns) if columns else np.zeros(0, np.int32),
         np.array(offsets, dtype=np.int64 if offsets[-1] >= 2**31 else np.int32)),
        shape=(len(arrays), max(len(exponents), 1) * CODES))
    return CountedStatistic(
        name=name,
        exponents=exponents,
        group=group,
        counts=matrix,
        shapes=tuple(tuple(int(s) for s in array.shape) for array, _ in arrays),
        numel=np.array([array.size for array, _ in arrays], dtype=np.int64),
    )


__all__ = ["CODES", "CountedStatistic", "count_statistic", "stored_float16"]
