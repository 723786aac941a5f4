"""Layer 2: the networks (models of every space, timm models as architectures) and their statistics.

Importing the package registers the ``timm`` space (:mod:`autoprox.networks.timm_models`).
"""

from autoprox.networks import timm_models  # noqa: F401 (registers the timm space)
