"""Layer 5: one proxy object for every kind (architecture, zoo, genome, ensemble), its scores and figures, and
the zoo of hand-crafted proxies itself.

What the proxies add to the layers below is registered where it is defined: the ``zoo`` terminal set (genomes
reading zoo scores, :mod:`autoprox.genome.terminals`) by :mod:`autoprox.proxies.zoo_scores`, which
:mod:`autoprox.proxies.proxy` imports; the ensemble file format by :mod:`autoprox.proxies.ensemble`, which the
package imports so that :func:`autoprox.proxies.proxy.resolve_proxy` reads an ensemble file whatever module asked
(the ensemble is built on the proxy, which cannot import it back).
"""

from autoprox.proxies import ensemble as _ensemble  # noqa: F401 - registers the ensemble file format
