"""Proxy genomes: typed expression trees on DEAP's ``gp`` module.

A genome is a :class:`deap.gp.PrimitiveTree` over a strongly typed primitive set:

* terminals: the registered terminal sets (:mod:`autoprox.genome.terminals`): the eight
  statistics ``F1 ... F4g`` of one transformer block (type :class:`Matrix`), and in spaces
  that choose them the spread statistics ``S1g ... S4g`` (:data:`SPREAD_NAMES`, extra cache
  entries), architecture-level scalars (type :class:`Scalar`) and any set registered since;
* the 24 unary and 4 binary operations of the ``primitives`` package, each in its
  matrix form and its scalar form (binary element-wise ops also broadcast a scalar
  over a matrix);
* at the root, an aggregation over blocks (``block_mean``, the paper's; the registry is
  :mod:`autoprox.genome.aggregations`) turning the per-block :class:`Scalar` into the
  architecture's :class:`Score`.

The typed forms of each operation are the primitive table's (``Primitive.forms``); a
form's node name is the operation's name with :data:`FORM_SUFFIXES`' suffix.

The paper's template (Appendix C) is one shape of tree (free-form trees use the same set)::

    block_mean(to_mean_scalar(BOP(U2(U1(Fa)), U4(U3(Fb)))))

Persistence is a plain token string such as
``block_mean(to_mean_scalar(element_wise_sum(frobenius_norm(min_max_normalize(F2)),
element_wise_sqrt(sigmoid(F4g)))))``, parsed against the primitive table (no
``eval``): each token must be a known operation, statistic or aggregation, and the
typed form of each operation is inferred from its arguments (an explicit typed name
such as ``sigmoid.s`` is accepted only where it is the form its arguments imply).
"""

from __future__ import annotations

import re
from collections import ChainMap
from functools import lru_cache
from types import MappingProxyType
from typing import Callable, Mapping, Sequence

from deap import gp

from autoprox.core.errors import ConfigError, GenomeError
from autoprox.data.extras import extras_for
from autoprox.genome.aggregations import get_aggregation
from autoprox.genome.space import (
    AGGREGATIONS,
    DEFAULT_AGGREGATION,
)
from autoprox.genome.terminals import MATRIX, SCALAR, TERMINAL_SETS, computed_sets, terminal_kinds
from autoprox.networks.names import SPREAD_NAMES
from autoprox.spaces.descriptors import TERMINAL_PREFIX
from autoprox.primitives import BINARY, KERNEL_SETS, PRIMITIVES, UNARY

#: Architecture-level scalar terminals (``A_params``, ``A_log_depth``, ...): the ``arch`` terminal set.
ARCH_TERMINALS = TERMINAL_SETS["arch"].names

TEMPLATE_REDUCTION = "to_mean_scalar"
COMMUTATIVE = frozenset({"element_wise_sum", "element_wise_product"})
#: The node-name suffix of each typed form of an operation (``sigmoid.s``, ``element_wise_sum.ms``).
FORM_SUFFIXES = {"matrix": "", "scalar": ".s", "matrix_scalar": ".ms", "scalar_matrix": ".sm"}
_FORM_OF_SUFFIX = {suffix: form for form, suffix in FORM_SUFFIXES.items()}


class Matrix:
    """Type tag: a 2-D statistic or intermediate value."""


class Scalar:
    """Type tag: a 0-d intermediate value."""


class Score:
    """Type tag: an architecture's score (after aggregation over blocks)."""


#: The type tag of each value kind of the primitive table (and of each terminal kind).
_KIND_TYPES = {MATRIX: Matrix, SCALAR: Scalar}


def statistic_terminals() -> frozenset[str]:
    """The terminals that are per-block statistics (read from a network pass), as opposed to
    architecture-level terminals: those of every registered matrix set."""
    return frozenset(name for name, kind in terminal_kinds().items() if kind == MATRIX)


def _identity(x):
    return x


def _unbound(*_args):
    """What the primitive set's context holds for a primitive: its function is :func:`kernel_map`'s."""
    raise RuntimeError("a primitive is evaluated through kernel_map(), not the primitive set's context")


