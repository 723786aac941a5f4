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


def format_column(values, significant: int = 6) -> list[str]:
    """A column of scores written alike: the same number of decimals for all, enough for ``significant`` digits
    of the largest (``714.677``, ``1234.568``); in scientific notation for all when the largest is past 1e12 or
    under 1e-3. An undefined value is :data:`UNDEFINED`."""
    finite = [abs(float(v)) for v in values if not isinstance(v, bool) and isinstance(v, Real) and math.isfinite(v)]
    largest = max(finite, default=0.0)
    if largest and (largest >= 1e12 or largest < 1e-3):
        spec = f".{significant - 1}e"
    else:
        spec = f".{max(0, significant - 1 - (math.floor(math.log10(largest)) if largest else 0))}f"
    return [f"{float(v):{spec}}" if not isinstance(v, bool) and isinstance(v, Real) and math.isfinite(v) else UNDEFINED
            for v in values]


def format_millions(count: float) -> str:
    """A parameter count in millions as a budget reads: ``4M``, ``2.5M``, ``0.16M``, ``1,584,090M``."""
    text = f"{count / 1e6:,.2f}".rstrip("0").rstrip(".")
    return f"{text}M"


__all__ = ["UNDEFINED", "format_column", "format_float", "format_millions"]


def cell_number(text: str) -> float:
    """A table cell's number, as ``float`` reads it but in ASCII and without ``_``: Python's ``float`` also reads
    ``1_000`` and digits of other scripts (``１２``, fullwidth), which no table writer means as a number; ValueError
    for them, as for any other text that is not a number."""
    if not text.isascii() or "_" in text:
        raise ValueError(f"{text!r} is not a number")
    return float(text)
