"""Counted evaluation: a genome evaluated once per distinct stored value, for every block at once.

The exact path (:func:`autoprox.genome.tree.score_architecture`) decodes each statistic of
each block and runs every operation on every entry. But a block's statistic is stored as
float16 codes times ``2**exponent``, and over a benchmark a statistic takes few exponents
(:mod:`autoprox.data.counts`). So an element-wise chain of operations on a statistic is
evaluated here on the 65,536 codes of each exponent, once for all blocks of all
architectures, and a block's sum of the result is the dot product of its code counts with
those values. A block's entries hold the very float32 values the exact path computes (the
same kernels on the same decoded inputs); only the summation differs (float64 products of
counts and values against torch's float32 cascade sums), so scores agree to float32
rounding, not bitwise (``tests/genome/test_counted.py`` states and checks the tolerance).

Evaluated this way: the statistics and architecture terminals; element-wise operations; the
five reductions (mean, sum over numel, L1, Frobenius norm, standard deviation);
``normalize`` and ``min_max_normalize``, whose result differs from block to block, so that it
and what follows it are evaluated block by block on each block's distinct values
(:class:`Blockwise`, still 4 to 11 times fewer than its entries); every scalar form; a binary
operation of two values of one statistic (element-wise, so still one chain) or of two
scalars; and under ``to_mean_scalar`` a sum or difference of two matrices, or a sum,
difference or product of a matrix and a scalar, as the mean of the matrix and the scalar (or
the two means), where nothing can overflow or underflow. Anything else (row-wise operations
on a matrix, Hadamard and matrix products of two statistics) raises :class:`NotCounted`, and
so does a value that is not finite, a shape mismatch, or near-constant scores
(:data:`NEAR_CONSTANT`): the caller then evaluates the genome the exact way, which also gives
an invalid genome its exact reason.

What a walk would give up on is known from the tree alone for some genomes: a row-wise operation or a
product of matrices, a mean (or standard deviation) of a normalized matrix or of a Hadamard product of
two statistics. Met mid-walk, they cost what the walk computed first (on the default search, a
normalized matrix is 720 blocks' values computed and thrown away: 0.24 s each), so
:func:`structural_obstacle` finds them first, following the walk's rules on the kinds of values alone (a
scalar, a matrix of one statistic, normalized or not, or a pending binary operation of a matrix), and only
where the walk raises whatever the values: it may miss an obstacle (the walk then finds it), but a genome
it stops is one the walk stops too (``tests/genome/test_counted.py`` checks it on every genome of the corpus), so
the scores are the ones the exact path gives in either case.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np
import torch
from deap import gp

from autoprox.data.counts import CountedStatistic, count_statistic, stored_float16
from autoprox.genome.tree import (
    TEMPLATE_REDUCTION,
    Scalar,
    format_subtree,
    aggregate,
    kernel_map,
    op_name,
    statistic_terminals,
    uses_scalar_terminals,
)
from autoprox.primitives import PAPER_OPERATORS, PRIMITIVES, InvalidResult

#: Largest finite float32: below it, no partial sum of either form overflows.
FLOAT32_MAX = 3.4028234663852886e38
#: A product whose largest entry is below this (in magnitude) is computed the exact way:
#: its entries may fall under float32's normal range, where they lose precision.
TINY_PRODUCT = 2.0 ** -100


class NotCounted(Exception):
    """A genome (or one of its values) the counted path does not evaluate; the exact path does."""


@dataclass(frozen=True, eq=False)
class Tabled:
    """An element-wise function of one statistic: its value at every code of each exponent group."""

    statistic: CountedStatistic
    values: torch.Tensor  # float32 [G, 65536]


@dataclass(frozen=True, eq=False)
class Blockwise:
    """A function of one statistic that differs from block to block (after ``normalize`` or
    ``min_max_normalize``): per block, its value at each of the block's codes (ascending), a
    small float32 tensor, evaluated block by block like the exact path but on distinct values."""

    statistic: CountedStatistic
    values: tuple[torch.Tensor, ...]  # per block, float32 [codes of the block]
    #: Straight from ``normalize``: each block's mean is zero but for rounding, which the exact
    #: path's float32 sum and this float64 one round differently, so no mean of it is taken here.
    centred: bool = False


def _dot(counts: np.ndarray, values: np.ndarray) -> float:
    """The float64 dot product of a block's counts and values, in this thread (torch's, which
    follows its intra-op thread count: NumPy's BLAS would start threads of its own)."""
    return float(torch.dot(torch.from_numpy(counts), torch.from_numpy(np.asarray(values, dtype=np.float64))))


