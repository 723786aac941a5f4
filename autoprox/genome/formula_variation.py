"""Random rank-formula trees and their variation: drawing a tree, and subtree crossover, subtree
mutation and point mutation of one (:mod:`autoprox.genome.rank_formula` trees).

Both searches over proxy columns draw their trees here: the rank-formula search over several spaces
(:mod:`autoprox.apps.rank_search`) and the terms of weighted formulas (:mod:`autoprox.genome.weighted`).
All randomness comes from the ``random.Random`` passed in.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Sequence

from autoprox.genome.rank_formula import OPERATORS, Node, parse_formula

__all__ = ["RankFormulaSpace", "get_subtree", "put_subtree", "random_tree", "subtree_paths", "vary_tree"]


def random_tree(rng: random.Random, terminals: Sequence[Node], depth: int, operators: Sequence[str] | None = None,
                leaf_probability: float = 0.4) -> Node:
    """A random tree at most ``depth`` operators deep: a terminal with ``leaf_probability`` (always at depth 0),
    else an operator of ``operators`` (default: every registered one) over random subtrees."""
    if depth <= 0 or rng.random() < leaf_probability:
        return rng.choice(list(terminals))
    names = list(OPERATORS.names()) if operators is None else list(operators)
    operator = OPERATORS[rng.choice(names)]
    return Node(operator.name, tuple(random_tree(rng, terminals, depth - 1, operators, leaf_probability)
                                     for _ in range(operator.arity)))


def subtree_paths(node: Node, prefix: tuple = ()) -> list[tuple]:
    """The path (child indices from the root) of every node of the tree, the root's ``()`` first."""
    found = [prefix]
    for index, child in enumerate(node.children):
        found.extend(subtree_paths(child, prefix + (index,)))
    return found


def get_subtree(node: Node, path: tuple) -> Node:
    """The subtree at ``path``."""
    for index in path:
        node = node.children[index]
    return node


def put_subtree(node: Node, path: tuple, replacement: Node) -> Node:
    """The tree with the subtree at ``path`` replaced by ``replacement``."""
    if not path:
        return replacement
    children = list(node.children)
    children[path[0]] = put_subtree(children[path[0]], path[1:], replacement)
    return replace(node, children=tuple(children))


def vary_tree(parent: Node, other: Node, rng: random.Random, terminals: Sequence[Node],
              operators: Sequence[str] | None = None) -> Node:
    """One child of ``parent``: subtree crossover with ``other`` (45 %), subtree mutation (35 %) or point
    mutation (20 %: a terminal redrawn, or an operator replaced by one of the same arity)."""
    roll = rng.random()
    path = rng.choice(subtree_paths(parent))
    if roll < 0.45:
        return put_subtree(parent, path, get_subtree(other, rng.choice(subtree_paths(other))))
    if roll < 0.8:
        return put_subtree(parent, path, random_tree(rng, terminals, 2, operators))
    target = get_subtree(parent, path)
    if target.column or target.op == "lrsum":
        return put_subtree(parent, path, rng.choice(list(terminals)))
    names = list(OPERATORS.names()) if operators is None else list(operators)
    same = [name for name in names if OPERATORS[name].arity == len(target.children)] or [target.op]
    return put_subtree(parent, path, Node(rng.choice(same), target.children))


@dataclass(frozen=True)
class RankFormulaSpace:
    """The rank formulas a search over several spaces draws (:mod:`autoprox.apps.rank_search`): trees over
    ``terminals`` of at most ``max_size`` nodes. It offers what the engine's evolution asks of a genome space
    (:class:`~autoprox.genome.space.SearchedSpace`): :meth:`random_genome`, :meth:`vary`, :meth:`parse`,
    :meth:`contains`."""

    terminals: tuple[Node, ...]
    max_size: int = 9
    depth: int = 3
    kind: str = "rank-formula"
    #: Crossover takes a subtree of a partner.
    uses_partners: ClassVar[bool] = True

    def bound(self, settings: Any) -> "RankFormulaSpace":
        """This space itself: its operators read no setting of the evolution."""
        return self

    def random_genome(self, rng: random.Random) -> Node:
        """A random tree (drawn again until it is within :attr:`max_size`; a terminal after 100 draws)."""
        for _ in range(100):
            tree = random_tree(rng, self.terminals, self.depth)
            if tree.size <= self.max_size:
                return tree
        return rng.choice(list(self.terminals))

    def vary(self, parent: Node, rng: random.Random, partners: Sequence[Node] = ()) -> Node:
        """One child of ``parent`` (:func:`vary_tree`, crossover with a partner when there is one), drawn again
        until it is within :attr:`max_size` (a random terminal after 100 draws)."""
        for _ in range(100):
            other = rng.choice(list(partners)) if partners else parent
            child = vary_tree(parent, other, rng, self.terminals)
            if child.size <= self.max_size:
                return child
        return rng.choice(list(self.terminals))

    def parse(self, text: str) -> Node:
        """The tree a formula's text stands for (:func:`~autoprox.genome.rank_formula.parse_formula`)."""
        return parse_formula(text).root

    def contains(self, tree: Node) -> bool:
        """Whether ``tree`` is within :attr:`max_size`."""
        return tree.size <= self.max_size
