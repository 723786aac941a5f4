"""How every table the command line prints writes a figure.

One function, so that a Kendall tau, a JCM or a paired difference reads the same in
``search``, ``show``, ``rank``, ``evaluate``, ``transfer`` and ``export``, and an undefined
figure is spelled one way: ``nan``.
"""

from __future__ import annotations

import math
from numbers import Real

#: How a figure that has no value is printed: JSON's ``null`` (how a run stores NaN), NaN, an infinity.
UNDEFINED = "nan"


def format_float(value: object, digits: int = 3, signed: bool = True) -> str:
    """``value`` with ``digits`` decimals, or :data:`UNDEFINED` when it has no finite value.

    Parameters
    ----------
    value
        A number (Python or NumPy), or None, as run files store NaN (``autoprox.core.atomic.json_safe``).
        Anything else (a bool, a string) is not a figure and prints as :data:`UNDEFINED` too.
    digits
        Decimals: 3 for correlations in tables, 4 where a file records a fitness more finely.
    signed
        Whether a positive figure carries its ``+`` (correlations and differences do: a
        column of them then lines up and a sign is never lost).

    Returns
    -------
    str
        ``"+0.548"``, ``"-0.017"``, ``"0.077"`` (unsigned) or ``"nan"``.
    """
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value):
        return UNDEFINED
    return f"{float(value):{'+' if signed else ''}.{digits}f}"


__all__ = ["UNDEFINED", "format_float"]
