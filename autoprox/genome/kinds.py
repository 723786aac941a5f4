"""A genome's text read whatever its kind: a tree of the per-block statistics (:mod:`autoprox.genome.tree`) or the
terms of a weighted formula (:mod:`autoprox.genome.weighted`, whose text starts ``weighted(``). Run files
(``evaluations.jsonl``, checkpoints, the hall of fame) hold either; they are parsed, never evaluated."""

from __future__ import annotations

from autoprox.genome.tree import canonical_string, genome_to_string, parse_genome, tree_size
from autoprox.genome.weighted import parse_weighted

__all__ = ["genome_forms", "is_weighted_text"]


def is_weighted_text(text: str) -> bool:
    """Whether a genome text is a weighted formula's terms."""
    return text.lstrip().startswith("weighted(")


def genome_forms(text: str) -> tuple[str, str, int]:
    """A genome's text, canonical text and node count; GenomeError when it is neither kind's."""
    if is_weighted_text(text):
        genome = parse_weighted(text)
        return str(genome), genome.canonical, genome.size
    tree = parse_genome(text)
    return genome_to_string(tree), canonical_string(tree), tree_size(tree)
