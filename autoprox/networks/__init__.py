"""Layer 2: the networks (models of every space, timm models as architectures), their statistics and the zoo.

Importing the package registers the ``timm`` space (:mod:`autoprox.networks.timm_models`).
"""

from autoprox.networks import timm_models  # noqa: F401 (registers the timm space)