def primitive_set() -> gp.PrimitiveSetTyped:
    """The typed primitive set of every registered primitive, terminal and aggregation, built once
    per set of them, never mutated: the genomes' grammar (parsing, drawing, checking). Its context holds
    no primitive's function (:func:`kernel_map` gives them), so that reading a genome does not import torch."""
    return _primitive_set(PRIMITIVES.version, tuple(terminal_kinds().items()), tuple(AGGREGATIONS))


@lru_cache(maxsize=8)
def _primitive_set(version: int, terminals: tuple[tuple[str, str], ...],
                   aggregations: tuple[str, ...]) -> gp.PrimitiveSetTyped:
    """``version``: the primitives registry's (:attr:`~autoprox.core.registry.Registry.version`), so that a name
    unregistered and registered anew with another definition gets its new function, not the one cached."""
    pset = gp.PrimitiveSetTyped("proxy", [], Score)
    for name, kind in terminals:
        pset.addTerminal(name, _KIND_TYPES[kind], name=name)
    for prim in (*UNARY.values(), *BINARY.values()):
        for form in prim.forms:
            args, result = prim.signature(form)
            pset.addPrimitive(_unbound, [_KIND_TYPES[a] for a in args], _KIND_TYPES[result],
                              name=typed_name(prim.name, form))
    for name in aggregations:
        pset.addPrimitive(_identity, [Scalar], Score, name=name)
    return pset


#: The default kernel set (:data:`autoprox.primitives.KERNEL_SETS`): torch's, bitwise what every committed run computed.
DEFAULT_KERNELS = "torch"


def kernel_map(kernels: str = DEFAULT_KERNELS) -> Mapping[str, Callable]:
    """Node name -> the function that evaluates it, in the kernel set ``kernels`` (:data:`autoprox.primitives.KERNEL_SETS`).

    ``torch``: every typed form is its primitive's torch function; ``numpy`` replaces the typed forms of the
    ops that have a fast form (:mod:`autoprox.primitives.fast`). Terminals and aggregations are the primitive
    set's context. ConfigError naming the known sets otherwise.
    """
    if kernels not in KERNEL_SETS:
        raise ConfigError(f"unknown kernel set {kernels!r}; use {' or '.join(KERNEL_SETS)}")
    return _kernel_map(kernels, PRIMITIVES.version, tuple(AGGREGATIONS))


@lru_cache(maxsize=64)
def _kernel_map(kernels: str, version: int, aggregations: tuple[str, ...]) -> Mapping[str, Callable]:
    chosen = dict(primitive_set().context)
    for prim in (*UNARY.values(), *BINARY.values()):
        for form in prim.forms:
            chosen[typed_name(prim.name, form)] = prim.kernel(kernels)
    return MappingProxyType(chosen)


def op_name(node_name: str) -> str:
    """The operation a typed primitive's name stands for (``sigmoid.s`` -> ``sigmoid``)."""
    return node_name.split(".", 1)[0]


def typed_name(op: str, form: str) -> str:
    """The node name of ``op``'s typed ``form`` (``typed_name("sigmoid", "scalar")`` -> ``sigmoid.s``)."""
    return op + FORM_SUFFIXES[form]


def form_name(node_name: str) -> str:
    """The typed form a node name stands for (``sigmoid.s`` -> ``scalar``; ``F1`` -> ``matrix``)."""
    return _FORM_OF_SUFFIX[node_name[len(op_name(node_name)):]]


def typed_form(op: str, arg_types: Sequence[type]) -> gp.Primitive:
    """The primitive of ``op`` that takes ``arg_types``; GenomeError if it has none."""
    pset = primitive_set()
    if op in AGGREGATIONS:
        candidates = [op]
    elif op in UNARY or op in BINARY:
        candidates = [typed_name(op, form) for form in (UNARY.get(op) or BINARY[op]).forms]
    else:
        raise GenomeError(f"unknown operation {op!r}")
    for name in candidates:
        prim = pset.mapping.get(name)
        if isinstance(prim, gp.Primitive) and tuple(prim.args) == tuple(arg_types):
            return prim
    shown = ", ".join(t.__name__ for t in arg_types)
    raise GenomeError(f"{op} cannot take ({shown})")


