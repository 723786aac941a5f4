"""Values shared between genomes during a search: each architecture's scalar subtrees
(exact) and, optionally, the summaries of matrix branches that early reduction reads.

A :class:`SubtreeMemo` is handed to :func:`autoprox.genome.tree.score_architecture`; the
evaluator asks it (by duck typing) for a slot at each position of the tree it binds.
"""

from __future__ import annotations

from functools import lru_cache

from deap import gp

from autoprox.genome.early import LINEAR_UNDER_MEAN, BranchTable
from autoprox.genome.tree import (
    TEMPLATE_REDUCTION,
    Matrix,
    Scalar,
    _format,
    genome_to_string,
    op_name,
    parse_genome,
)


class _Slot:
    """One memoised subtree of one block: its kept value, or where to keep it."""

    __slots__ = ("values", "index", "end")

    def __init__(self, values: list, index: int, end: int) -> None:
        self.values, self.index, self.end = values, index, end

    def hit(self) -> bool:
        return self.values[self.index] is not None

    def value(self):
        import torch

        return torch.tensor(self.values[self.index], dtype=torch.float32)

    def keep(self, value) -> None:
        import torch

        if isinstance(value, torch.Tensor) and value.dim() == 0 and value.dtype == torch.float32:
            self.values[self.index] = float(value)


@lru_cache(maxsize=8192)
def _scalar_subtrees(genome: str) -> tuple[tuple[int, str, int], ...]:
    """(position, canonical string, end) of each subtree below the aggregation that reduces
    a block to a scalar (keyed by ``genome``'s text, which fixes the tree)."""
    tree = parse_genome(genome)
    found = []
    for position in range(1, len(tree)):
        node = tree[position]
        if isinstance(node, gp.Primitive) and node.ret is Scalar:
            found.append((position, _format(tree, position, canonical=True)[0],
                          tree.searchSubtree(position).stop))
    return tuple(found)


@lru_cache(maxsize=8192)
def _early_reductions(genome: str) -> tuple[tuple[int, str, tuple[tuple[int, str, bool], ...]], ...]:
    """(position, operation, operands) of each ``to_mean_scalar`` of a matrix-valued operation of
    :data:`LINEAR_UNDER_MEAN`; an operand is (position, canonical key, whether a matrix)."""
    tree = parse_genome(genome)
    found = []
    for position in range(1, len(tree) - 1):
        child = tree[position + 1]
        if (tree[position].name != TEMPLATE_REDUCTION or not isinstance(child, gp.Primitive)
                or op_name(child.name) not in LINEAR_UNDER_MEAN or child.ret is not Matrix):
            continue
        operands, start = [], position + 2
        for arg_type in child.args:
            operands.append((start, _format(tree, start, canonical=True)[0], arg_type is Matrix))
            start = tree.searchSubtree(start).stop
        found.append((position, op_name(child.name), tuple(operands)))
    return tuple(found)


class SubtreeMemo:
    """Per-block values of scalar subtrees of one architecture, shared between genomes.

    A subtree whose value is a block scalar (a branch ending in a reduction) is keyed by
    its canonical string; its float32 value is kept as a Python float (exact) and given
    back as the same 0-d float32 tensor, so a genome evaluated with the memo gives the
    very numbers it gives without. Only values are kept, never failures. ``limit`` bounds
    the number of kept subtrees (the memo is emptied when it is reached).

    ``reduce_early`` (not exact; off by default): means of sums, differences and scaled
    matrices are taken from the operands' means (:mod:`autoprox.genome.early`), each matrix
    branch kept per block; scores then differ by float32 rounding only (``tests/test_speed.py``).
    """

    def __init__(self, blocks: int, limit: int = 4096, reduce_early: bool = False) -> None:
        self.blocks, self.limit, self.reduce_early = blocks, limit, reduce_early
        self.table: dict[str, list] = {}
        #: Early reduction: each matrix branch's per-block summaries.
        self.branches = BranchTable(blocks)
        self._positions: dict[int, tuple[str, int]] = {}
        self._early: dict[int, tuple] = {}

    def bind(self, tree: gp.PrimitiveTree) -> None:
        """Prepare for evaluating ``tree``."""
        genome = genome_to_string(tree)
        self._positions = {p: (key, end) for p, key, end in _scalar_subtrees(genome)}
        self._early = {p: (op, operands) for p, op, operands in _early_reductions(genome)} if self.reduce_early else {}
        if len(self.table) + len(self.branches) + len(self._positions) + 2 * len(self._early) > self.limit:
            self.table.clear()
            self.branches.clear()

    def slot(self, position: int, index: int) -> _Slot | None:
        found = self._positions.get(position)
        if found is None:
            return None
        key, end = found
        values = self.table.get(key)
        if values is None:
            values = self.table[key] = [None] * self.blocks
        return _Slot(values, index, end)

    def early_at(self, position: int) -> tuple | None:
        """(operation, operands) of an early reduction at ``position`` (:func:`_early_reductions`), or None."""
        return self._early.get(position)


__all__ = ["SubtreeMemo"]
