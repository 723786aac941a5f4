"""Unary primitive operations UOP00..UOP23 (Auto-Prox Table 14).

Each value in a proxy tree is a matrix (2-D float32 tensor) or a scalar (0-d
tensor); every function here handles both forms (dispatching on ``x.dim() == 0``
where the two differ).  Rules shared by all ops:

* Pure: no op modifies its input in place (statistics are cached and shared
  between trees).  An op may return its input object itself (no_op, the scalar
  forms of to_mean_scalar) since nothing downstream mutates it either.
* Not protected: the paper does not guard ops, so ln of a negative number is NaN,
  1/0 is inf, and so on; the engine marks such a proxy invalid.
* Self-contained: each function depends only on ``torch`` and ``EPS`` so that its
  source text can be copied verbatim into a standalone exported proxy file.
"""

from __future__ import annotations

import torch

EPS = 1e-9


def no_op(x: torch.Tensor) -> torch.Tensor:
    """UOP00: identity.

    Matrix form: the matrix.  Scalar form: the scalar.
    Returns the input object itself (no copy): safe because no op mutates.
    """
    return x


def element_wise_abs(x: torch.Tensor) -> torch.Tensor:
    """UOP01: |x| element-wise.  Matrix form: |x_ij|.  Scalar form: |s|."""
    return torch.abs(x)


def element_wise_tanh(x: torch.Tensor) -> torch.Tensor:
    """UOP02: tanh(x) element-wise.  Matrix form: tanh(x_ij).  Scalar form: tanh(s)."""
    return torch.tanh(x)


def element_wise_pow(x: torch.Tensor) -> torch.Tensor:
    """UOP03: x^2 element-wise (the paper's power is the square).

    Matrix form: x_ij^2.  Scalar form: s^2.  May overflow to inf.
    """
    return x * x


def element_wise_exp(x: torch.Tensor) -> torch.Tensor:
    """UOP04: e^x element-wise.  Matrix form: e^x_ij.  Scalar form: e^s.  May overflow to inf."""
    return torch.exp(x)


def element_wise_log(x: torch.Tensor) -> torch.Tensor:
    """UOP05: ln x element-wise, unprotected as in the paper.

    Matrix form: ln x_ij.  Scalar form: ln s.  Negative entries give NaN and zero
    gives -inf (the proxy is then invalid); no epsilon or abs is added.
    """
    return torch.log(x)


def element_wise_relu(x: torch.Tensor) -> torch.Tensor:
    """UOP06: max(0, x) element-wise.  Matrix form: max(0, x_ij).  Scalar form: max(0, s).

    NaN propagates (torch.relu keeps NaN).
    """
    return torch.relu(x)


def element_wise_leaky_relu(x: torch.Tensor) -> torch.Tensor:
    """UOP07: max(0.1 x, x) element-wise (negative slope 0.1 as in the paper).

    Matrix form: max(0.1 x_ij, x_ij).  Scalar form: max(0.1 s, s).
    """
    return torch.maximum(0.1 * x, x)


def element_wise_swish(x: torch.Tensor) -> torch.Tensor:
    """UOP08: x * sigmoid(x) element-wise.

    Matrix form: x_ij * sigmoid(x_ij).  Scalar form: s * sigmoid(s).
    torch.sigmoid is stable for large |x|.
    """
    return x * torch.sigmoid(x)


def element_wise_mish(x: torch.Tensor) -> torch.Tensor:
    """UOP09: x * tanh(ln(1 + e^x)) element-wise.

    Matrix form: x_ij * tanh(softplus(x_ij)).  Scalar form: s * tanh(softplus(s)).
    ln(1 + e^x) is computed stably by torch's softplus (linear above x = 20, no
    overflow of e^x), so large inputs give x instead of inf/NaN.
    """
    return x * torch.tanh(torch.nn.functional.softplus(x))


def element_wise_invert(x: torch.Tensor) -> torch.Tensor:
    """UOP10: 1 / x element-wise, unprotected.

    Matrix form: 1 / x_ij.  Scalar form: 1 / s.  Zero gives inf (proxy invalid).
    """
    return torch.reciprocal(x)


def element_wise_normalized_sum(x: torch.Tensor) -> torch.Tensor:
    """UOP11: sum(x) / (numel(x) + EPS), a reduction to a scalar.

    Matrix form: the sum of all entries over (numel + 1e-9), a 0-d tensor.
    Scalar form: s / (1 + 1e-9) (numel of a scalar is 1).
    EPS is the paper's epsilon (it appears in the published AutoProxA formula).
    """
    return torch.sum(x) / (x.numel() + EPS)


def normalize(x: torch.Tensor) -> torch.Tensor:
    """UOP12: (x - mean(x)) / std(x) over the whole matrix.

    Matrix form: standardise all entries with the matrix's mean and its
    population std (correction=0, dividing by n), so the result has mean 0 and
    population std 1.  Unprotected: a constant matrix gives NaN (0/0).
    Scalar form: (s - s) / 0 = NaN, i.e. invalid (a single value has no spread).
    """
    if x.dim() == 0:
        return (x - x) / torch.zeros_like(x)
    return (x - torch.mean(x)) / torch.std(x, correction=0)


