"""Layer 5: one proxy object for every kind (architecture, zoo, genome, ensemble), its scores and figures."""

from autoprox.proxies import ensemble as _ensemble  # noqa: F401 - registers the ensemble file format