def _rows(statistic: CountedStatistic):
    """Per block: its counts (float64) and the positions of its codes in the flattened tables."""
    counts = statistic.counts
    for m in range(statistic.blocks):
        start, end = counts.indptr[m], counts.indptr[m + 1]
        yield counts.data[start:end], counts.indices[start:end]


def _blockwise(value) -> Blockwise:
    """A matrix operand as a :class:`Blockwise` one (a :class:`Tabled` one read at each block's codes)."""
    if isinstance(value, Blockwise):
        return value
    flat = value.values.numpy().reshape(-1)
    blocks = tuple(torch.from_numpy(flat.take(columns)) for _, columns in _rows(value.statistic))
    return Blockwise(value.statistic, blocks)


@dataclass(frozen=True, eq=False)
class Pending:
    """A binary operation on a matrix whose result only its mean can be taken of (``to_mean_scalar``)."""

    op: str
    left: object
    right: object


#: The forms a matrix value takes here.
MATRICES = (Tabled, Blockwise)
#: Operations whose matrix form is element-wise (a function of each entry alone).
ELEMENTWISE = frozenset(name for name, p in PRIMITIVES.items() if p.kind == "elementwise")


class CountedBlocks:
    """The blocks of a set of architectures (one statistics set, kept as stored), counted lazily
    per statistic (:func:`~autoprox.data.counts.count_statistic`) on first use."""

    def __init__(self, architectures: Sequence[Sequence[Mapping]], memo_limit: int = 4096) -> None:
        self.sizes = [len(blocks) for blocks in architectures]
        self._blocks = [block for blocks in architectures for block in blocks]
        self._statistics: dict[str, CountedStatistic | None] = {}
        #: Scalar subtrees' values on every block (float32 [M]), by canonical string, shared between
        #: genomes of one kernel set (as :class:`~autoprox.genome.memo.SubtreeMemo` is per architecture).
        self.memo: dict[str, torch.Tensor] = {}
        self.memo_limit = memo_limit

    @property
    def blocks(self) -> int:
        return len(self._blocks)

    @property
    def statistic_names(self) -> tuple[str, ...]:
        """The statistics the blocks hold (the eight, and extras where loaded)."""
        return tuple(self._blocks[0].keys()) if self._blocks else ()

    def statistic(self, name: str) -> CountedStatistic:
        """The counted statistic ``name``; NotCounted when its blocks are not stored float16."""
        if name not in self._statistics:
            counted = count_statistic(name, self._blocks)
            if counted is not None:  # what every genome reading it needs, made now rather than in its first one
                counted.base_values, counted.present, counted.largest_numel  # noqa: B018
            self._statistics[name] = counted
        found = self._statistics[name]
        if found is None:
            raise NotCounted(f"statistic {name} is not held as stored float16")
        return found

    def remember(self, key: str, value) -> None:
        """Keep a scalar subtree's values (emptying the memo when it is full)."""
        if isinstance(value, torch.Tensor):
            if len(self.memo) >= self.memo_limit:
                self.memo.clear()
            self.memo[key] = value

    @property
    def nbytes(self) -> int:
        """Bytes the counts take."""
        return sum(s.nbytes for s in self._statistics.values() if s is not None)