# --------------------------------------------------------------------------- text form

_TOKEN = re.compile(r"\s*(?:([A-Za-z_][A-Za-z0-9_.]*)|(\()|(\))|(,))")


def _tokenize(text: str) -> list[str]:
    tokens, position = [], 0
    text = text.strip()
    while position < len(text):
        match = _TOKEN.match(text, position)
        if not match or match.end() == position:
            raise GenomeError(f"unexpected character {text[position]!r} at position {position} of genome")
        tokens.append(next(g for g in match.groups() if g is not None))
        position = match.end()
        while position < len(text) and text[position].isspace():
            position += 1
    return tokens


#: Deepest nesting a genome string may have (far beyond any real genome; it keeps a
#: hostile or corrupt string from exhausting Python's recursion limit).
MAX_DEPTH = 100


def _parse_expr(tokens: list[str], position: int, depth: int = 0) -> tuple[list, type, int]:
    """Parse one expression; return (prefix nodes, its type, next position)."""
    if depth > MAX_DEPTH:
        raise GenomeError(f"genome nested deeper than {MAX_DEPTH} levels")
    if position >= len(tokens):
        raise GenomeError("genome ends too early")
    token = tokens[position]
    if token in "(),":
        raise GenomeError(f"unexpected {token!r} in genome")
    pset = primitive_set()
    kinds = terminal_kinds()
    if token in kinds:
        return [pset.mapping[token]], _KIND_TYPES[kinds[token]], position + 1
    op = op_name(token)
    typed_token = token != op
    if (op not in UNARY and op not in BINARY and op not in AGGREGATIONS) or (
        typed_token and not isinstance(pset.mapping.get(token), gp.Primitive)
    ):
        known = ", ".join([*kinds, *AGGREGATIONS, *UNARY, *BINARY])
        raise GenomeError(f"unknown token {token!r} in genome (a primitive of your own must be registered with "
                          f"autoprox.primitives.register_primitive first); known tokens: {known}"[:1200])
    if position + 1 >= len(tokens) or tokens[position + 1] != "(":
        raise GenomeError(f"operation {op} needs its arguments in parentheses")
    position += 2
    children, types = [], []
    while True:
        nodes, node_type, position = _parse_expr(tokens, position, depth + 1)
        children.append(nodes)
        types.append(node_type)
        if position >= len(tokens):
            raise GenomeError(f"missing ')' after the arguments of {op}")
        if tokens[position] == ")":
            position += 1
            break
        if tokens[position] != ",":
            raise GenomeError(f"expected ',' or ')' after an argument of {op}, got {tokens[position]!r}")
        position += 1
    arity = 2 if op in BINARY else 1
    if len(children) != arity:
        raise GenomeError(f"{op} takes {arity} argument(s), got {len(children)}")
    prim = typed_form(op, types)
    if typed_token and prim.name != token:
        # An explicit typed form (``sigmoid.s``) must be the one its arguments imply.
        raise GenomeError(f"{token} does not fit its arguments; they call for {prim.name}")
    return [prim] + [n for c in children for n in c], prim.ret, position


def parse_genome(text: str) -> gp.PrimitiveTree:
    """Parse a token string into a typed tree; wraps a per-block expression in ``block_mean``."""
    if not isinstance(text, str):
        raise GenomeError(f"a genome must be a string, got {type(text).__name__}")
    if not text.strip():
        raise GenomeError("empty genome string")
    tokens = _tokenize(text)
    nodes, node_type, position = _parse_expr(tokens, 0)
    if position != len(tokens):
        raise GenomeError(f"unexpected {tokens[position]!r} after the end of the genome")
    if node_type is Scalar:
        nodes = [typed_form(DEFAULT_AGGREGATION, [Scalar])] + nodes
    elif node_type is Matrix:
        raise GenomeError("a genome must reduce each block to a scalar (e.g. to_mean_scalar(...))")
    return gp.PrimitiveTree(nodes)


