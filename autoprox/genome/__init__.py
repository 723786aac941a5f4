"""Layer 4: expression-tree genomes over the ``primitives`` package: template and free trees.

Importing the package registers the two kinds of :class:`~autoprox.genome.space.GenomeSpace`
(:data:`~autoprox.genome.space.GENOME_KINDS`): :mod:`autoprox.genome.template`, :mod:`autoprox.genome.free`.
"""

from autoprox.genome import template  # noqa: F401 (registers the template kind)
from autoprox.genome import free  # noqa: F401 (registers the free kind)
