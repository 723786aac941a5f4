"""Layer 1: architecture spaces (parsing, sampling, parameter and MAC counts), their registry and coarse descriptors.

Importing the package registers the built-in spaces (:mod:`autoprox.spaces.builtin`).
"""

from autoprox.spaces import builtin  # noqa: F401 (registers the built-in spaces)
