"""Rank formulas: unit-free proxies over the proxy columns of a space.

A proxy that must carry from one space to another cannot add raw values: a parameter count
in millions and one in units, a SynFlow of 1e40 and a NWOT of 700 have nothing in common
across spaces. A rank formula reads each proxy column only through a **transform within
the space** it scores, so its ranking is the same whatever each column's units:

* ``r(X)``: X's rank, scaled to (0, 1], centred (tied values share their mean rank);
* ``lr(X)``: X's log-rank ``log(rank / n)``, centred (the AZ-NAS transform: the best
  architecture gets 0, the worst ``log(1/n)``);
* ``z(X)``: the z-score of X's logarithm (``log x`` when every value is positive,
  ``-log(-x)`` when every value is negative, else ``asinh(x / median|x|)``, the signed
  logarithm at the column's own scale);
* ``over33(X)``, ``over67(X)``, ``under33(X)``, ``under67(X)``: hinges of X's scaled rank ``q``
  (in (0, 1]) at a third and two thirds, ``max(q - 1/3, 0)``, ``max(q - 2/3, 0)``,
  ``max(1/3 - q, 0)``, ``max(2/3 - q, 0)``, centred: with ``r`` they make a piecewise-linear
  function of the rank (the hinge basis of FFX), which a table search's weights fit.

Each transform is centred, so a value the space does not have (an empty cell, or with
``missing="neutral"`` a whole column it lacks) enters as 0: no information either way.
The transformed columns combine with operators (:data:`OPERATORS`): ``add``, ``sub``,
``mul``, ``max``, ``min``, ``neg`` and the rank-space ``rerank`` (the centred rank of
its argument), and ``lrsum(A, B, ...)``, the AZ-NAS sum of log-ranks over the columns it
names that the space has (a column it lacks is left out of the sum, whatever ``missing``).
``first(A, B, ...)`` is ``A`` where the space has every column ``A`` reads (and one column of
each of its lrsums), else ``B`` where it has B's, and so on (the last where none is complete): a
fallback for a space with fewer columns, chosen by which columns it has, never by its values.
Neither word is an operator a search draws.

The text form is prefix calls, e.g. ``add(lr(nwot), z(params))``,
``lrsum(params, flops, nwot, jacov)`` or ``first(r(params), r(flops), lrsum(nwot, jacov))``; :func:`parse_formula` reads it (a small
recursive-descent parser, no ``eval``), and ``str`` of a :class:`RankFormula` writes it. A column whose name is not
a bare name (letters, digits, ``_``, ``.``, ``-``, not starting with a digit) is written in double quotes with
JSON's escapes: ``r("my proxy")``, ``mul(r("2x"), r(nwot))``.
"""

from __future__ import annotations

import inspect
import json
import re
from dataclasses import dataclass, replace
from typing import Callable, Mapping

import numpy as np

from autoprox.core.errors import ConfigError, GenomeError
from autoprox.core.registry import Registry

__all__ = ["BARE_NAME", "GRAMMAR_WORDS", "MAX_DEPTH", "MAX_FORMULA_CHARS", "MISSING_COLUMN_SCORING", "OPERATORS",
           "TRANSFORMS", "Node", "RankFormula", "built_in_transform_function", "column_text", "columns_of", "parse_formula",
           "readable", "register_operator", "register_transform", "resolve_first", "transform_column", "transforms_source",
           "unmeasured_rows"]

#: Longest formula text read, and deepest nesting: beyond them a formula is refused in one line.
MAX_FORMULA_CHARS = 10_000
MAX_DEPTH = 40

#: What scoring a formula does with a column it reads that the table lacks (:meth:`RankFormula.score`'s
#: ``missing``): refuse it, or enter it as 0, no information (a search's policy over spaces is another thing:
#: :data:`autoprox.apps.rank_search.MISSING_POLICIES`).
MISSING_COLUMN_SCORING = ("refuse", "neutral")
#: Words of the grammar that are neither transforms nor operators.
GRAMMAR_WORDS = ("lrsum", "first")


# ------------------------------------------------------------------------- transforms
def unmeasured_rows(columns: Mapping[str, np.ndarray], names, length: int) -> np.ndarray:
    """Which of the ``length`` rows of ``columns`` have no value (NaN) in any of the columns ``names`` (a name
    ``columns`` lacks holds none): rows a formula reading those columns would score from nothing measured."""
    measured = np.zeros(length, dtype=bool)
    for name in names:
        if name in columns:
            measured |= ~np.isnan(np.asarray(columns[name], dtype=np.float64))
    return ~measured


