"""Fitting the weights of a weighted formula: ridge least squares on ranks, bagged, judged out of bag.

The weights of a weighted formula (:class:`autoprox.genome.weighted.WeightedFormula`) are fitted on the
labelled rows of a table: the members' values (the plain columns' centred ranks, the evolved terms) predict
the labels' ranks by ridge regression, each member standardised on the rows fitted so that one penalty
treats them alike, the penalty chosen among :data:`RIDGE_ALPHAS` by the closed-form leave-one-out error.

A search compares many sets of terms on few rows, so a set is judged **out of bag**: on ``bags`` seeded
subsamples of the labelled rows (without replacement), a ridge fitted on each subsample predicts the rows it
left out; each row's out-of-bag prediction is the mean of those, and the fitness is their R^2 against the
labels' ranks (:func:`out_of_bag`). The proxy kept averages the subsamples' weights (bagging: the mean of
linear fits is one linear fit, so the proxy stays one weighted formula). The members a search's sets share (the
plain columns and the basis) are standardised and decomposed once per subsample (:class:`BaggedRidge`), each set's
terms added to them by a low-rank update.

Everything here is a pure function of arrays; randomness comes from the generator passed in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from autoprox.core.correlation import kendall_or_zero

__all__ = ["MIN_COVERAGE", "RIDGE_ALPHAS", "WIDE_MEMBERS", "BaggedRidge", "FixedBlocks", "OutOfBag", "RidgeModel",
           "fixed_blocks", "label_ranks", "out_of_bag", "ridge_loo", "ridges_with", "subsamples", "usable_columns"]

#: The ridge penalties tried (on standardised members), as the outside few-label check tries them.
RIDGE_ALPHAS: tuple[float, ...] = tuple(float(a) for a in np.logspace(-2, 3, 12))

#: Above this many members, a ridge's weights come from its SVD rather than from solving the members-by-members
#: normal equations (the same weights to float rounding; the solve's cost grows with the cube of the members). With
#: more members than rows, from the eigenvectors of the rows' Gram matrix, whatever the members.
WIDE_MEMBERS = 256

#: A column is read when it has values on more than this share of the rows (and is not constant).
MIN_COVERAGE = 0.5


def usable_columns(columns: Mapping[str, np.ndarray], names: Sequence[str] | None = None) -> list[str]:
    """The columns (of ``names``, default all, in their order) with values on more than :data:`MIN_COVERAGE` of
    the rows and more than one distinct value."""
    kept = []
    for name in (list(columns) if names is None else names):
        values = np.asarray(columns[name], dtype=np.float64)
        finite = values[np.isfinite(values)]
        if finite.size > MIN_COVERAGE * len(values) and np.ptp(finite) > 0:
            kept.append(name)
    return kept


def label_ranks(labels: np.ndarray) -> np.ndarray:
    """The labels' ranks scaled to (0, 1] (ties share their mean rank)."""
    from scipy.stats import rankdata  # on first use: --help imports this module

    labels = np.asarray(labels, dtype=np.float64)
    return rankdata(labels) / len(labels)


@dataclass(frozen=True)
class RidgeModel:
    """A linear model on the members' raw values: ``intercept + features @ weights``; the penalty it was fitted with
    and its leave-one-out sum of squared errors (NaN where none was chosen)."""

    weights: np.ndarray
    intercept: float
    alpha: float
    loo_error: float = math.nan

    def predict(self, features: np.ndarray) -> np.ndarray:
        """The model's value on every row of ``features`` (rows by members)."""
        return self.intercept + np.asarray(features, dtype=np.float64) @ self.weights


