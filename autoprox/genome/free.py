"""Free-form typed proxy trees (``--genome free``): generation, variation, limits.

Free trees use the primitives of :func:`autoprox.genome.tree.primitive_set` (the very
same ``gp.Primitive`` and ``gp.Terminal`` objects, so that ``genome_to_string`` and
``parse_genome`` round-trip every tree), restricted to a :class:`GenomeSpace`:

* the root is one of ``space.aggregations`` over a :class:`Scalar` subtree (each
  block is reduced to a scalar below the aggregation); no aggregation elsewhere;
* the terminals are those of ``space.terminals`` (:mod:`autoprox.genome.terminals`): the
  statistics ``F1 ... F4g`` (``stats``, the default); the spread statistics (``S1g``, ...)
  with ``spread``; the architecture-level terminals (``A_params``, ...) with ``arch``;
* matrix-only ops stay off scalars. :data:`EXCLUDED_FORMS` are never generated: the
  typed forms the primitive table marks as such (``Primitive.not_generated``, with the
  reason: ``normalize.s`` and ``min_max_normalize.s`` are always NaN on a single value;
  ``softmax.s``, ``logsoftmax.s``, ``to_std_scalar.s`` the constants 1, 0, 0;
  ``matrix_multiplication.s`` a duplicate of ``element_wise_product.s``;
  ``matrix_multiplication.ms`` and ``.sm`` always a ShapeMismatch).

  A parent that already holds one of them (a seeded template genome can) keeps it
  unless variation replaces it; variation never introduces one.

All randomness comes from the ``random.Random`` passed in. DEAP's generators and
operators (``gp.genFull``, ``gp.genGrow``, ``gp.mutUniform``, ...) draw from the
module-level ``random``; the few needed here are re-implemented with an explicit rng,
following DEAP's algorithms (cited in each docstring), type-aware (a type with no
terminal, such as :class:`Scalar` without architecture terminals, is closed by the
shallowest primitive that can close it), and never modifying their input.

Depth is DEAP's ``PrimitiveTree.height``: the root alone has depth 0, so the smallest
tree without architecture terminals, ``block_mean(to_mean_scalar(F1))``, has depth 2;
subtrees are found by DEAP's ``PrimitiveTree.searchSubtree``.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, ClassVar, Sequence

from deap import gp

from autoprox.core.errors import ConfigError
from autoprox.genome.tree import (Matrix, Scalar, Score, TreeGenomes, canonical_string, op_name, primitive_set,
                                  typed_name)
from autoprox.core.errors import GenomeError
from autoprox.genome.space import AGGREGATIONS, FREE, GENOME_KINDS, GenomeSpace
from autoprox.genome.terminals import terminal_kinds
from autoprox.primitives import PAPER_OPERATORS, PRIMITIVES

#: Typed forms of :func:`primitive_set` that free trees never generate (see above).
EXCLUDED_FORMS = frozenset(typed_name(p.name, form) for p in PRIMITIVES.values() for form in p.not_generated)


def excluded_forms() -> frozenset[str]:
    """:data:`EXCLUDED_FORMS` with those of the primitives registered since."""
    return EXCLUDED_FORMS | {typed_name(p.name, form) for p in PRIMITIVES.values() for form in p.not_generated}

#: Variation operators :func:`vary` chooses among (uniformly; crossover only with a partner).
OPERATORS = ("subtree", "node_replacement", "insert", "shrink", "crossover")


@dataclass(frozen=True)
class FreeTreeLimits:
    """Static limits against bloat and the generation settings.

    ``max_depth``/``max_size``: no produced tree is deeper (DEAP height) or has more
    nodes (checked as DEAP's ``gp.staticLimit`` does: an offspring over a limit is
    rejected). ``init_min_depth``..``init_max_depth``: the depth range of ramped
    half-and-half initialisation. ``subtree_min_depth``..``subtree_max_depth``: the
    depth range of the new subtree of subtree mutation (DEAP's usual
    ``genFull(min_=0, max_=2)``). ``max_tries``: attempts before :func:`vary` falls
    back to node replacement (and before :func:`random_tree` falls back to a tree of
    the smallest depth, which always fits).
    """

    max_depth: int = 8
    max_size: int = 25
    init_min_depth: int = 2
    init_max_depth: int = 5
    subtree_min_depth: int = 0
    subtree_max_depth: int = 2
    max_tries: int = 20

    def __post_init__(self) -> None:
        if not 0 <= self.init_min_depth <= self.init_max_depth <= self.max_depth:
            raise ConfigError("need 0 <= init_min_depth <= init_max_depth <= max_depth")
        if not 0 <= self.subtree_min_depth <= self.subtree_max_depth:
            raise ConfigError("need 0 <= subtree_min_depth <= subtree_max_depth")
        if self.max_size < 3 or self.max_tries < 1:
            raise ConfigError("max_size must be at least 3 and max_tries at least 1")


DEFAULT_LIMITS = FreeTreeLimits()


# ------------------------------------------------------------------ the free-tree set


@dataclass(frozen=True)
class FreeSet:
    """The primitives and terminals free trees of one space may use, by return type."""

    primitives: dict          # type -> tuple[gp.Primitive, ...] (roots under Score)
    terminals: dict           # type -> tuple[gp.Terminal, ...]
    min_height: dict          # type -> depth of the shallowest subtree of that type
    terminal_ratio: float     # DEAP's pset.terminalRatio, for genGrow
    names: frozenset          # every node name allowed

    def closes_within(self, prim: gp.Primitive, budget: int) -> bool:
        """Whether a subtree rooted at ``prim`` fits in ``budget`` more levels."""
        return 1 + max(self.min_height[a] for a in prim.args) <= budget


@lru_cache(maxsize=None)
def _free_set(aggregations: tuple[str, ...], inputs: tuple[str, ...],
              operators: tuple[str, ...] = PAPER_OPERATORS, registered: tuple[str, ...] = ()) -> FreeSet:
    pset = primitive_set()
    allowed_ops = set(operators)
    primitives: dict = defaultdict(list)
    for ret, prims in pset.primitives.items():
        for prim in prims:
            if prim.name in excluded_forms() or (ret is not Score and op_name(prim.name) not in allowed_ops):
                continue
            if ret is Score and prim.name not in aggregations:
                continue
            primitives[ret].append(prim)
    terminals: dict = defaultdict(list)
    for name in inputs:
        term = pset.mapping[name]
        terminals[term.ret].append(term)
    # Fixed point: the shallowest subtree of each type (0 for types with a terminal).
    types = (Matrix, Scalar, Score)
    inf = float("inf")
    height = {t: (0 if terminals[t] else inf) for t in types}
    changed = True
    while changed:
        changed = False
        for t in types:
            for prim in primitives[t]:
                h = 1 + max(height[a] for a in prim.args)
                if h < height[t]:
                    height[t], changed = h, True
    if height[Score] == inf:  # pragma: no cover - the primitive table always closes
        raise GenomeError("no finite free tree in this space")
    n_terms = sum(len(v) for v in terminals.values())
    n_prims = sum(len(v) for v in primitives.values())
    names = {p.name for v in primitives.values() for p in v} | {t.name for v in terminals.values() for t in v}
    return FreeSet(
        primitives={t: tuple(primitives[t]) for t in types},
        terminals={t: tuple(terminals[t]) for t in types},
        min_height={t: int(height[t]) for t in types},
        terminal_ratio=n_terms / (n_terms + n_prims),
        names=frozenset(names),
    )


def free_set(space: GenomeSpace) -> FreeSet:
    """The free-tree primitives and terminals of ``space``."""
    operators = space.unary_operators + space.binary_operators
    # Keyed on every registered primitive and terminal: the primitive set is rebuilt when one is added.
    return _free_set(tuple(space.aggregations), space.inputs, operators, (*PRIMITIVES, *terminal_kinds()))


# ------------------------------------------------------------------------ validation


def _as_tree(nodes: Sequence) -> gp.PrimitiveTree:
    return nodes if isinstance(nodes, gp.PrimitiveTree) else gp.PrimitiveTree(nodes)


def within_limits(tree: Sequence, limits: FreeTreeLimits = DEFAULT_LIMITS) -> bool:
    return len(tree) <= limits.max_size and _as_tree(tree).height <= limits.max_depth


def check_tree(tree: Sequence, space: GenomeSpace, limits: FreeTreeLimits | None = None,
               allow_excluded: bool = False) -> None:
    """Raise GenomeError unless ``tree`` is a well-typed free tree of ``space``.

    Checks: every node is the primitive-set node of its name; the root is an
    aggregation of ``space`` and no other node is one; terminals are allowed by
    ``space``; each primitive's argument types equal its children's return types; the
    prefix sequence forms exactly one tree; no :data:`EXCLUDED_FORMS` (unless
    ``allow_excluded``); with ``limits``, the depth and size limits.
    """
    pset = primitive_set()
    if len(tree) == 0:
        raise GenomeError("empty tree")
    allowed = free_set(space).names
    # Expected return type of each pending argument slot, in prefix order.
    pending: list[type] = [Score]
    for position, node in enumerate(tree):
        known = pset.mapping.get(node.name)
        if known is None or known.ret is not node.ret or (
            getattr(known, "args", None) != getattr(node, "args", None)
        ):
            raise GenomeError(f"node {position} ({node.name}) is not in the primitive set")
        if node.name not in allowed and not (allow_excluded and node.name in excluded_forms()):
            raise GenomeError(f"node {position} ({node.name}) is not allowed in this space")
        if (node.name in AGGREGATIONS) != (position == 0):
            raise GenomeError(f"node {position} ({node.name}): an aggregation must be the root, and only it")
        if not pending:
            raise GenomeError(f"node {position} ({node.name}) is past the end of the tree")
        expected = pending.pop()
        if node.ret is not expected:
            raise GenomeError(f"node {position} ({node.name}) returns {node.ret.__name__}, "
                              f"its parent takes {expected.__name__}")
        if isinstance(node, gp.Primitive):
            pending.extend(reversed(node.args))
    if pending:
        raise GenomeError(f"tree ends with {len(pending)} argument(s) missing")
    if limits is not None and not within_limits(tree, limits):
        raise GenomeError(f"tree of {len(tree)} nodes and depth {_as_tree(tree).height} is over the limits "
                          f"({limits.max_size} nodes, depth {limits.max_depth})")


# ------------------------------------------------------------------------ generation


def _generate(rng: random.Random, fset: FreeSet, type_: type, min_depth: int, max_depth: int,
              grow: bool) -> list:
    """A random typed subtree of ``type_``: DEAP's ``gp.generate`` with ``genFull``'s or
    ``genGrow``'s condition, made type-aware.

    As in DEAP, the height is drawn uniformly in [min_depth, max_depth] (raised to the
    type's smallest possible height); a node becomes a terminal at that height, or
    (grow) at depth >= min_depth with probability ``terminal_ratio``. Unlike DEAP's,
    a primitive is only chosen where its arguments can still be closed within the
    height, and a type with no terminal always takes a primitive, so generation never
    fails for lack of a terminal.
    """
    height = max(rng.randint(min_depth, max_depth), fset.min_height[type_])
    nodes: list = []
    stack = [(0, type_)]
    while stack:
        depth, t = stack.pop()
        terminals = fset.terminals[t]
        at_bottom = depth >= height
        stop_early = grow and depth >= min_depth and rng.random() < fset.terminal_ratio
        if terminals and (at_bottom or stop_early):
            nodes.append(rng.choice(terminals))
            continue
        choices = [p for p in fset.primitives[t] if fset.closes_within(p, height - depth)]
        if not choices:  # nothing closes in time (cannot happen with this table): stop here
            nodes.append(rng.choice(terminals))
            continue
        prim = rng.choice(choices)
        nodes.append(prim)
        for arg in reversed(prim.args):
            stack.append((depth + 1, arg))
    return nodes


def random_subtree(rng: random.Random, space: GenomeSpace, type_: type, min_depth: int,
                   max_depth: int) -> list:
    """A random subtree of ``type_`` by half-and-half (full or grow, even odds)."""
    return _generate(rng, free_set(space), type_, min_depth, max_depth, grow=rng.random() < 0.5)


def random_tree(rng: random.Random, space: GenomeSpace,
                limits: FreeTreeLimits = DEFAULT_LIMITS) -> gp.PrimitiveTree:
    """A random free tree of ``space`` by ramped half-and-half (DEAP's ``genHalfAndHalf``:
    ``genFull`` or ``genGrow`` with even odds, the depth drawn in
    ``limits.init_min_depth..init_max_depth``), rooted at one of ``space.aggregations``.

    A tree over the size limit is drawn again (up to ``limits.max_tries`` times), then
    one of the smallest depth is drawn (it always fits).
    """
    for _ in range(limits.max_tries):
        nodes = random_subtree(rng, space, Score, limits.init_min_depth, limits.init_max_depth)
        if within_limits(nodes, limits):
            return gp.PrimitiveTree(nodes)
    fset = free_set(space)
    low = fset.min_height[Score]
    return gp.PrimitiveTree(_generate(rng, fset, Score, low, low, grow=True))


# ------------------------------------------------------------------------- variation
# Each operator returns a new tree (its input is never modified), or None where it
# does not apply. None of them checks the limits: vary does.


def _splice(tree: Sequence, where: slice, nodes: Sequence) -> gp.PrimitiveTree:
    return gp.PrimitiveTree(list(tree[: where.start]) + list(nodes) + list(tree[where.stop:]))


def mut_subtree(tree: Sequence, rng: random.Random, space: GenomeSpace,
                limits: FreeTreeLimits = DEFAULT_LIMITS) -> gp.PrimitiveTree | None:
    """Subtree mutation (DEAP's ``gp.mutUniform``): a random node below the root and its
    subtree are replaced by a new random subtree of the same type (half-and-half, depth
    in ``limits.subtree_min_depth..subtree_max_depth``). The root is never chosen: a
    new whole tree is a restart, not a mutation (the aggregation changes by node
    replacement)."""
    if len(tree) < 2:
        return None
    index = rng.randrange(1, len(tree))
    new = random_subtree(rng, space, tree[index].ret, limits.subtree_min_depth, limits.subtree_max_depth)
    return _splice(tree, _as_tree(tree).searchSubtree(index), new)


def _alternatives(fset: FreeSet, node) -> list:
    if isinstance(node, gp.Primitive):
        return [p for p in fset.primitives[node.ret] if p.args == node.args and p.name != node.name]
    return [t for t in fset.terminals[node.ret] if t.name != node.name]


def mut_node_replacement(tree: Sequence, rng: random.Random, space: GenomeSpace) -> gp.PrimitiveTree | None:
    """Point mutation (DEAP's ``gp.mutNodeReplacement``): one node is replaced by another
    of the same signature (a primitive by one with the same argument and return types,
    a terminal by one of the same type); the shape and the types stay. Unlike DEAP's,
    the root may be chosen (another aggregation of ``space``), and only nodes with a
    different alternative are, and the replacement differs from the node, so the child
    always differs from the parent."""
    fset = free_set(space)
    candidates = [i for i, node in enumerate(tree) if _alternatives(fset, node)]
    if not candidates:
        return None
    index = rng.choice(candidates)
    nodes = list(tree)
    nodes[index] = rng.choice(_alternatives(fset, tree[index]))
    return gp.PrimitiveTree(nodes)


def _filler(rng: random.Random, fset: FreeSet, type_: type) -> list:
    """The smallest random subtree of ``type_``: a terminal where the type has one."""
    low = fset.min_height[type_]
    return _generate(rng, fset, type_, low, low, grow=False)


def mut_insert(tree: Sequence, rng: random.Random, space: GenomeSpace) -> gp.PrimitiveTree | None:
    """Insert mutation (DEAP's ``gp.mutInsert``): a new primitive is inserted above a
    random node below the root, which becomes one of its arguments (one of the type it
    returns); the other arguments are random terminals, or the smallest random subtree
    where the type has no terminal. The tree grows by at least one node."""
    if len(tree) < 2:
        return None
    fset = free_set(space)
    index = rng.randrange(1, len(tree))
    node = tree[index]
    choices = [p for p in fset.primitives[node.ret] if node.ret in p.args]
    if not choices:
        return None
    new_node = rng.choice(choices)
    position = rng.choice([i for i, a in enumerate(new_node.args) if a is node.ret])
    where = _as_tree(tree).searchSubtree(index)
    new = [new_node]
    for i, arg in enumerate(new_node.args):
        new += list(tree[where]) if i == position else _filler(rng, fset, arg)
    return _splice(tree, where, new)


def mut_shrink(tree: Sequence, rng: random.Random) -> gp.PrimitiveTree | None:
    """Shrink mutation (DEAP's ``gp.mutShrink``): a random primitive below the root that
    takes an argument of its own return type is replaced by one such argument's subtree.
    The tree loses at least one node; None where no primitive qualifies."""
    tree = _as_tree(tree)
    candidates = [i for i, node in enumerate(tree)
                  if i > 0 and isinstance(node, gp.Primitive) and node.ret in node.args]
    if not candidates:
        return None
    index = rng.choice(candidates)
    prim = tree[index]
    arg_index = rng.choice([i for i, a in enumerate(prim.args) if a is prim.ret])
    start = index + 1
    for _ in range(arg_index):
        start = tree.searchSubtree(start).stop
    kept = tree[tree.searchSubtree(start)]
    return _splice(tree, tree.searchSubtree(index), kept)


def cx_one_point(tree: Sequence, partner: Sequence, rng: random.Random) -> gp.PrimitiveTree | None:
    """One-point crossover (DEAP's ``gp.cxOnePoint``, strongly typed): a return type
    common to nodes below both roots is drawn, then a node of that type in each tree;
    the child is ``tree`` with its subtree replaced by the partner's. DEAP returns both
    offspring; this returns the first. Types are drawn in name order (DEAP draws from a
    set of classes, whose order changes between processes)."""
    types1, types2 = defaultdict(list), defaultdict(list)
    for i in range(1, len(tree)):
        types1[tree[i].ret].append(i)
    for i in range(1, len(partner)):
        types2[partner[i].ret].append(i)
    common = sorted(set(types1) & set(types2), key=lambda t: t.__name__)
    if not common:
        return None
    type_ = rng.choice(common)
    index1, index2 = rng.choice(types1[type_]), rng.choice(types2[type_])
    return _splice(tree, _as_tree(tree).searchSubtree(index1), partner[_as_tree(partner).searchSubtree(index2)])


def _apply(name: str, parent: Sequence, rng: random.Random, space: GenomeSpace,
           limits: FreeTreeLimits, partners: Sequence) -> gp.PrimitiveTree | None:
    if name == "subtree":
        return mut_subtree(parent, rng, space, limits)
    if name == "node_replacement":
        return mut_node_replacement(parent, rng, space)
    if name == "insert":
        return mut_insert(parent, rng, space)
    if name == "shrink":
        return mut_shrink(parent, rng)
    if name == "crossover":
        return cx_one_point(parent, rng.choice(partners), rng)
    raise ValueError(f"unknown operator {name!r}")


def vary(parent: gp.PrimitiveTree, rng: random.Random, space: GenomeSpace,
         partners: Sequence[gp.PrimitiveTree] = (),
         limits: FreeTreeLimits = DEFAULT_LIMITS) -> gp.PrimitiveTree:
    """One child of ``parent`` by an operator drawn uniformly from :data:`OPERATORS`
    (crossover only when some partner has a node below its root and uses no
    architecture or spread terminal unless ``space`` allows them; the partner's aggregation does
    not matter, the child keeps the parent's).

    A child that is over ``limits``, that the operator could not make, or that has
    the parent's canonical form is drawn again, with a fresh operator, up to
    ``limits.max_tries`` times (DEAP's ``staticLimit`` keeps the parent instead; here
    the search needs a new child). Then node replacement, which keeps the shape and so
    cannot grow the tree, makes the child (so a parent already over the limits, which
    only a seed can be, gives a child over them too). ``parent`` and ``partners`` are
    never modified.
    """
    usable = [p for p in partners
              if len(p) > 1 and space.reads_only_inputs(p)]
    operators = [op for op in OPERATORS if op != "crossover" or usable]
    before = canonical_string(parent)
    for _ in range(limits.max_tries):
        child = _apply(rng.choice(operators), parent, rng, space, limits, usable)
        if child is not None and within_limits(child, limits) and canonical_string(child) != before:
            return child
    child = mut_node_replacement(parent, rng, space)
    return child if child is not None else gp.PrimitiveTree(list(parent))


@dataclass(frozen=True)
class FreeSpace(TreeGenomes):
    """A free-form :class:`~autoprox.genome.space.GenomeSpace` as the evolution searches it: trees drawn by
    :func:`random_tree` and varied by :func:`vary` (crossover with the population's partners among its
    operators), within ``limits``. A :class:`~autoprox.genome.space.SearchedSpace` (parsing and containing
    trees as :class:`~autoprox.genome.tree.TreeGenomes` does); no setting of the evolution binds it."""

    space: GenomeSpace
    limits: FreeTreeLimits = DEFAULT_LIMITS
    uses_partners: ClassVar[bool] = True

    @classmethod
    def of(cls, space: GenomeSpace, settings: Any = None) -> "FreeSpace":
        """``space`` searched within the default limits (``settings`` bind nothing here)."""
        return cls(space)

    def bound(self, settings: Any) -> "FreeSpace":
        """This space itself: its operators read no setting of the evolution."""
        return self

    def random_genome(self, rng: random.Random) -> gp.PrimitiveTree:
        """A random free tree (:func:`random_tree`)."""
        return random_tree(rng, self.space, self.limits)

    def vary(self, parent: gp.PrimitiveTree, rng: random.Random,
             partners: Sequence[gp.PrimitiveTree] = ()) -> gp.PrimitiveTree:
        """One child of ``parent`` (:func:`vary`)."""
        return vary(parent, rng, self.space, partners=partners, limits=self.limits)

    @staticmethod
    def check_seed(tree: gp.PrimitiveTree) -> None:
        """Nothing: any tree may start a search of free trees (variation changes whole subtrees)."""


GENOME_KINDS.add(FREE, FreeSpace)

__all__ = [
    "DEFAULT_LIMITS",
    "EXCLUDED_FORMS",
    "OPERATORS",
    "FreeSet",
    "FreeSpace",
    "FreeTreeLimits",
    "check_tree",
    "cx_one_point",
    "free_set",
    "mut_insert",
    "mut_node_replacement",
    "mut_shrink",
    "mut_subtree",
    "random_subtree",
    "random_tree",
    "vary",
    "within_limits",
]