def is_counted_form(architectures: Sequence[Sequence[Mapping]]) -> bool:
    """Whether blocks are kept as stored float16 (:class:`~autoprox.data.entries.EncodedBlock`),
    the form counted evaluation reads (judged on the first block)."""
    for blocks in architectures:
        for block in blocks:
            return stored_float16(block)
    return True


def _block_sums(table: Tabled, square: bool = False, absolute: bool = False) -> np.ndarray:
    """float64 [M]: each block's sum of its entries' values (of their squares, or magnitudes):
    its row of counts times those values at every code, in float64; NotCounted when a value that
    occurs is not finite or a float32 sum of the entries could overflow."""
    statistic, values = table.statistic, table.values
    if isinstance(table, Blockwise):
        if table.centred and not (square or absolute):
            raise NotCounted("the mean of a normalized matrix is its rounding")
        sums = np.empty(statistic.blocks, dtype=np.float64)
        for m, ((counts, _), block) in enumerate(zip(_rows(statistic), values)):
            entries = (block * block if square else torch.abs(block) if absolute else block).numpy()
            _check_summable(entries, statistic.numel[m])
            sums[m] = _dot(counts, entries)
        return sums
    if square:
        values = values * values  # element-wise, as the exact path squares each entry
    elif absolute:
        values = torch.abs(values)
    _check_finite(statistic, values.numpy())
    return statistic.counts @ values.numpy().astype(np.float64).ravel()


def _check_summable(values: np.ndarray, numel: int) -> None:
    """NotCounted when one of ``values`` is NaN or inf, or a float32 sum of ``numel`` entries
    taking them could overflow."""
    if not np.isfinite(values).all():
        raise NotCounted("a value is not finite")
    if values.size and float(np.max(np.abs(values))) * float(numel) >= FLOAT32_MAX:
        raise NotCounted("a sum could overflow float32")


def _check_finite(statistic: CountedStatistic, arrays: np.ndarray) -> None:
    """:func:`_check_summable` of every exponent group's values at the codes occurring in it."""
    for group, present in enumerate(statistic.present):
        _check_summable(arrays[group, present], statistic.largest_numel[group])


def _float32(values: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.asarray(values, dtype=np.float32))


def _means(table: Tabled) -> torch.Tensor:
    """float32 [M]: each block's ``torch.mean`` of the table's entries (their sum over their count)."""
    numel = table.statistic.numel
    return _float32(_block_sums(table)) / _float32(numel)


def _reduce(op: str, table: Tabled) -> torch.Tensor:
    """float32 [M]: the reduction ``op`` of each block's entries, in the float32 steps the op's
    torch form takes after its sum (:mod:`autoprox.primitives.unary`)."""
    numel = _float32(table.statistic.numel)
    if op == "to_mean_scalar":
        return _means(table)
    if op == "element_wise_normalized_sum":
        return _float32(_block_sums(table)) / numel
    if op == "l1_norm":
        return _float32(_block_sums(table, absolute=True)) / numel
    if op == "frobenius_norm":
        return torch.sqrt(_float32(_block_sums(table, square=True)))
    if op == "to_std_scalar":
        return _standard_deviations(table)
    raise NotCounted(f"{op} is not a counted reduction")


#: Below this ratio of variance to mean square, a variance from the first two moments has lost
#: more than about 1e-10 of its relative precision in float64: it is then taken in two passes.
_CANCELLATION = 1e-6