def format_subtree(nodes: Sequence, position: int, canonical: bool) -> tuple[str, int]:
    """The token string of the subtree starting at ``position`` and the position after it.

    ``canonical`` gives the form :func:`canonical_string` compares by: ``no_op`` dropped
    and the arguments of commutative operations sorted.
    """
    node = nodes[position]
    if isinstance(node, gp.Terminal):
        return node.name, position + 1
    op = op_name(node.name)
    position += 1
    parts = []
    for _ in range(node.arity):
        text, position = format_subtree(nodes, position, canonical)
        parts.append(text)
    if canonical:
        if op == "no_op":
            return parts[0], position
        if op in COMMUTATIVE:
            parts.sort()
    return f"{op}({', '.join(parts)})", position


def genome_to_string(tree: gp.PrimitiveTree) -> str:
    """The token string of a tree (typed forms are implied by the arguments)."""
    return format_subtree(tree, 0, canonical=False)[0]


class TreeGenomes:
    """The ``parse`` and ``contains`` of a :class:`~autoprox.genome.space.SearchedSpace` whose genomes are trees of
    the statistics (:class:`~autoprox.genome.template.TemplateSpace`, :class:`~autoprox.genome.free.FreeSpace`),
    for a class with the :class:`~autoprox.genome.space.GenomeSpace` it searches as ``space``."""

    def parse(self, text: str) -> gp.PrimitiveTree:
        """The tree of a genome's text (:func:`parse_genome`)."""
        return parse_genome(text)

    def contains(self, tree: gp.PrimitiveTree) -> bool:
        """Whether ``tree`` is within the space (:meth:`GenomeSpace.contains`)."""
        return self.space.contains(tree)


def canonical_string(tree: gp.PrimitiveTree) -> str:
    """A form equal for trees computing the same thing: no ``no_op``, sorted commutative operands."""
    return format_subtree(tree, 0, canonical=True)[0]


def tree_size(tree: gp.PrimitiveTree) -> int:
    """Number of nodes (the complexity measure)."""
    return len(tree)


# ------------------------------------------------------------------------ evaluation


class InvalidProxy(ValueError):
    """A proxy whose value is not usable on some architecture (NaN, inf, shape mismatch)."""


def _evaluate_block(tree: gp.PrimitiveTree, position: int, block: Mapping,
                    memo=None, index: int = 0, kernels: Mapping[str, Callable] | None = None) -> tuple[object, int]:
    """The value of the subtree at ``position`` on one block and where it ends; ``kernels``: node
    name -> function (:func:`kernel_map`; default torch's)."""
    if kernels is None:
        kernels = kernel_map()
    node = tree[position]
    if isinstance(node, gp.Terminal):
        return block[node.name], position + 1
    slot = memo.slot(position, index) if memo is not None else None
    if slot is not None and slot.hit():
        return slot.value(), slot.end
    end, args = position + 1, []
    for _ in range(node.arity):
        arg, end = _evaluate_block(tree, end, block, memo, index, kernels)
        args.append(arg)
    value = kernels[node.name](*args)
    if slot is not None:
        slot.keep(value)
    return value, end


def uses_arch_terminals(tree: gp.PrimitiveTree) -> bool:
    """Whether ``tree`` reads an architecture-level terminal (``A_params``, ...)."""
    return any(isinstance(n, gp.Terminal) and n.name.startswith(TERMINAL_PREFIX) for n in tree)


def uses_scalar_terminals(tree: gp.PrimitiveTree) -> bool:
    """Whether ``tree`` reads a terminal of a scalar set (one value per architecture, not per block)."""
    kinds = terminal_kinds()
    return any(isinstance(n, gp.Terminal) and kinds.get(n.name) == SCALAR for n in tree)


def uses_spread_terminals(tree: gp.PrimitiveTree) -> bool:
    return any(isinstance(n, gp.Terminal) and n.name in SPREAD_NAMES for n in tree)