def _centre(values: np.ndarray) -> np.ndarray:
    """``values`` less their mean over the finite entries; NaN entries become 0."""
    out = np.zeros_like(values, dtype=np.float64)
    finite = np.isfinite(values)
    if finite.any():
        out[finite] = values[finite] - values[finite].mean()
    return out


def _ranks(values: np.ndarray) -> tuple[np.ndarray, int]:
    """Average ranks (1 = smallest) of the finite entries, NaN elsewhere, and how many are finite."""
    from scipy.stats import rankdata  # on first use: --help imports this module

    out = np.full(values.shape, np.nan)
    finite = np.isfinite(values)
    out[finite] = rankdata(values[finite])
    return out, int(finite.sum())


def _rank(values: np.ndarray) -> np.ndarray:
    ranks, count = _ranks(values)
    return _centre(ranks / max(count, 1))


def _log_rank(values: np.ndarray) -> np.ndarray:
    ranks, count = _ranks(values)
    return _centre(np.log(ranks / max(count, 1)))


def _z_log(values: np.ndarray) -> np.ndarray:
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return np.zeros_like(values, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        if (finite > 0).all():
            logged = np.log(values)
        elif (finite < 0).all():
            logged = -np.log(-values)
        else:
            scale = np.median(np.abs(finite[finite != 0])) if (finite != 0).any() else 1.0
            logged = np.arcsinh(values / scale)
    centred = _centre(logged)
    spread = centred[np.isfinite(logged)].std()
    return centred / spread if spread > 0 else np.zeros_like(centred)


def _hinge(values: np.ndarray, knot: float, above: bool) -> np.ndarray:
    """The centred hinge of the scaled rank ``q`` at ``knot``: ``max(q - knot, 0)`` (``above``) or
    ``max(knot - q, 0)``; NaN entries become 0."""
    ranks, count = _ranks(values)
    scaled = ranks / max(count, 1)
    return _centre(np.maximum(scaled - knot, 0.0) if above else np.maximum(knot - scaled, 0.0))


def _over33(values: np.ndarray) -> np.ndarray:
    return _hinge(values, 1 / 3, True)


def _over67(values: np.ndarray) -> np.ndarray:
    return _hinge(values, 2 / 3, True)


def _under33(values: np.ndarray) -> np.ndarray:
    return _hinge(values, 1 / 3, False)


def _under67(values: np.ndarray) -> np.ndarray:
    return _hinge(values, 2 / 3, False)


#: The built-in transforms' functions and the helpers they call (not :func:`_ranks`): what an exported weighted
#: formula copies.
_BUILT_IN = (_centre, _rank, _log_rank, _z_log, _hinge, _over33, _over67, _under33, _under67)


def transforms_source() -> str:
    """The source of the built-in transforms (``r``, ``lr``, ``z`` and the hinges) and the helpers they share,
    copied verbatim into an exported weighted formula (:mod:`autoprox.reports.weighted_export`) so that it computes
    them with this code. The copy needs NumPy as ``np`` and a ``_ranks`` of its own (this module's uses SciPy)."""
    return "\n\n".join(inspect.getsource(function) for function in _BUILT_IN)


def built_in_transform_function(name: str) -> str | None:
    """The name of the function :func:`transforms_source` copies for the transform ``name``; None for a transform
    registered by a user (its code is not copied)."""
    function = TRANSFORMS[name][0] if name in TRANSFORMS else None
    return function.__name__ if function in _BUILT_IN else None


#: Transforms by name: ``name -> (function of a column, one-line description)``.
TRANSFORMS: Registry[str, tuple[Callable[[np.ndarray], np.ndarray], str]] = Registry(
    "rank-formula transform", describe=lambda entry: entry[1])


def _check_name(name: str) -> None:
    """ConfigError unless ``name`` is a plain lower-case name and not one of :data:`GRAMMAR_WORDS` (a name another
    transform or operator holds is refused when it is registered)."""
    if not isinstance(name, str) or not re.fullmatch(r"[a-z][a-z0-9_]*", name):
        raise ConfigError(f"rank-formula name {name!r} is not a plain lower-case name (a letter, then lower-case "
                          "letters, digits or underscores)")
    if name in GRAMMAR_WORDS:
        raise ConfigError(f"rank-formula name {name!r} is a word of the grammar ({', '.join(GRAMMAR_WORDS)}); "
                          "give it another name")


def register_transform(name: str, function: Callable[[np.ndarray], np.ndarray], description: str) -> None:
    """Add a within-space transform. It must be centred and unchanged when the column is scaled by a
    positive constant (the unit-free property). A name an operator or transform has is a RegistryError."""
    _check_name(name)
    TRANSFORMS.add(name, (function, description))


def transform_column(name: str, values: np.ndarray) -> np.ndarray:
    """The transform ``name`` applied to one column (float array)."""
    return TRANSFORMS[name][0](np.asarray(values, dtype=np.float64))


# ------------------------------------------------------------------------- operators
@dataclass(frozen=True)
class Operator:
    """A rank-formula operator: its arity, its function on transformed columns, and one line of help."""

    name: str
    arity: int
    function: Callable[..., np.ndarray]
    description: str


#: Operators by name, in registration order (the order a search draws them in).
OPERATORS: Registry[str, Operator] = Registry("rank-formula operator", shares_names_with=TRANSFORMS)


def register_operator(name: str, arity: int, function: Callable[..., np.ndarray], description: str) -> Operator:
    """Add an operator over transformed columns (all arrays of one length). A name an operator or
    transform has is a RegistryError."""
    _check_name(name)
    return OPERATORS.add(name, Operator(name, arity, function, description))


register_transform("r", _rank, "the rank within the space, scaled to (0, 1] and centred")
register_transform("lr", _log_rank, "the log-rank within the space, log(rank / n), centred (AZ-NAS)")
register_transform("z", _z_log, "the z-score of the logarithm (signed logarithm at the column's scale for mixed signs)")
register_transform("over33", _over33, "the scaled rank's excess over 1/3, max(q - 1/3, 0), centred (a hinge)")
register_transform("over67", _over67, "the scaled rank's excess over 2/3, max(q - 2/3, 0), centred (a hinge)")
register_transform("under33", _under33, "the scaled rank's shortfall below 1/3, max(1/3 - q, 0), centred (a hinge)")
register_transform("under67", _under67, "the scaled rank's shortfall below 2/3, max(2/3 - q, 0), centred (a hinge)")
register_operator("add", 2, np.add, "a + b")
register_operator("sub", 2, np.subtract, "a - b")
register_operator("mul", 2, np.multiply, "a * b")
register_operator("max", 2, np.maximum, "the larger of a and b")
register_operator("min", 2, np.minimum, "the smaller of a and b")
register_operator("neg", 1, np.negative, "-a")
register_operator("rerank", 1, _rank, "the centred rank of a (back to rank space)")


# ------------------------------------------------------------------------- the tree
#: A column name written bare in a formula's text; any other name is written quoted (:func:`column_text`).
BARE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")


def column_text(name: str) -> str:
    """How a formula's text writes the column ``name``: bare (``nwot``) when it is a bare name, else in double
    quotes with JSON's escapes (``"my proxy"``, ``"2x"``, ``"ñwot✓"``), which :func:`parse_formula` reads back."""
    return name if BARE_NAME.fullmatch(name) else json.dumps(name, ensure_ascii=False)


@dataclass(frozen=True)
class Node:
    """One node: an operator with children, a transformed column (``op`` a transform name and
    ``column`` set), ``lrsum`` over ``columns``, or ``first`` of its children (the first the space
    can read in full)."""

    op: str
    children: tuple["Node", ...] = ()
    column: str = ""
    columns: tuple[str, ...] = ()

    def __str__(self) -> str:
        if self.op == "lrsum":
            return f"lrsum({', '.join(column_text(c) for c in self.columns)})"
        if self.column:
            return f"{self.op}({column_text(self.column)})"
        return f"{self.op}({', '.join(str(c) for c in self.children)})"

    @property
    def size(self) -> int:
        """Nodes in the tree (a transformed column counts one, an lrsum one per member, ``first`` one plus its
        alternatives)."""
        if self.op == "lrsum":
            return len(self.columns)
        return 1 + sum(c.size for c in self.children)


def columns_of(node: Node) -> tuple[str, ...]:
    """The columns a tree reads, in first-read order, without repeats (lrsum members included)."""
    found: dict[str, None] = {}

    def walk(n: Node) -> None:
        if n.column:
            found.setdefault(n.column)
        for name in n.columns:
            found.setdefault(name)
        for child in n.children:
            walk(child)

    walk(node)
    return tuple(found)


def readable(node: Node, available) -> bool:
    """Whether a space with the columns ``available`` has every column ``node`` reads outside an lrsum
    and at least one column of each of its lrsums (a ``first`` is readable when one alternative is)."""
    if node.op == "lrsum":
        return any(c in available for c in node.columns)
    if node.op == "first":
        return any(readable(c, available) for c in node.children)
    if node.column:
        return node.column in available
    return all(readable(c, available) for c in node.children)


def resolve_first(node: Node, available) -> Node:
    """``node`` with each ``first`` replaced by its first alternative readable with ``available``
    (its last where none is)."""
    if node.op == "first":
        chosen = next((c for c in node.children if readable(c, available)), node.children[-1])
        return resolve_first(chosen, available)
    if not node.children:
        return node
    return replace(node, children=tuple(resolve_first(c, available) for c in node.children))


@dataclass(frozen=True)
class RankFormula:
    """A parsed rank formula: scores the rows of a space from its proxy columns.

    Attributes
    ----------
    root : Node
        The tree.
    """

    root: Node

    def __str__(self) -> str:
        return str(self.root)

    @property
    def columns(self) -> tuple[str, ...]:
        """The proxy columns it reads."""
        return columns_of(self.root)

    @property
    def required(self) -> tuple[str, ...]:
        """The columns read outside an ``lrsum`` (those a space must have unless ``missing="neutral"``)."""
        found: dict[str, None] = {}

        def walk(n: Node) -> None:
            if n.column:
                found.setdefault(n.column)
            for child in n.children:
                walk(child)

        walk(self.root)
        return tuple(found)

    def resolved(self, available) -> "RankFormula":
        """The formula a space with the columns ``available`` scores: each ``first`` replaced by its
        alternative for that space (itself when it has no ``first``)."""
        return RankFormula(resolve_first(self.root, frozenset(available)))

    def score(self, columns: Mapping[str, np.ndarray], missing: str = "refuse",
              cache: dict | None = None) -> np.ndarray:
        """The formula's value on every row of a space.

        Parameters
        ----------
        columns : mapping of str to ndarray
            The space's proxy columns (raw values, NaN = not measured), all of one length.
        missing : {"refuse", "neutral"}
            A column the formula reads outside an ``lrsum`` that ``columns`` lacks: refused, or
            entered as 0 (no information).
        cache : dict, optional
            Transformed columns by ``(transform, column)``, filled and reused (a search scores
            many formulas on the same columns).

        Raises
        ------
        GenomeError
            With ``missing="refuse"``, the first column it lacks, by name, or an lrsum none of whose
            columns it has (with ``"neutral"`` such an lrsum is 0).
        """
        if missing not in MISSING_COLUMN_SCORING:
            raise ConfigError(f"missing must be one of {', '.join(MISSING_COLUMN_SCORING)}, got {missing!r}")
        if not columns:
            raise GenomeError("no proxy column to score a rank formula on")
        length = len(next(iter(columns.values())))
        root = resolve_first(self.root, frozenset(columns))
        if missing == "refuse":
            lacking = [c for c in RankFormula(root).required if c not in columns]
            if lacking:
                raise GenomeError(f"the formula reads proxy column {lacking[0]!r}, which this space does not have "
                                  f"(it has {', '.join(columns)})")
        memo = {} if cache is None else cache

        def transformed(transform: str, column: str) -> np.ndarray:
            key = (transform, column)
            if key not in memo:
                memo[key] = (transform_column(transform, columns[column]) if column in columns
                             else np.zeros(length))
            return memo[key]

        def value(n: Node) -> np.ndarray:
            if n.op == "lrsum":
                present = [c for c in n.columns if c in columns]
                if not present and missing == "neutral":
                    return np.zeros(length)
                if not present:
                    raise GenomeError(f"lrsum({', '.join(n.columns)}): this space has none of these proxy columns "
                                      f"(it has {', '.join(columns)})")
                return np.sum([transformed("lr", c) for c in present], axis=0)
            if n.column:
                return transformed(n.op, n.column)
            return OPERATORS[n.op].function(*(value(c) for c in n.children))

        with np.errstate(all="ignore"):
            return np.asarray(value(root), dtype=np.float64)


# ------------------------------------------------------------------------- parsing
_TOKEN = re.compile(r'\s*(?:([A-Za-z_][A-Za-z0-9_.\-]*)|("(?:[^"\\]|\\.)*")|(.))', re.DOTALL)


class _Quoted(str):
    """A column name read from a quoted token (never an operator, a transform or a symbol)."""


def _shown(token: str) -> str:
    """A token as an error message quotes it: a quoted column name as written, anything else by its repr."""
    return f"the quoted name {json.dumps(token, ensure_ascii=False)}" if isinstance(token, _Quoted) else repr(token)


def _tokens(text: str) -> list[str]:
    """The names, quoted column names (as :class:`_Quoted`, unquoted) and symbols of a formula's text."""
    out: list[str] = []
    for match in _TOKEN.finditer(text):
        name, quoted, symbol = match.groups()
        if quoted is not None:
            try:
                value = json.loads(quoted)
            except ValueError:
                raise GenomeError(f"rank formula {text[:80]!r}: {quoted[:40]!r} is not a quoted column name "
                                  '(double quotes, with \\" and \\\\ inside)') from None
            if not value:
                raise GenomeError(f"rank formula {text[:80]!r}: an empty quoted column name")
            out.append(_Quoted(value))
        elif name is not None:
            out.append(name)
        elif symbol is not None:
            if symbol == '"':
                raise GenomeError(f"rank formula {text[:80]!r}: a quoted column name is not closed")
            out.append(symbol)
    return out


def parse_formula(text: str) -> RankFormula:
    """Parse a rank formula's text (see the module's docstring).

    Raises
    ------
    GenomeError
        In one line: an unknown operator or transform, a wrong number of arguments, a
        transform of anything but a column name, unbalanced parentheses, text left over,
        more than :data:`MAX_FORMULA_CHARS` characters or :data:`MAX_DEPTH` levels.
    """
    if not isinstance(text, str) or not text.strip():
        raise GenomeError("an empty rank formula")
    if len(text) > MAX_FORMULA_CHARS:
        raise GenomeError(f"a rank formula of {len(text):,} characters; at most {MAX_FORMULA_CHARS:,} are read")
    tokens = _tokens(text)
    position = 0

    def take(expected: str | None = None) -> str:
        nonlocal position
        if position >= len(tokens):
            raise GenomeError(f"rank formula {text[:80]!r} ends early" + (f" (expected {expected!r})" if expected else ""))
        token = tokens[position]
        if expected is not None and (token != expected or isinstance(token, _Quoted)):
            raise GenomeError(f"rank formula {text[:80]!r}: expected {expected!r}, found {_shown(token)}")
        position += 1
        return token

    def name_token(what: str) -> str:
        token = take()
        if isinstance(token, _Quoted) and what == "a proxy column":
            return str(token)
        if isinstance(token, _Quoted) or not BARE_NAME.fullmatch(token):
            hint = (" (a column whose name is not a bare name is written in double quotes: r(\"my proxy\"))"
                    if what == "a proxy column" else "")
            raise GenomeError(f"rank formula {text[:80]!r}: expected {what}, found {_shown(token)}{hint}")
        return token

    def arguments(read: Callable[[], object]) -> list:
        take("(")
        items = [read()]
        while position < len(tokens) and tokens[position] == ",":
            take(",")
            items.append(read())
        take(")")
        return items

    def node(depth: int) -> Node:
        if depth > MAX_DEPTH:
            raise GenomeError(f"rank formula nested more than {MAX_DEPTH} levels deep")
        head = name_token("an operator, a transform, lrsum or first")
        if head == "lrsum":
            columns = arguments(lambda: name_token("a proxy column"))
            if len(set(columns)) != len(columns):
                raise GenomeError(f"lrsum names a column twice: {', '.join(columns)}")
            return Node("lrsum", columns=tuple(columns))
        if head == "first":
            children = arguments(lambda: node(depth + 1))
            if len(children) < 2:
                raise GenomeError("first(...) takes two alternatives or more, in order of preference")
            return Node("first", tuple(children))
        if head in TRANSFORMS:
            (column,) = _one(arguments(lambda: name_token("a proxy column")), head)
            return Node(head, column=column)
        if head in OPERATORS:
            children = arguments(lambda: node(depth + 1))
            if len(children) != OPERATORS[head].arity:
                raise GenomeError(f"{head} takes {OPERATORS[head].arity} argument(s), got {len(children)}")
            return Node(head, tuple(children))
        known = ", ".join([*TRANSFORMS, *OPERATORS, *GRAMMAR_WORDS])
        raise GenomeError(f"rank formula {text[:80]!r}: unknown operator or transform {head!r}; known: {known}")

    root = node(0)
    if position != len(tokens):
        raise GenomeError(f"rank formula {text[:80]!r}: text left over after the formula ({tokens[position]!r})")
    return RankFormula(root)


def _one(items: list, head: str) -> list:
    if len(items) != 1:
        raise GenomeError(f"{head}(...) transforms one proxy column, got {len(items)}")
    return items