def _standard_deviations(table: Tabled) -> torch.Tensor:
    """float32 [M]: each block's population standard deviation, in float64 from the first two
    moments of its counts, or in two passes over its codes where those would cancel."""
    if isinstance(table, Blockwise):
        statistic = table.statistic
        means = _block_sums(table) / statistic.numel
        out = np.empty(statistic.blocks, dtype=np.float64)
        for m, ((counts, _), block) in enumerate(zip(_rows(statistic), table.values)):
            _check_summable((block * block).numpy(), statistic.numel[m])
            deviations = block.numpy().astype(np.float64) - means[m]
            out[m] = _dot(counts, deviations * deviations) / statistic.numel[m]
        return _float32(np.sqrt(out))
    statistic, arrays = table.statistic, table.values.numpy()
    values = arrays.astype(np.float64).ravel()
    _check_finite(statistic, arrays)
    _check_finite(statistic, arrays * arrays)
    means = (statistic.counts @ values) / statistic.numel
    squares = (statistic.counts @ (values * values)) / statistic.numel
    variances = squares - means * means
    counts = statistic.counts
    for m in np.flatnonzero(~(variances > _CANCELLATION * squares)):
        start, end = counts.indptr[m], counts.indptr[m + 1]
        deviations = values.take(counts.indices[start:end]) - means[m]
        variances[m] = _dot(counts.data[start:end], deviations * deviations) / statistic.numel[m]
    return _float32(np.sqrt(variances))


def _bounds(value) -> np.ndarray:
    """float64 [G or M]: the largest magnitude of a matrix operand's entries per group (over the
    codes present in it), or each block's scalar magnitude."""
    if isinstance(value, Tabled):
        arrays = value.values.numpy()
        return np.array([float(np.max(np.abs(arrays[g, p]))) if p.size else 0.0
                         for g, p in enumerate(value.statistic.present)])
    if isinstance(value, Blockwise):
        return np.array([float(torch.max(torch.abs(v))) if v.numel() else 0.0 for v in value.values])
    return np.abs(value.numpy().astype(np.float64))


def _per_block(bounds: np.ndarray, value) -> np.ndarray:
    return bounds[value.statistic.group] if isinstance(value, Tabled) else bounds


def _matrixwise(op: str, value) -> Blockwise:
    """``normalize`` or ``min_max_normalize`` of a matrix operand, block by block: each block's
    mean and standard deviation from its counts (or its least and largest value), then each of
    its values as the op's torch form computes each entry."""
    if not (value.statistic.numel > 0).all():
        raise NotCounted("a block without entries")
    blocks = _blockwise(value)
    if op == "normalize":
        means, deviations = _means(value), _standard_deviations(value)
        return Blockwise(blocks.statistic, tuple((v - means[m]) / deviations[m] for m, v in enumerate(blocks.values)),
                         centred=True)
    if op == "min_max_normalize":
        def scaled(v: torch.Tensor) -> torch.Tensor:
            low = torch.min(v)
            return (v - low) / (torch.max(v) - low)

        return Blockwise(blocks.statistic, tuple(scaled(v) for v in blocks.values))
    raise NotCounted(f"{op} is not a counted whole-matrix operation")


def _mean_of_pending(pending: Pending) -> torch.Tensor:
    """float32 [M]: ``to_mean_scalar`` of a pending binary operation, from its operands' means,
    where that cannot differ from the exact form by more than rounding (NotCounted otherwise)."""
    left, right, op = pending.left, pending.right, pending.op
    if op not in LINEAR_UNDER_MEAN:
        raise NotCounted(f"the mean of {op} is not its operands'")
    matrices = [v for v in (left, right) if isinstance(v, MATRICES)]
    if op == "element_wise_product" and len(matrices) == 2:
        raise NotCounted("the mean of a Hadamard product is not the product of the means")
    if len(matrices) == 2:
        a, b = (m.statistic for m in matrices)
        if any(sa != sb for sa, sb in zip(a.shapes, b.shapes)):
            raise NotCounted("shapes differ")
    bound_left, bound_right = (_per_block(_bounds(v), v) for v in (left, right))
    numel = np.maximum(*(v.statistic.numel if isinstance(v, MATRICES) else np.ones(len(bound_left))
                         for v in (left, right)))
    if not (np.isfinite(bound_left).all() and np.isfinite(bound_right).all()):
        raise NotCounted("a value is not finite")
    if op == "element_wise_product":
        largest = bound_left * bound_right
        if not (numel * largest < FLOAT32_MAX).all() or ((largest > 0) & (largest < TINY_PRODUCT)).any():
            raise NotCounted("a product could overflow or leave float32's normal range")
    elif not (numel * (bound_left + bound_right) < FLOAT32_MAX).all():
        raise NotCounted("a sum could overflow float32")
    mean_left = _means(left) if isinstance(left, MATRICES) else left
    mean_right = _means(right) if isinstance(right, MATRICES) else right
    if op == "element_wise_sum":
        return mean_left + mean_right
    if op == "element_wise_difference":
        return mean_left - mean_right
    return mean_left * mean_right


