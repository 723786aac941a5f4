"""Layer 5: one proxy object for every kind (architecture, zoo, genome, ensemble), its scores and figures, and
the zoo of hand-crafted proxies itself.

Importing the package registers what it adds to the layers below: the ``zoo`` terminal set (genomes reading
zoo scores, :mod:`autoprox.genome.terminals`) and the ensemble file format.
"""

from autoprox.proxies import zoo_scores as _zoo_scores  # noqa: F401 - registers the zoo terminal set
from autoprox.proxies import ensemble as _ensemble  # noqa: F401 - registers the ensemble file format
