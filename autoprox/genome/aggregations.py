"""Aggregations over blocks: how a genome turns its per-block values into an architecture's score.

Each aggregation is registered once, with :func:`register_aggregation`, on the function
that computes it; the entry holds everything the engine needs:

* the numeric function (a list of per-block floats, in the blocks' forward order, to one
  float), used by the evaluator (:func:`autoprox.genome.tree.aggregate`);
* its source text, copied verbatim into exported proxies (the functions depend on
  :mod:`math` only, so that the copy stands alone);
* how formulas write it, in text and in LaTeX, around the per-block expression.

The paper's aggregation is the mean; the others are the sum (a depth-aware total), a
depth-weighted mean (block l of L weighs l, so deep blocks count more) and the standard
deviation over blocks (how much the blocks differ).
"""

from __future__ import annotations

import ast
import inspect
import math
from dataclasses import dataclass
from typing import Callable, Sequence

from autoprox.core.errors import GenomeError
from autoprox.core.registry import Registry


@dataclass(frozen=True)
class Aggregation:
    """One registered aggregation over blocks."""

    name: str
    function: Callable[[Sequence[float]], float]
    text_template: str  # "{f}" stands for the per-block expression
    latex_template: str
    note: str = ""  # what ``--aggregation``'s help says in parentheses after the name, if anything

    def __call__(self, values: Sequence[float]) -> float:
        return self.function(values)

    @property
    def description(self) -> str:
        """One sentence: what the function computes (its docstring's first line)."""
        return inspect.getdoc(self.function).splitlines()[0]

    @property
    def source(self) -> str:
        """The function's source text (without its registering decorator), to copy verbatim
        into an exported proxy file."""
        text = inspect.getsource(self.function)
        definition = ast.parse(text).body[0]
        return "\n".join(text.splitlines()[definition.lineno - 1:]) + "\n"

    def text(self, expression: str) -> str:
        """The score in plain text, from the per-block expression's text."""
        return self.text_template.replace("{f}", expression, 1)

    def latex(self, expression: str) -> str:
        """The score in LaTeX, from the per-block expression's LaTeX."""
        return self.latex_template.replace("{f}", expression, 1)


#: Every aggregation by name, in registration order (the paper's mean first).
AGGREGATION_REGISTRY: Registry[str, Aggregation] = Registry("aggregation", unknown=GenomeError)


def register_aggregation(text: str | None = None, latex: str | None = None, note: str = ""):
    """Register the decorated function as the aggregation of its name.

    ``text`` and ``latex`` are templates in which ``{f}`` stands for the per-block
    expression; by default the aggregation is written as a function of it. ``note``: a few
    words ``--aggregation``'s help shows beside the name (``the paper``).
    """

    def decorate(function: Callable[[Sequence[float]], float]) -> Callable[[Sequence[float]], float]:
        name = function.__name__
        if not name.isidentifier():
            raise ValueError(f"aggregation {name!r}: its name is not a genome token")
        AGGREGATION_REGISTRY.add(name, Aggregation(
            name, function,
            text if text is not None else name + "( {f} )",
            latex if latex is not None else r"\operatorname{" + name + r"}\left( {f} \right)",
            note,
        ))
        return function

    return decorate


@register_aggregation(text="1/L * sum_l ( {f} )", latex=r"\frac{1}{L} \sum_{l=1}^{L} \left( {f} \right)",
                      note="the paper")
def block_mean(values):
    """The mean of the blocks' values."""
    return sum(values) / len(values)


@register_aggregation(text="sum_l ( {f} )", latex=r"\sum_{l=1}^{L} \left( {f} \right)")
def block_sum(values):
    """The sum of the blocks' values."""
    return float(sum(values))


@register_aggregation(note="depth-weighted mean")
def block_wmean(values):
    """The depth-weighted mean: block l of L (registration order) weighs l."""
    count = len(values)
    return sum((i + 1) * v for i, v in enumerate(values)) / (count * (count + 1) / 2)


@register_aggregation()
def block_std(values):
    """The (population) standard deviation of the blocks' values."""
    count = len(values)
    mean = sum(values) / count
    return math.sqrt(sum((v - mean) ** 2 for v in values) / count)


def get_aggregation(name: str) -> Aggregation:
    """The aggregation ``name``; GenomeError naming the known ones otherwise."""
    return AGGREGATION_REGISTRY.lookup(name)


__all__ = ["AGGREGATION_REGISTRY", "Aggregation", "block_mean", "block_std", "block_sum", "block_wmean",
           "get_aggregation", "register_aggregation"]