class _Walk:
    """One genome's evaluation over every block of a :class:`CountedBlocks`."""

    def __init__(self, tree: gp.PrimitiveTree, counted: CountedBlocks,
                 terminals: Sequence[Mapping[str, float]] | None, kernels: Mapping[str, Callable]) -> None:
        self.tree, self.counted, self.terminals, self.kernels = tree, counted, terminals, kernels

    def terminal(self, name: str):
        if name in statistic_terminals():
            statistic = self.counted.statistic(name)
            return Tabled(statistic, statistic.base_values)
        if self.terminals is None:
            raise NotCounted("architecture terminals without their values")
        per_arch = [float(torch.tensor(t[name], dtype=torch.float32)) for t in self.terminals]
        return _float32(np.repeat(per_arch, self.counted.sizes))

    def scalar_form(self, name: str, *args: torch.Tensor) -> torch.Tensor:
        """A scalar form on every block at once: element-wise forms on the whole vector, the others
        (whose scalar form is not their matrix form) block by block on 0-d tensors."""
        function = self.kernels[name]
        op = op_name(name)
        if op in ELEMENTWISE or op in ("element_wise_sum", "element_wise_difference", "element_wise_product"):
            return function(*args)
        values = [function(*(a[m] for a in args)) for m in range(len(args[0]))]
        return torch.stack(values).to(torch.float32)

    def evaluate(self, position: int) -> tuple[object, int]:
        node = self.tree[position]
        if isinstance(node, gp.Terminal):
            return self.terminal(node.name), position + 1
        key = format_subtree(self.tree, position, canonical=True)[0] if node.ret is Scalar else None
        if key is not None and key in self.counted.memo:
            return self.counted.memo[key], self.tree.searchSubtree(position).stop
        args, end = [], position + 1
        for _ in range(node.arity):
            value, end = self.evaluate(end)
            args.append(value)
        value = self.apply(node.name, args)
        if key is not None:
            self.counted.remember(key, value)
        return value, end

    def apply(self, name: str, args: list):
        op = op_name(name)
        if all(isinstance(a, torch.Tensor) for a in args):
            return self.scalar_form(name, *args)
        if any(isinstance(a, Pending) for a in args):
            if op == TEMPLATE_REDUCTION and len(args) == 1:
                return _mean_of_pending(args[0])
            raise NotCounted(f"{op} of a pending operation")
        function = self.kernels[name]
        if op not in PAPER_OPERATORS and PRIMITIVES[op].kind != "elementwise":
            raise NotCounted(f"{op}, a registered primitive that is not element-wise")
        if len(args) == 1:
            (matrix,) = args
            kind = PRIMITIVES[op].kind
            if kind == "elementwise":
                if isinstance(matrix, Blockwise):
                    return Blockwise(matrix.statistic, tuple(function(v) for v in matrix.values),
                                     centred=matrix.centred and op in KEEP_CENTRED)
                return Tabled(matrix.statistic, function(matrix.values))
            if kind == "reduction":
                return _reduce(op, matrix)
            if kind == "matrixwise":
                return _matrixwise(op, matrix)
            raise NotCounted(f"{op} ({kind}) of a matrix")
        left, right = args
        if (isinstance(left, MATRICES) and isinstance(right, MATRICES) and left.statistic is right.statistic
                and op in LINEAR_UNDER_MEAN):
            if isinstance(left, Tabled) and isinstance(right, Tabled):
                return Tabled(left.statistic, function(left.values, right.values))
            pairs = zip(_blockwise(left).values, _blockwise(right).values)
            return Blockwise(left.statistic, tuple(function(a, b) for a, b in pairs))
        if op == "matrix_multiplication":
            raise NotCounted("a matrix product")
        return Pending(op, left, right)


