"""Values shared between genomes during a search: each architecture's scalar subtrees (exact).

A :class:`SubtreeMemo` is handed to :func:`autoprox.genome.tree.score_architecture`; the
evaluator asks it (by duck typing) for a slot at each position of the tree it binds.
"""

from __future__ import annotations

from functools import lru_cache

from deap import gp

from autoprox.genome.tree import (
    Scalar,
    format_subtree,
    genome_to_string,
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
            found.append((position, format_subtree(tree, position, canonical=True)[0],
                          tree.searchSubtree(position).stop))
    return tuple(found)


class SubtreeMemo:
    """Per-block values of scalar subtrees of one architecture, shared between genomes.

    A subtree whose value is a block scalar (a branch ending in a reduction) is keyed by
    its canonical string; its float32 value is kept as a Python float (exact) and given
    back as the same 0-d float32 tensor, so a genome evaluated with the memo gives the
    very numbers it gives without. Only values are kept, never failures. ``limit`` bounds
    the number of kept subtrees (the memo is emptied when it is reached).
    """

    def __init__(self, blocks: int, limit: int = 4096) -> None:
        self.blocks, self.limit = blocks, limit
        self.table: dict[str, list] = {}
        self._positions: dict[int, tuple[str, int]] = {}

    def bind(self, tree: gp.PrimitiveTree) -> None:
        """Prepare for evaluating ``tree``."""
        genome = genome_to_string(tree)
        self._positions = {p: (key, end) for p, key, end in _scalar_subtrees(genome)}
        if len(self.table) + len(self._positions) > self.limit:
            self.table.clear()

    def slot(self, position: int, index: int) -> _Slot | None:
        found = self._positions.get(position)
        if found is None:
            return None
        key, end = found
        values = self.table.get(key)
        if values is None:
            values = self.table[key] = [None] * self.blocks
        return _Slot(values, index, end)


__all__ = ["SubtreeMemo"]
