"""The aggregation registry: one entry per aggregation over blocks, used by the evaluator,
the formulas and the export alike."""

from __future__ import annotations

import math

import pytest

from autoprox.core.errors import GenomeError
from autoprox.genome.aggregations import (
    AGGREGATION_REGISTRY,
    get_aggregation,
    register_aggregation,
)
from autoprox.genome.tree import aggregate
from autoprox.genome.space import AGGREGATIONS

VALUES = [1.0, 2.0, 4.0, -0.5]


def test_the_registry_is_the_genome_vocabulary_in_order():
    assert AGGREGATIONS == tuple(AGGREGATION_REGISTRY) == ("block_mean", "block_sum", "block_wmean", "block_std")


@pytest.mark.parametrize("name,expected", [
    ("block_mean", 6.5 / 4),
    ("block_sum", 6.5),
    ("block_wmean", (1 * 1.0 + 2 * 2.0 + 3 * 4.0 + 4 * -0.5) / 10),
    ("block_std", math.sqrt(sum((v - 6.5 / 4) ** 2 for v in VALUES) / 4)),
])
def test_each_aggregation_computes_what_it_says_and_its_source_stands_alone(name, expected):
    entry = get_aggregation(name)
    assert aggregate(name, VALUES) == entry(VALUES) == pytest.approx(expected, rel=1e-15)
    namespace: dict = {"math": math}
    exec(entry.source, namespace)  # noqa: S102 - our own source, as an exported file holds it
    assert namespace[name](VALUES) == entry(VALUES)  # the same arithmetic, to the last bit
    assert not entry.source.lstrip().startswith("@")
    assert entry.description.endswith(".")


def test_text_and_latex_forms():
    assert get_aggregation("block_mean").text("f") == "1/L * sum_l ( f )"
    assert get_aggregation("block_sum").latex("f") == r"\sum_{l=1}^{L} \left( f \right)"
    assert get_aggregation("block_std").text("x + {f}") == "block_std( x + {f} )"  # the expression is not re-read
    assert get_aggregation("block_wmean").latex("g") == r"\operatorname{block_wmean}\left( g \right)"


def test_unknown_and_duplicate_aggregations_are_refused():
    with pytest.raises(GenomeError, match="unknown aggregation 'block_max'; known: block_mean"):
        get_aggregation("block_max")
    with pytest.raises(ValueError, match="not a genome token"):
        register_aggregation()(lambda values: 0.0)  # a lambda has no name a genome could hold
    assert tuple(AGGREGATION_REGISTRY) == AGGREGATIONS

    def block_sum(values):
        return 0.0

    with pytest.raises(ValueError, match="already registered"):
        register_aggregation()(block_sum)