#: Scores spread over less than this fraction of the blocks' values are near-constant: their order is
#: float32 rounding (summation order), so the exact path decides them (and whether they are all equal).
NEAR_CONSTANT = 1e-4


def counted_block_values(tree: gp.PrimitiveTree, counted: CountedBlocks,
                         terminals: Sequence[Mapping[str, float]] | None = None,
                         kernels: Mapping[str, Callable] | None = None) -> np.ndarray:
    """float64 [blocks]: the genome's value below its aggregation on every block of every
    architecture (in order), by counted evaluation; NotCounted when the genome (or a value it
    reaches) is not one this path evaluates, or a value is not finite.

    ``terminals``: per architecture its architecture-level terminal values (for genomes that
    use them); ``kernels``: node name -> function (:func:`~autoprox.genome.tree.kernel_map`).
    """
    if uses_scalar_terminals(tree) and terminals is None:
        raise NotCounted("architecture terminals without their values")
    obstacle = structural_obstacle(tree)
    if obstacle is not None:  # known from the tree alone: spare the walk what it would compute before it
        raise NotCounted(obstacle)
    walk = _Walk(tree, counted, terminals, kernels if kernels is not None else kernel_map())
    try:
        value, _ = walk.evaluate(1)
    except InvalidResult as exc:  # a registered primitive that raised or gave the wrong shape: the exact path's reason
        raise NotCounted(str(exc)) from None
    if not isinstance(value, torch.Tensor) or value.dim() != 1 or len(value) != counted.blocks:
        raise NotCounted("a block's value is not a scalar")
    values = value.to(torch.float32).numpy().astype(np.float64)
    if not np.isfinite(values).all():
        raise NotCounted("NaN or inf")
    return values


def counted_scores(tree: gp.PrimitiveTree, counted: CountedBlocks,
                   terminals: Sequence[Mapping[str, float]] | None = None,
                   kernels: Mapping[str, Callable] | None = None) -> np.ndarray:
    """float64 [architectures]: the genome's score of each architecture (its aggregation of
    :func:`counted_block_values`); NotCounted as there, and when the scores are near-constant
    (:data:`NEAR_CONSTANT`)."""
    values = counted_block_values(tree, counted, terminals, kernels)
    aggregation = op_name(tree[0].name)
    scores, start = [], 0
    for size in counted.sizes:
        scores.append(aggregate(aggregation, [float(v) for v in values[start:start + size]]))
        start += size
    scores = np.array(scores, dtype=np.float64)
    if not np.isfinite(scores).all():
        raise NotCounted("NaN or inf")
    magnitude = max(float(np.max(np.abs(values))) if values.size else 0.0, float(np.max(np.abs(scores))))
    if np.ptp(scores) <= NEAR_CONSTANT * magnitude:
        raise NotCounted("near-constant scores: float32 rounding orders them")
    return scores


# ------------------------------------------------------------ what the tree alone rules out

#: Operations whose mean can be taken of the operands first: a sum or difference (of two
#: matrices of one shape, or a matrix and a scalar), a product of a matrix and a scalar.
LINEAR_UNDER_MEAN = ("element_wise_sum", "element_wise_difference", "element_wise_product")
#: Element-wise operations after which a normalized matrix still has a mean of zero but for rounding.
KEEP_CENTRED = frozenset({"no_op", "element_wise_revert"})
#: Reductions that take a block's plain sum, which a normalized matrix's rounding decides.
SUM_REDUCTIONS = frozenset({"to_mean_scalar", "element_wise_normalized_sum", "to_std_scalar"})