def ridge_loo(features: np.ndarray, targets: np.ndarray, alphas: Sequence[float] = RIDGE_ALPHAS) -> RidgeModel:
    """Ridge regression of ``targets`` on ``features`` (rows by members), each member standardised on these rows,
    the penalty of ``alphas`` with the least leave-one-out squared error (closed form, one SVD); the weights are
    given back on the members' raw scale. A member constant on these rows gets weight 0.

    Parameters
    ----------
    features : ndarray of shape (n, m)
    targets : ndarray of shape (n,)
    alphas : sequence of float
        The penalties tried (ties: the first).
    """
    import scipy.linalg  # on first use: --help imports this module

    features = np.asarray(features, dtype=np.float64)
    targets = np.asarray(targets, dtype=np.float64)
    count, width = features.shape
    mean, target_mean = features.mean(axis=0), float(targets.mean())
    scale = features.std(axis=0)
    live = scale > 1e-12
    weights = np.zeros(width)
    if not live.any() or count < 3:
        return RidgeModel(weights, target_mean, math.nan)
    standard = (features[:, live] - mean[live]) / scale[live]
    centred = targets - target_mean
    wide = standard.shape[1] > count
    if wide:  # the rows' Gram matrix has the SVD's left vectors and squared singular values, at a rows-square cost
        squared, left = scipy.linalg.eigh(standard @ standard.T, check_finite=False)  # NumPy's: slow threaded
        squared = np.maximum(squared, 0.0)
    else:
        left, singular, right = np.linalg.svd(standard, full_matrices=False)
        squared = singular ** 2
    projected = left.T @ centred
    penalties = np.asarray(alphas, dtype=np.float64)
    shrink = squared / (squared + penalties[:, None])  # one row per penalty
    fitted = (shrink * projected) @ left.T
    leverage = shrink @ (left ** 2).T + 1.0 / count
    residual = (centred - fitted) / np.maximum(1.0 - leverage, 1e-12)
    errors = np.einsum("ij,ij->i", residual, residual)
    best = _least_error(errors)
    best_alpha = float(alphas[best])
    if wide:  # the same solution without a members-by-members system
        solved = standard.T @ (left @ (projected / (squared + best_alpha)))
    elif standard.shape[1] > WIDE_MEMBERS:
        solved = right.T @ (singular / (squared + best_alpha) * projected)
    else:
        gram = standard.T @ standard + best_alpha * np.eye(standard.shape[1])
        solved = np.linalg.solve(gram, standard.T @ centred)
    weights[live] = solved / scale[live]
    return RidgeModel(weights, target_mean - float(mean @ weights), best_alpha, float(errors[best]))


@dataclass(frozen=True)
class FixedBlocks:
    """What every ridge on the same subsamples shares when its members start with the same fixed ones (a table
    search's plain columns and basis), one entry per subsample along the first axis: the fixed members' mean and
    scale on the subsample's rows (scale 1 for a member constant there), their standardised values (0 for a constant
    one: it then weighs nothing, as :func:`ridge_loo` leaves it out), and the eigendecomposition of their rows' Gram
    matrix with the centred targets in its coordinates (:func:`fixed_blocks`)."""

    mean: np.ndarray
    scale: np.ndarray
    standard: np.ndarray
    target_mean: np.ndarray
    squared: np.ndarray
    left: np.ndarray
    projected: np.ndarray


