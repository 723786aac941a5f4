"""Weighted-formula genomes: the evolved terms of a proxy that is a weighted sum over a table's columns.

A weighted formula scores each row as ``sum_j w_j r(X_j) + sum_i v_i T_i`` (:mod:`autoprox.proxies.weighted`):
one weight per plain column (the linear member, always present) and one per **evolved term** ``T_i``, a
rank formula over the columns (:mod:`autoprox.genome.rank_formula`), e.g. ``mul(r(nwot), r(jacov))``. The
weights are not part of the genome: they are fitted on the labelled rows (ridge least squares on ranks, as
GPTIPS's multi-gene genetic programming and FFX fit theirs). A genome is therefore its set of terms, and
``weighted()``, with none, is the plain linear blend of the columns: the search starts where ridge ends.

The text form lists the terms: ``weighted(mul(r(nwot), r(jacov)), min(r(snip), r(zen)))``. Its canonical
form sorts them and drops repeats, so two genomes with the same terms in another order are one.

:class:`WeightedSpace` is what the evolution (:mod:`autoprox.search.evolution`) draws and varies such
genomes with: its columns, its operators, the most terms and the largest term.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, ClassVar, Sequence

import numpy as np

from autoprox.core.errors import GenomeError
from autoprox.genome.formula_variation import random_tree, vary_tree
from autoprox.genome.rank_formula import (OPERATORS, TRANSFORMS, Node, RankFormula, columns_of, parse_formula,
                                          unmeasured_rows)

__all__ = ["BASES", "HINGE_TRANSFORMS", "MAX_HINGED_COLUMNS", "MAX_PAIRED_COLUMNS", "TERM_OPERATORS", "basis_members", "WEIGHTED_FORMULA_FORMAT", "WEIGHTED_KIND", "WeightedFormula", "WeightedGenome", "WeightedSpace", "parse_weighted"]

#: The genome kind ``config.json`` records for weighted formulas.
WEIGHTED_KIND = "weighted"

#: The ``format`` of a weighted-formula proxy file (a table search's ``best.json``).
WEIGHTED_FORMULA_FORMAT = "autoprox-weighted-formula/1"

#: The operators a term is drawn from by default: the products, minima and maxima of columns carry what a
#: linear blend cannot; sums and differences of columns are already in the linear member.
TERM_OPERATORS: tuple[str, ...] = ("mul", "min", "max", "sub", "neg")

#: The operators a term's root is drawn from: a term whose root is linear in its children adds nothing
#: the linear member and the other terms do not have.
ROOT_OPERATORS: tuple[str, ...] = ("mul", "min", "max")


#: The fixed members a table search may put beside the plain columns (its setting ``basis``), by name: what each
#: adds. ``linear``: none (the formula is linear in the columns' ranks but for its evolved terms). ``ffx``: the
#: hinges of each column's rank (:data:`HINGE_TRANSFORMS`) and the minimum of the ranks of each pair of columns, a
#: basis of the kind FFX fits (McConaghy, 2011): a piecewise-linear function of each rank, and the pairs'
#: interactions, with one weight each.
BASES: dict[str, str] = {
    "linear": "the plain columns' ranks alone",
    "ffx": "the plain columns' ranks, their hinges at 1/3 and 2/3 (over and under) and the minima of pairs of ranks",
}

#: The hinge transforms of the ``ffx`` basis (:mod:`autoprox.genome.rank_formula`).
HINGE_TRANSFORMS: tuple[str, ...] = ("over33", "over67", "under33", "under67")

#: The ``ffx`` basis holds the hinges of a table of at most this many plain columns, and the minima of pairs of one of
#: at most :data:`MAX_PAIRED_COLUMNS` (a wider table's basis would outgrow what a few labels can weigh).
MAX_HINGED_COLUMNS = 256
MAX_PAIRED_COLUMNS = 30


def basis_members(columns: Sequence[str], basis: str) -> tuple[Node, ...]:
    """The fixed members of the basis ``basis`` (:data:`BASES`) over the plain ``columns``, in a fixed order: each
    column's hinges, then the minima of pairs in the columns' order.

    Raises
    ------
    GenomeError
        An unknown basis, naming the known ones.
    """
    if basis not in BASES:
        raise GenomeError(f"unknown basis {basis!r}; known: {', '.join(BASES)}")
    if basis == "linear" or len(columns) > MAX_HINGED_COLUMNS:
        return ()
    hinges = [Node(transform, column=name) for name in columns for transform in HINGE_TRANSFORMS]
    pairs = [] if len(columns) > MAX_PAIRED_COLUMNS else [
        Node("min", (Node("r", column=first), Node("r", column=second)))
        for index, first in enumerate(columns) for second in columns[index + 1:]]
    return tuple(hinges + pairs)


@dataclass(frozen=True)
class WeightedGenome:
    """The evolved terms of a weighted formula (none: the linear blend of the plain columns).

    Attributes
    ----------
    terms : tuple of Node
        The terms, as rank-formula trees, in their canonical order (sorted by text, no repeats).
    """

    terms: tuple[Node, ...] = ()

    def __post_init__(self) -> None:
        unique = {str(term): term for term in self.terms}
        object.__setattr__(self, "terms", tuple(unique[text] for text in sorted(unique)))

    def __str__(self) -> str:
        return f"weighted({', '.join(str(term) for term in self.terms)})"

    @property
    def canonical(self) -> str:
        """The text of the genome, terms sorted: equal for genomes with the same terms."""
        return str(self)

    @property
    def size(self) -> int:
        """The nodes of every term (0 for the linear blend alone)."""
        return sum(term.size for term in self.terms)

    def __len__(self) -> int:
        return len(self.terms)

    def __iter__(self):
        return iter(self.terms)


def _split_top_level(text: str) -> list[str]:
    """``text`` cut at the commas outside every parenthesis and every quoted column name."""
    parts, depth, start, quoted, escaped = [], 0, 0, False, False
    for index, char in enumerate(text):
        if quoted:
            quoted, escaped = (escaped or char != '"'), (not escaped and char == "\\")
            continue
        if char == '"':
            quoted = True
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth < 0:
                raise GenomeError(f"weighted formula {text[:80]!r}: a ')' closes nothing")
        elif char == "," and depth == 0:
            parts.append(text[start:index])
            start = index + 1
    if depth != 0:
        raise GenomeError(f"weighted formula {text[:80]!r}: unbalanced parentheses")
    parts.append(text[start:])
    return parts


def parse_weighted(text: str) -> WeightedGenome:
    """Read ``weighted(T1, T2, ...)`` (each term a rank formula; ``weighted()`` has none).

    Raises
    ------
    GenomeError
        In one line: not of that form, or a term that is not a rank formula.
    """
    if not isinstance(text, str):
        raise GenomeError(f"a weighted formula is text, got {type(text).__name__}")
    return _parse_weighted_text(text)


@lru_cache(maxsize=8192)
def _parse_weighted_text(text: str) -> WeightedGenome:
    # a search re-reads each genome's text many times (its hall, its children, its fits); the genome is immutable
    body = text.strip()
    if not (body.startswith("weighted(") and body.endswith(")")):
        raise GenomeError(f"{body[:80]!r} is not a weighted formula: weighted(TERM, TERM, ...)")
    inner = body[len("weighted("):-1]
    if not inner.strip():
        return WeightedGenome()
    return WeightedGenome(tuple(parse_formula(part).root for part in _split_top_level(inner)))


@dataclass(frozen=True)
class WeightedSpace:
    """The weighted genomes a search draws: terms over ``columns`` (through ``transform``), at most
    ``max_terms`` of them, each of at most ``max_term_size`` nodes, from ``operators``.

    It offers what the evolution asks of a genome space (:class:`~autoprox.genome.space.SearchedSpace`):
    :meth:`random_genome`, :meth:`vary`, :meth:`parse` and :meth:`contains`.
    """

    columns: tuple[str, ...]
    max_terms: int = 4
    max_term_size: int = 5
    operators: tuple[str, ...] = TERM_OPERATORS
    transform: str = "r"
    kind: str = WEIGHTED_KIND
    #: Varied terms may take a term of a partner.
    uses_partners: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if not self.columns:
            raise GenomeError("a weighted formula needs at least one proxy column")
        if self.max_terms < 0 or self.max_term_size < 3:
            raise GenomeError(f"max_terms must be 0 or more and max_term_size 3 or more, got {self.max_terms} "
                              f"and {self.max_term_size}")
        unknown = [name for name in self.operators if name not in OPERATORS]
        if unknown:
            raise GenomeError(f"unknown term operator {unknown[0]!r}; known: {', '.join(OPERATORS.names())}")

    @property
    def terminals(self) -> list[Node]:
        """The transformed columns terms read."""
        return [Node(self.transform, column=name) for name in self.columns]

    def random_term(self, rng: random.Random) -> Node:
        """A random term: an operator of :data:`ROOT_OPERATORS` (those this space allows) over two random
        subtrees, within :attr:`max_term_size`."""
        roots = [name for name in ROOT_OPERATORS if name in self.operators] or list(self.operators)
        while True:
            operator = OPERATORS[rng.choice(roots)]
            term = Node(operator.name, tuple(random_tree(rng, self.terminals, 1, self.operators, 0.7)
                                             for _ in range(operator.arity)))
            if term.size <= self.max_term_size:
                return term

    def bound(self, settings: Any) -> "WeightedSpace":
        """This space itself: its operators read no setting of the evolution."""
        return self

    def random_genome(self, rng: random.Random) -> WeightedGenome:
        """A genome of one random term up to :attr:`max_terms` (none when it is 0)."""
        count = rng.randint(1, self.max_terms) if self.max_terms else 0
        return WeightedGenome(tuple(self.random_term(rng) for _ in range(count)))

    def vary(self, parent: WeightedGenome, rng: random.Random, partners: Sequence[WeightedGenome] = ()
             ) -> WeightedGenome:
        """One child: a term added, a term dropped, or a term varied (crossover with a term of a partner or of
        the parent, subtree or point mutation); a varied term over the size limit is drawn anew."""
        terms = list(parent.terms)
        roll = rng.random()
        if self.max_terms and (not terms or (roll < 0.3 and len(terms) < self.max_terms)):
            terms.append(self.random_term(rng))
        elif roll < 0.5 and terms:
            terms.pop(rng.randrange(len(terms)))
        elif terms:
            index = rng.randrange(len(terms))
            donors = [t for genome in partners for t in genome.terms] or terms
            child = vary_tree(terms[index], rng.choice(donors), rng, self.terminals, self.operators)
            terms[index] = child if child.size <= self.max_term_size and child.children else self.random_term(rng)
        return WeightedGenome(tuple(terms))

    def parse(self, text: str) -> WeightedGenome:
        """The genome of a text (:func:`parse_weighted`)."""
        return parse_weighted(text)

    def contains(self, genome: WeightedGenome) -> bool:
        """Whether ``genome`` has at most :attr:`max_terms` terms reading only this space's columns."""
        return len(genome) <= self.max_terms and all(
            set(columns_of(term)) <= set(self.columns) for term in genome.terms)

    def to_json(self) -> dict:
        """The ``genome`` field of a table search's ``config.json``."""
        return {"kind": self.kind, "columns": list(self.columns), "max_terms": self.max_terms,
                "max_term_size": self.max_term_size, "operators": list(self.operators), "transform": self.transform}