@dataclass(frozen=True)
class _Kind:
    """A value's kind as the walk holds it: ``scalar``, ``matrix`` (of ``statistic``, ``centred`` straight
    from ``normalize``) or ``pending`` (binary ``op`` of two kinds)."""

    form: str
    statistic: str | None = None
    centred: bool = False
    op: str | None = None
    operands: tuple = ()


_SCALAR = _Kind("scalar")


class _Obstacle(Exception):
    """Raised inside :func:`structural_obstacle`'s walk with the reason the counted walk gives."""


def _pending_mean(pending: _Kind) -> _Kind:
    matrices = [k for k in pending.operands if k.form == "matrix"]
    if pending.op not in LINEAR_UNDER_MEAN:
        raise _Obstacle(f"the mean of {pending.op} is not its operands'")
    if pending.op == "element_wise_product" and len(matrices) == 2:
        raise _Obstacle("the mean of a Hadamard product is not the product of the means")
    if any(k.centred for k in matrices):
        raise _Obstacle("the mean of a normalized matrix is its rounding")
    return _SCALAR


def _unary(op: str, value: _Kind) -> _Kind:
    kind = PRIMITIVES[op].kind
    if kind == "elementwise":
        return _Kind("matrix", value.statistic, value.centred and op in KEEP_CENTRED)
    if kind == "reduction":
        if value.centred and op in SUM_REDUCTIONS:
            raise _Obstacle("the mean of a normalized matrix is its rounding")
        return _SCALAR
    if kind == "matrixwise" and op in ("normalize", "min_max_normalize"):
        return _Kind("matrix", value.statistic, op == "normalize")
    raise _Obstacle(f"{op} ({kind}) of a matrix")


def _apply(op: str, args: list[_Kind]) -> _Kind:
    if all(a.form == "scalar" for a in args):
        return _SCALAR
    if any(a.form == "pending" for a in args):
        if op == TEMPLATE_REDUCTION and len(args) == 1:
            return _pending_mean(args[0])
        raise _Obstacle(f"{op} of a pending operation")
    if op not in PAPER_OPERATORS and PRIMITIVES[op].kind != "elementwise":
        raise _Obstacle(f"{op}, a registered primitive that is not element-wise")
    if len(args) == 1:
        return _unary(op, args[0])
    left, right = args
    if (left.form == right.form == "matrix" and left.statistic == right.statistic
            and op in LINEAR_UNDER_MEAN):
        return _Kind("matrix", left.statistic)
    if op == "matrix_multiplication":
        raise _Obstacle("a matrix product")
    return _Kind("pending", op=op, operands=(left, right))


def _kind_of(tree: gp.PrimitiveTree, position: int) -> tuple[_Kind, int]:
    node = tree[position]
    if isinstance(node, gp.Terminal):
        return (_Kind("matrix", node.name) if node.name in statistic_terminals() else _SCALAR), position + 1
    args, end = [], position + 1
    for _ in range(node.arity):
        kind, end = _kind_of(tree, end)
        args.append(kind)
    return _apply(op_name(node.name), args), end


def structural_obstacle(tree: gp.PrimitiveTree) -> str | None:
    """Why counted evaluation cannot evaluate ``tree`` whatever the statistics' values (the reason its walk
    would give), or None where only evaluating it can tell. ``tree[0]`` is the aggregation over blocks."""
    try:
        _kind_of(tree, 1)
    except _Obstacle as obstacle:
        return str(obstacle)
    return None


__all__ = ["KEEP_CENTRED", "LINEAR_UNDER_MEAN", "NEAR_CONSTANT", "SUM_REDUCTIONS",
           "CountedBlocks", "NotCounted", "counted_block_values", "counted_scores", "is_counted_form",
           "structural_obstacle"]
