"""Numerical validity of a primitive's result."""

from __future__ import annotations

import torch


def is_valid(t: torch.Tensor) -> bool:
    """True when every entry of ``t`` is finite (no NaN, no +-inf).

    The paper does not protect its ops, so an invalid value (ln of a negative
    number, 1/0, overflow) marks the proxy invalid.  The score-level check of
    Appendix D (a score of -1, 0 or 1 is also invalid) belongs to the engine.
    """
    return bool(torch.isfinite(t).all())