def sigmoid(x: torch.Tensor) -> torch.Tensor:
    """UOP13: 1 / (1 + e^-x) element-wise.  Matrix form: sigmoid(x_ij).  Scalar form: sigmoid(s)."""
    return torch.sigmoid(x)


def logsoftmax(x: torch.Tensor) -> torch.Tensor:
    """UOP14: log softmax over the LAST axis.

    Matrix form: each row normalised on its own: x_ij - logsumexp_j(x_ij).  A row
    is one output unit's incoming weights (weights are out x in) or one token's
    hidden vector (activations are tokens x hidden).  Computed stably by
    torch.log_softmax; equals log(softmax(x)).
    Scalar form: 0 (the log softmax of a single value, ln(e^s / e^s)), computed
    as s - s so a NaN/inf scalar stays invalid.
    """
    if x.dim() == 0:
        return x - x
    return torch.log_softmax(x, dim=-1)


def softmax(x: torch.Tensor) -> torch.Tensor:
    """UOP15: softmax over the LAST axis.

    Matrix form: each row normalised on its own: e^x_ij / sum_j e^x_ij (every row
    sums to 1).  A row is one output unit's incoming weights or one token's hidden
    vector.  Computed stably by torch.softmax (max subtracted first).
    Scalar form: 1 (the softmax of a single value, e^s / e^s), computed as
    e^(s - s) so a NaN/inf scalar stays invalid.
    """
    if x.dim() == 0:
        return torch.exp(x - x)
    return torch.softmax(x, dim=-1)


def element_wise_sqrt(x: torch.Tensor) -> torch.Tensor:
    """UOP16: sqrt(x) element-wise, unprotected.

    Matrix form: sqrt(x_ij).  Scalar form: sqrt(s).  Negative entries give NaN.
    """
    return torch.sqrt(x)


def element_wise_revert(x: torch.Tensor) -> torch.Tensor:
    """UOP17: -x element-wise (the paper's "revert" is negation).

    Matrix form: -x_ij.  Scalar form: -s.
    """
    return torch.neg(x)


def frobenius_norm(x: torch.Tensor) -> torch.Tensor:
    """UOP18: sqrt(sum x^2) over all entries, a reduction to a scalar.

    Matrix form: the Frobenius norm, a 0-d tensor.  Scalar form: sqrt(s^2) = |s|.
    Computed literally as in the paper (no rescaling), so entries above ~1e19
    overflow to inf in float32.
    """
    return torch.sqrt(torch.sum(x * x))


def element_wise_abslog(x: torch.Tensor) -> torch.Tensor:
    """UOP19: |ln x| element-wise, exactly as the paper writes it.

    Matrix form: |ln x_ij|.  Scalar form: |ln s|.  The abs is applied AFTER the
    log (not ln|x|), so negative entries give NaN and zero gives inf.
    """
    return torch.abs(torch.log(x))


def l1_norm(x: torch.Tensor) -> torch.Tensor:
    """UOP20: sum |x| / numel(x), a reduction to a scalar (the mean absolute value).

    Matrix form: the sum of |x_ij| over the number of entries, a 0-d tensor (the
    paper divides by numel, without epsilon).  Scalar form: |s|.
    """
    return torch.sum(torch.abs(x)) / x.numel()


def min_max_normalize(x: torch.Tensor) -> torch.Tensor:
    """UOP21: (x - min x) / (max x - min x) over the whole matrix.

    Matrix form: entries mapped into [0, 1] with the matrix's global min and max
    (0 and 1 attained).  Unprotected: a constant matrix gives NaN (0/0).
    Scalar form: (s - s) / (s - s) = NaN, i.e. invalid.
    """
    if x.dim() == 0:
        return (x - x) / (x - x)
    lo = torch.min(x)
    return (x - lo) / (torch.max(x) - lo)


def to_mean_scalar(x: torch.Tensor) -> torch.Tensor:
    """UOP22: the mean of all entries (the paper writes x / n), a reduction to a scalar.

    Matrix form: sum(x) / numel(x), a 0-d tensor.  Scalar form: s itself.
    """
    if x.dim() == 0:
        return x
    return torch.mean(x)


def to_std_scalar(x: torch.Tensor) -> torch.Tensor:
    """UOP23: the population std of all entries, a reduction to a scalar.

    Matrix form: sqrt(sum (x - mean)^2 / n) with n = numel (correction=0, as the
    paper's formula divides by n), a 0-d tensor.  Scalar form: 0 (no spread),
    computed as s - s so a NaN/inf scalar stays invalid.
    """
    if x.dim() == 0:
        return x - x
    return torch.std(x, correction=0)
