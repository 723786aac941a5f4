"""The paper's template genome (Appendix C): seven genes in one fixed tree shape.

::

    aggregation(to_mean_scalar(BOP(U2(U1(Fa)), U4(U3(Fb)))))

:class:`TemplateGenes` names the genes, :func:`template_tree` and :func:`template_genes`
convert between genes and trees, :func:`random_template` and :func:`mutate_template` are
the template search's draw and mutation, and :class:`TemplateSpace` is a template space as the evolution
searches it (registered as the ``template`` kind of :data:`~autoprox.genome.space.GENOME_KINDS`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, ClassVar, Sequence

from deap import gp

from autoprox.core.errors import ConfigError, GenomeError
from autoprox.genome.space import AGGREGATIONS, DEFAULT_AGGREGATION, GENOME_KINDS, TEMPLATE, GenomeSpace
from autoprox.genome.terminals import terminal_kinds
from autoprox.genome.tree import TEMPLATE_REDUCTION, TreeGenomes, genome_to_string, op_name, parse_genome
from autoprox.primitives import BINARY, UNARY


@dataclass(frozen=True)
class TemplateGenes:
    """The seven genes of the paper's template: two inputs, four unary ops, one binary op."""

    input_a: str
    unary_a1: str
    unary_a2: str
    input_b: str
    unary_b1: str
    unary_b2: str
    binary: str
    aggregation: str = DEFAULT_AGGREGATION

    def to_string(self) -> str:
        branch_a = f"{self.unary_a2}({self.unary_a1}({self.input_a}))"
        branch_b = f"{self.unary_b2}({self.unary_b1}({self.input_b}))"
        return f"{self.aggregation}({TEMPLATE_REDUCTION}({self.binary}({branch_a}, {branch_b})))"


def template_tree(genes: TemplateGenes) -> gp.PrimitiveTree:
    """The tree of a template's genes."""
    return parse_genome(genes.to_string())


def template_genes(tree: gp.PrimitiveTree) -> TemplateGenes:
    """Read the genes of a template-shaped tree; GenomeError when it is not one."""
    names = [op_name(n.name) for n in tree]
    inputs = terminal_kinds()  # every terminal a template input may be
    shaped = (
        len(names) == 9
        and names[0] in AGGREGATIONS
        and names[1] == TEMPLATE_REDUCTION
        and names[2] in BINARY
        and names[3] in UNARY and names[4] in UNARY and names[5] in inputs
        and names[6] in UNARY and names[7] in UNARY and names[8] in inputs
    )
    if not shaped:
        raise GenomeError(f"not a template genome: {genome_to_string(tree)}")
    return TemplateGenes(
        input_a=names[5], unary_a1=names[4], unary_a2=names[3],
        input_b=names[8], unary_b1=names[7], unary_b2=names[6],
        binary=names[2], aggregation=names[0],
    )


@dataclass(frozen=True)
class TemplateSpace(TreeGenomes):
    """A template :class:`~autoprox.genome.space.GenomeSpace` as the evolution searches it: genomes drawn by
    :func:`random_template` and varied by :func:`mutate_template` with ``gene_probability``, the evolution's
    setting (``evolution.gene_probability``) that :meth:`bound` binds. A
    :class:`~autoprox.genome.space.SearchedSpace` (parsing and containing trees as
    :class:`~autoprox.genome.tree.TreeGenomes` does)."""

    space: GenomeSpace
    gene_probability: float
    #: Mutation redraws genes: it takes no partner.
    uses_partners: ClassVar[bool] = False

    @classmethod
    def of(cls, space: GenomeSpace, settings: Any) -> "TemplateSpace":
        """``space`` searched with the ``gene_probability`` of ``settings``."""
        return cls(space, settings.gene_probability)

    def bound(self, settings: Any) -> "TemplateSpace":
        """This space searched with the ``gene_probability`` of ``settings``."""
        return self.of(self.space, settings)

    def random_genome(self, rng: random.Random) -> gp.PrimitiveTree:
        """A random template genome (:func:`random_template`)."""
        return random_template(rng, self.space)

    def vary(self, parent: gp.PrimitiveTree, rng: random.Random, partners: Sequence = ()) -> gp.PrimitiveTree:
        """A mutated child of ``parent`` (:func:`mutate_template`); ``partners`` are not read."""
        return mutate_template(parent, rng, self.gene_probability, self.space)

    @staticmethod
    def check_seed(tree: gp.PrimitiveTree) -> None:
        """GenomeError unless ``tree`` has the template's shape: the search mutates its genes."""
        try:
            template_genes(tree)
        except GenomeError:
            raise GenomeError("it does not have the template's shape block_mean(to_mean_scalar(BINARY(U2(U1(Fa)), "
                              "U4(U3(Fb))))) that the search mutates") from None


GENOME_KINDS.add(TEMPLATE, TemplateSpace)
#: The paper's genome space: template trees, the mean over blocks, the eight statistics. Made once its kind has
#: registered (above), as every :class:`~autoprox.genome.space.GenomeSpace` is checked against the registered kinds.
PAPER_SPACE = GenomeSpace()


def random_template(rng: random.Random, space: GenomeSpace = PAPER_SPACE) -> gp.PrimitiveTree:
    """A template genome with every gene drawn uniformly from ``space``'s choices."""
    genes = {name: rng.choice(choices) for name, choices in space.gene_choices().items()}
    if "aggregation" not in genes:
        genes["aggregation"] = space.aggregations[0]
    return template_tree(TemplateGenes(**genes))


#: Redraw rounds before :func:`mutate_template` stops waiting for a change by chance.
MUTATION_ROUNDS = 1000


def mutate_template(tree: gp.PrimitiveTree, rng: random.Random, gene_probability: float = 0.5,
                    space: GenomeSpace = PAPER_SPACE) -> gp.PrimitiveTree:
    """Redraw each gene with ``gene_probability``; at least one gene always changes.

    Rounds where nothing changed are drawn again (the paper's "mutate again"). With a
    probability so small that :data:`MUTATION_ROUNDS` rounds changed nothing, one
    gene is changed instead, chosen as the limit of that rejection sampling would
    (weighted by its chance of a new value), so that the call always ends.
    """
    if not 0.0 < gene_probability <= 1.0:
        raise ConfigError(f"gene probability must be in (0, 1], got {gene_probability}")
    genes = template_genes(tree).__dict__.copy()
    gene_choices = space.gene_choices()
    for _ in range(MUTATION_ROUNDS):
        child = dict(genes)
        for name, choices in gene_choices.items():
            if rng.random() < gene_probability:
                child[name] = rng.choice(choices)
        if child != genes:
            return template_tree(TemplateGenes(**child))
    names = list(gene_choices)
    weights = [(len(gene_choices[n]) - 1) / len(gene_choices[n]) for n in names]
    name = rng.choices(names, weights=weights)[0]
    child = dict(genes)
    child[name] = rng.choice([c for c in gene_choices[name] if c != genes[name]])
    return template_tree(TemplateGenes(**child))

__all__ = ["MUTATION_ROUNDS", "PAPER_SPACE", "TemplateGenes", "TemplateSpace", "mutate_template", "random_template",
           "template_genes", "template_tree"]