def reads_statistics(tree: gp.PrimitiveTree) -> bool:
    """Whether ``tree`` reads any per-block statistic (the eight or a spread one). A tree of
    architecture terminals alone needs only its architecture's block count, not a network pass."""
    statistics = statistic_terminals()
    return any(isinstance(n, gp.Terminal) and n.name in statistics for n in tree)


def genome_terminals(tree: gp.PrimitiveTree) -> tuple[str, ...]:
    """The terminal names ``tree`` reads, each once, in the order they first occur."""
    return tuple(dict.fromkeys(n.name for n in tree if isinstance(n, gp.Terminal)))


def genome_computed_sets(tree: gp.PrimitiveTree) -> tuple[str, ...]:
    """The computed scalar terminal sets ``tree`` reads (the zoo's: values of each architecture's network,
    :func:`autoprox.genome.terminals.terminal_table` needs a source for them)."""
    return computed_sets(genome_terminals(tree))


def genome_extras(tree: gp.PrimitiveTree) -> tuple[str, ...]:
    """The extra statistics sets (:mod:`autoprox.data.extras`) ``tree`` reads: its cache entries to load."""
    return extras_for(genome_terminals(tree))


def terminal_tensors(values: Mapping[str, float]) -> dict:
    """Architecture-level terminal values as 0-d float32 tensors (the statistics' dtype)."""
    import torch

    return {name: torch.tensor(value, dtype=torch.float32) for name, value in values.items()}


def block_values(tree: gp.PrimitiveTree, stats: Sequence[dict],
                 terminals: Mapping[str, float] | None = None, memo=None,
                 kernels: Mapping[str, Callable] | None = None) -> list[float]:
    """The per-block scalar of ``tree`` (below its aggregation) for each block.

    ``terminals`` gives the architecture-level terminal values (:mod:`autoprox.spaces.descriptors`),
    needed only when the tree uses them. ``memo``: this architecture's :class:`~autoprox.genome.memo.SubtreeMemo`
    (the same values, scalar subtrees computed once); a memo keeps values of one kernel set only,
    so give it the same ``kernels`` every time. ``kernels``: node name -> function
    (:func:`kernel_map`); default the torch kernels.
    """
    import torch

    from autoprox.primitives import InvalidResult

    extra = {}
    if uses_scalar_terminals(tree):
        if terminals is None:
            raise GenomeError("this genome uses architecture-level terminals; their values are needed")
        extra = terminal_tensors(terminals)
    if kernels is None:
        kernels = kernel_map()
    if memo is not None:
        memo.bind(tree)
    values = []
    for index, block in enumerate(stats):
        try:
            value, _ = _evaluate_block(tree, 1, ChainMap(block, extra) if extra else block, memo, index, kernels)
        except InvalidResult as exc:
            raise InvalidProxy(str(exc)) from None
        except RuntimeError as exc:  # torch's own shape errors
            raise InvalidProxy(str(exc).splitlines()[0]) from None
        if not isinstance(value, torch.Tensor) or value.dim() != 0:
            raise InvalidProxy("a block's value is not a scalar")
        number = float(value)
        if number != number or number in (float("inf"), float("-inf")):
            raise InvalidProxy("NaN or inf")
        values.append(number)
    return values


def aggregate(aggregation: str, values: Sequence[float]) -> float:
    """Combine per-block values into the architecture's score (:mod:`autoprox.genome.aggregations`)."""
    return get_aggregation(aggregation)(values)


def score_architecture(tree: gp.PrimitiveTree, stats: Sequence[dict],
                       terminals: Mapping[str, float] | None = None, memo=None,
                       kernels: Mapping[str, Callable] | None = None) -> float:
    """The proxy score of one architecture from its per-block statistics (and, for genomes
    that use them, its architecture-level terminal values); ``memo`` and ``kernels``: see :func:`block_values`."""
    aggregation = op_name(tree[0].name)
    return aggregate(aggregation, block_values(tree, stats, terminals, memo, kernels))
