"""What counted evaluation covers, read from a genome's structure before anything is computed.

:mod:`autoprox.genome.counted` walks a genome over every block at once and gives up
(``NotCounted``) where it meets an operation it does not cover; the exact path then evaluates
the genome. Some of those operations are known from the tree alone: a row-wise operation or a
product of matrices, and a mean (or standard deviation) of a normalized matrix or of a Hadamard
product of two statistics. Met mid-walk, they cost what the walk computed first (on the default
search, a normalized matrix is 720 blocks' values computed and thrown away: 0.24 s each).
:func:`structural_obstacle` finds them first.

It follows the walk's own rules on the kinds of values alone (a scalar, a matrix of one statistic,
normalized or not, or a pending binary operation of a matrix), and only where the walk raises
whatever the values: it may miss an obstacle (the walk then finds it), but a genome it stops is
one the walk stops too (``tests/test_counted.py`` checks it on every genome of the corpus), so the
scores are the ones the exact path gives in either case.
"""

from __future__ import annotations

from dataclasses import dataclass

from deap import gp

from autoprox.genome.tree import TEMPLATE_REDUCTION, op_name, statistic_terminals
from autoprox.primitives import PAPER_OPERATORS, PRIMITIVES

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


__all__ = ["KEEP_CENTRED", "LINEAR_UNDER_MEAN", "SUM_REDUCTIONS", "structural_obstacle"]