@dataclass(frozen=True)
class WeightedFormula:
    """A fitted weighted formula: ``intercept + sum_j w_j transform(X_j) + sum_b u_b B_b + sum_i v_i T_i`` over a
    space's columns (``B_b`` the fixed members of a basis, ``T_i`` the evolved terms).

    It scores as a :class:`~autoprox.genome.rank_formula.RankFormula` does (:meth:`score`, :attr:`columns`,
    :meth:`resolved`), so every path that scores a rank formula (a proxy table, networks) scores it. Each
    column enters through its transform within the space scored (``r``: the centred rank), so its order is
    unit-free; a column the space lacks, or an empty cell, enters as 0 (no information). A row with no value in
    any column it reads gets no score (NaN).

    Attributes
    ----------
    plain : tuple of str
        The columns of the linear member.
    terms : tuple of Node
        The evolved terms.
    weights : tuple of float
        One per plain column, then one per member of the basis, then one per term.
    intercept : float
        Added to every score (it orders nothing; it puts the scores on the scale of the labels' ranks).
    transform : str
        The transform the plain columns are read through.
    basis : tuple of Node
        The fixed members beside the plain columns (:func:`basis_members`; none for a linear basis).
    """

    plain: tuple[str, ...]
    terms: tuple[Node, ...]
    weights: tuple[float, ...]
    intercept: float = 0.0
    transform: str = "r"
    basis: tuple[Node, ...] = ()

    def __post_init__(self) -> None:
        needed = len(self.plain) + len(self.basis) + len(self.terms)
        if len(self.weights) != needed:
            basis = f", {len(self.basis)} basis members" if self.basis else ""
            raise GenomeError(f"a weighted formula of {len(self.plain)} columns{basis} and {len(self.terms)} terms "
                              f"needs {needed} weights, got {len(self.weights)}")

    @property
    def members(self) -> list[Node]:
        """The plain columns (as transformed-column nodes), the basis, then the terms: what the weights multiply."""
        return [Node(self.transform, column=name) for name in self.plain] + list(self.basis) + list(self.terms)

    def __str__(self) -> str:
        parts = [f"{weight:+.4g}*{member}" for weight, member in zip(self.weights, self.members) if weight != 0]
        return " ".join(parts) if parts else "0"

    def shortened(self, most: int = 30) -> tuple[str, int]:
        """The formula as :meth:`__str__` writes it when it has at most ``most`` members of nonzero weight; else
        those of the ``most`` largest weights (in the formula's order) and ``...``. Also how many members were
        left out (0: the whole formula)."""
        kept = [i for i, weight in enumerate(self.weights) if weight != 0]
        if len(kept) <= most:
            return str(self), 0
        largest = set(sorted(kept, key=lambda i: -abs(self.weights[i]))[:most])
        members = self.members
        parts = [f"{self.weights[i]:+.4g}*{members[i]}" for i in kept if i in largest]
        return " ".join(parts) + " ...", len(kept) - most

    @property
    def genome(self) -> WeightedGenome:
        """The terms as a genome (the weights left out)."""
        return WeightedGenome(self.terms)

    @property
    def columns(self) -> tuple[str, ...]:
        """The columns it reads, plain ones first."""
        found = dict.fromkeys(self.plain)
        for term in self.terms:
            found.update(dict.fromkeys(columns_of(term)))
        return tuple(found)

    @property
    def required(self) -> tuple[str, ...]:
        """None: a column a space lacks is read as no information."""
        return ()

    def resolved(self, available) -> "WeightedFormula":
        """Itself: a weighted formula has no ``first(...)`` to resolve."""
        return self

    def member_values(self, columns, cache: dict | None = None) -> list:
        """Each member's value on every row of ``columns`` (missing columns neutral)."""
        memo = {} if cache is None else cache
        return [RankFormula(member).score(columns, missing="neutral", cache=memo) for member in self.members]

    def score(self, columns, missing: str = "neutral", cache: dict | None = None):
        """The formula on every row of ``columns`` (raw values by name, NaN = not measured). ``missing`` is
        accepted for the rank-formula interface; a weighted formula always reads a lacking column as 0.

        A row with some of the cells it reads empty reads each of those as 0 (no information) and is scored from
        the rest; a row with none of them measured (:meth:`unmeasured`) is NaN, no score: at the intercept it would
        look like an average architecture."""
        if not columns:
            raise GenomeError("no proxy column to score a weighted formula on")
        length = len(next(iter(columns.values())))
        total = np.full(length, float(self.intercept))
        for weight, values in zip(self.weights, self.member_values(columns, cache)):
            total += weight * values
        total[self.unmeasured(columns, length)] = np.nan
        return total

    def unmeasured(self, columns, length: int) -> np.ndarray:
        """Which of the ``length`` rows of ``columns`` have no value (every cell NaN) in any column the formula reads
        (a column ``columns`` lacks holds none)."""
        return unmeasured_rows(columns, self.columns, length)

    def to_json(self) -> dict:
        """``{"plain": [...], "terms": [...], "weights": [...], "intercept": x, "transform": "r"}``, and
        ``"basis": [...]`` (the members' texts) when it has a basis."""
        data = {"plain": list(self.plain), "terms": [str(t) for t in self.terms],
                "weights": [float(w) for w in self.weights], "intercept": float(self.intercept),
                "transform": self.transform}
        if self.basis:
            data["basis"] = [str(member) for member in self.basis]
        return data

    @classmethod
    def from_json(cls, data) -> "WeightedFormula":
        """The formula of :meth:`to_json`'s record; GenomeError naming what is wrong."""
        if not isinstance(data, dict):
            raise GenomeError("a weighted formula record is a JSON object")
        plain, terms, weights = data.get("plain"), data.get("terms"), data.get("weights")
        if not (isinstance(plain, list) and all(isinstance(c, str) and c for c in plain)):
            raise GenomeError("a weighted formula's 'plain' is a list of column names")
        if not (isinstance(terms, list) and all(isinstance(t, str) for t in terms)):
            raise GenomeError("a weighted formula's 'terms' is a list of rank formulas")
        numbers = [*(weights if isinstance(weights, list) else [None]), data.get("intercept", 0.0)]
        if not all(isinstance(w, (int, float)) and not isinstance(w, bool) and math.isfinite(w) for w in numbers):
            raise GenomeError("a weighted formula's 'weights' and 'intercept' are finite numbers")
        basis = data.get("basis", [])
        if not (isinstance(basis, list) and all(isinstance(b, str) for b in basis)):
            raise GenomeError("a weighted formula's 'basis' is a list of rank formulas")
        transform = data.get("transform", "r")
        if transform not in TRANSFORMS:
            raise GenomeError(f"unknown transform {transform!r}; known: {', '.join(TRANSFORMS.names())}")
        return cls(tuple(plain), tuple(parse_formula(t).root for t in terms), tuple(float(w) for w in weights),
                   float(data.get("intercept", 0.0)), transform, tuple(parse_formula(b).root for b in basis))