def _standardised(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``values`` (subsamples by rows by members) standardised on each subsample's rows, a constant member 0; and
    the members' means and scales (1 for a constant one)."""
    mean, scale = values.mean(axis=1), values.std(axis=1)
    live = scale > 1e-12
    scale = np.where(live, scale, 1.0)
    return np.where(live[:, None, :], (values - mean[:, None, :]) / scale[:, None, :], 0.0), mean, scale


def fixed_blocks(features: np.ndarray, targets: np.ndarray) -> FixedBlocks | None:
    """The :class:`FixedBlocks` of ``features`` (subsamples by rows by members) and ``targets`` (subsamples by rows);
    None where they do not fit :func:`ridges_with`: fewer than 3 rows, or a subsample with no more members varying
    on its rows than rows (a ridge of them is not wide, whatever is added)."""
    features = np.asarray(features, dtype=np.float64)
    targets = np.asarray(targets, dtype=np.float64)
    count = features.shape[1]
    if count < 3 or (features.std(axis=1) > 1e-12).sum(axis=1).min() <= count:
        return None
    import scipy.linalg  # on first use: --help imports this module

    standard, mean, scale = _standardised(features)
    target_mean = targets.mean(axis=1)
    centred = targets - target_mean[:, None]
    squared, left = zip(*(scipy.linalg.eigh(one @ one.T, check_finite=False) for one in standard))
    left = np.array(left)
    projected = (left.transpose(0, 2, 1) @ centred[:, :, None])[:, :, 0]
    return FixedBlocks(mean, scale, standard, target_mean, np.maximum(np.array(squared), 0.0), left, projected)


def ridges_with(blocks: FixedBlocks, extra: np.ndarray, alphas: Sequence[float] = RIDGE_ALPHAS) -> list[RidgeModel]:
    """:func:`ridge_loo` of each subsample's fixed members followed by ``extra`` (subsamples by the same rows by more
    members), to float rounding, without a new eigendecomposition: the extra members' rows' Gram matrix is a
    low-rank update of the block's, so the penalised inverse comes from the block's eigenvectors by the Woodbury
    identity, for every subsample and penalty at once. Weights: the fixed members, then ``extra``'s."""
    standard, mean, scale = _standardised(np.asarray(extra, dtype=np.float64))
    count, left, right = blocks.left.shape[1], blocks.left, blocks.left.transpose(0, 2, 1)
    penalties = np.asarray(alphas, dtype=np.float64)[:, None]
    inverse = 1.0 / (blocks.squared[:, None, :] + penalties)  # subsample, penalty, eigenvalue: (G + alpha I)^-1
    solved = inverse * blocks.projected[:, None, :]  # (G + alpha I)^-1 y in the eigenbasis, corrected below
    diagonal = inverse @ (left ** 2).transpose(0, 2, 1)  # the diagonal of (G + alpha I)^-1 on the rows
    if standard.shape[2]:
        coordinates = (right @ standard)[:, None]
        scaled = inverse[..., None] * coordinates
        capacitance = np.linalg.inv(np.eye(standard.shape[2]) + coordinates.transpose(0, 1, 3, 2) @ scaled)
        solved = solved - (scaled @ (capacitance @ (coordinates.transpose(0, 1, 3, 2) @ solved[..., None])))[..., 0]
        on_rows = left[:, None] @ scaled
        diagonal = diagonal - ((on_rows @ capacitance) * on_rows).sum(axis=3)  # the capacitance is symmetric
    dual = solved @ right  # (G + alpha I)^-1 y on the rows: the residual is alpha times it
    residual = penalties * dual / np.maximum(penalties * diagonal - 1.0 / count, 1e-12)
    errors = np.einsum("ijk,ijk->ij", residual, residual)
    best = [_least_error(bag_errors) for bag_errors in errors]
    chosen = dual[np.arange(len(best)), best][:, :, None]
    weights = np.concatenate([(blocks.standard.transpose(0, 2, 1) @ chosen)[:, :, 0] / blocks.scale,
                              (standard.transpose(0, 2, 1) @ chosen)[:, :, 0] / scale], axis=1)
    intercepts = blocks.target_mean - np.einsum("ij,ij->i", np.concatenate([blocks.mean, mean], axis=1), weights)
    return [RidgeModel(weights[index], float(intercepts[index]), float(alphas[choice]), float(errors[index, choice]))
            for index, choice in enumerate(best)]


def _least_error(errors: np.ndarray) -> int:
    """The index of the penalty of least leave-one-out error (ties within 1e-12: the first)."""
    best, best_error = 0, math.inf
    for index, error in enumerate(errors):
        if error < best_error - 1e-12:
            best, best_error = index, float(error)
    return best


def subsamples(count: int, bags: int, fraction: float, rng: np.random.Generator,
               most: int | None = None) -> list[np.ndarray]:
    """``bags`` sorted draws without replacement of ``round(fraction * count)`` of ``range(count)`` (at least
    3, and at least one row left out), or of ``most`` where that is fewer."""
    size = min(max(3, int(round(fraction * count))), count - 1)
    if most is not None:
        size = max(3, min(size, most))
    return [np.sort(rng.choice(count, size=size, replace=False)) for _ in range(bags)]


@dataclass(frozen=True)
class OutOfBag:
    """A member set judged out of bag: the R^2 and Kendall tau-b of the out-of-bag predictions against the
    labels' ranks, over the rows left out at least once, and the bagged model (the subsamples' mean)."""

    r2: float
    kendall: float
    model: RidgeModel


class BaggedRidge:
    """Ridge fits on fixed subsamples (``bags``, row indices) of members that start with the same ``fixed`` ones:
    what the fixed members give every fit (:func:`fixed_blocks`) is computed once, each set of ``extra`` members is
    fitted with it (:func:`ridges_with`; :func:`ridge_loo` where the blocks do not fit)."""

    def __init__(self, fixed: np.ndarray, targets: np.ndarray, bags: Sequence[np.ndarray],
                 alphas: Sequence[float] = RIDGE_ALPHAS) -> None:
        self.fixed = np.asarray(fixed, dtype=np.float64)
        self.targets = np.asarray(targets, dtype=np.float64)
        self.bags, self.alphas = [np.asarray(rows) for rows in bags], tuple(alphas)
        same_size = len({len(rows) for rows in self.bags}) == 1
        self.blocks = fixed_blocks(self.fixed[self.bags], self.targets[self.bags]) if same_size else None
        self.left_out = np.ones((len(self.targets), len(self.bags)))  # row by subsample: 1 where left out
        for index, rows in enumerate(self.bags):
            self.left_out[rows, index] = 0.0

    def ridges(self, extra: np.ndarray | None = None) -> list[RidgeModel]:
        """One ridge of the fixed members and ``extra`` (rows by members, every row; None: none) per subsample."""
        extra = np.zeros((len(self.targets), 0)) if extra is None else np.asarray(extra, dtype=np.float64)
        if self.blocks is not None:
            return ridges_with(self.blocks, extra[self.bags], self.alphas)
        features = np.hstack([self.fixed, extra])
        return [ridge_loo(features[rows], self.targets[rows], self.alphas) for rows in self.bags]

    def fit(self, extra: np.ndarray | None = None) -> tuple[RidgeModel, np.ndarray]:
        """The subsamples' mean model (:meth:`ridges`) and each row's mean out-of-bag prediction (NaN for a row no
        subsample left out)."""
        models = self.ridges(extra)
        weights = np.array([model.weights for model in models])
        intercepts = np.array([model.intercept for model in models])
        features = self.fixed if extra is None else np.hstack([self.fixed, extra])
        total = ((features @ weights.T + intercepts) * self.left_out).sum(axis=1)
        seen = self.left_out.sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            predictions = np.where(seen > 0, total / np.maximum(seen, 1), np.nan)
        return RidgeModel(weights.mean(axis=0), float(intercepts.mean()), math.nan), predictions

    def judge(self, extra: np.ndarray | None = None) -> OutOfBag:
        """The out-of-bag judgement of the fixed members and ``extra`` as predictors of the targets
        (:class:`OutOfBag`)."""
        model, predictions = self.fit(extra)
        keep = np.isfinite(predictions)
        if keep.sum() < 3:
            return OutOfBag(math.nan, math.nan, model)
        truth = self.targets[keep]
        spread = float(((truth - truth.mean()) ** 2).sum())
        r2 = 1.0 - float(((truth - predictions[keep]) ** 2).sum()) / spread if spread > 0 else math.nan
        return OutOfBag(r2, kendall_or_zero(predictions[keep], truth), model)


def out_of_bag(features: np.ndarray, targets: np.ndarray, bags: Sequence[np.ndarray],
               alphas: Sequence[float] = RIDGE_ALPHAS) -> OutOfBag:
    """The out-of-bag judgement of ``features`` as predictors of ``targets`` (:class:`OutOfBag`)."""
    return BaggedRidge(features, targets, bags, alphas).judge()
