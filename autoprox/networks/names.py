"""The names of what the statistics pass reads beside the eight statistics, without torch.

:mod:`autoprox.networks.runtime` computes them and needs torch; the layers above that only name them (the
genome's terminal sets, the cache's extra sets, reports) read them here, so that listing, parsing and the
table commands do not load torch. ``autoprox export`` writes them into an exported module above the runtime's
copied code (:func:`autoprox.reports.export.runtime_source`).
"""

#: The spread statistics (``collect(..., spread=True)``): the layer paths whose per-sample
#: weight gradients they spread, and the hidden activation's and its gradient's.
SPREAD_NAMES = ("S1g", "S2g", "S3g", "S4", "S4g")
#: Every descriptor an architecture-level terminal can stand for (A_NAME and A_log_NAME).
DESCRIPTOR_NAMES = ("params", "macs", "depth", "width", "heads", "mlp_ratio")

__all__ = ["DESCRIPTOR_NAMES", "SPREAD_NAMES"]
