"""autoprox: evolutionary discovery of zero-cost proxies for Vision Transformers.

The data flow is the architecture, one module per step:
``spaces`` -> ``models`` -> ``statistics`` / ``cache`` -> ``genome`` (over the
``primitives`` package) -> ``fitness`` -> ``evolution`` -> ``rundir`` -> ``cli``.
"""

__version__ = "0.1.0"
