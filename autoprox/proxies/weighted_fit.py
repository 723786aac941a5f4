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
import scipy.linalg
from scipy.stats import kendalltau, rankdata

__all__ = ["MIN_COVERAGE", "RIDGE_ALPHAS", "WIDE_MEMBERS", "BaggedRidge", "FixedBlock", "OutOfBag", "RidgeModel",
           "fixed_block", "label_ranks", "out_of_bag", "ridge_loo", "ridge_loo_with", "subsamples", "usable_columns"]

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
class FixedBlock:
    """What every ridge on one subsample shares when its members start with the same fixed ones (a table search's
    plain columns and basis): their mean, scale and standardised values on the subsample's rows, and the
    eigendecomposition of their rows' Gram matrix with the centred targets in its coordinates (:func:`fixed_block`).
    """

    mean: np.ndarray
    scale: np.ndarray
    live: np.ndarray
    standard: np.ndarray
    centred: np.ndarray
    target_mean: float
    squared: np.ndarray
    left: np.ndarray
    projected: np.ndarray


def fixed_block(features: np.ndarray, targets: np.ndarray) -> FixedBlock | None:
    """The :class:`FixedBlock` of ``features`` (rows by members) and ``targets`` on the same rows; None where the
    block does not fit :func:`ridge_loo_with` (fewer than 3 rows, or no more live members than rows: a ridge of them
    is not wide whatever is added)."""
    features = np.asarray(features, dtype=np.float64)
    targets = np.asarray(targets, dtype=np.float64)
    count = features.shape[0]
    mean, scale = features.mean(axis=0), features.std(axis=0)
    live = scale > 1e-12
    if count < 3 or live.sum() <= count:
        return None
    standard = (features[:, live] - mean[live]) / scale[live]
    target_mean = float(targets.mean())
    centred = targets - target_mean
    squared, left = scipy.linalg.eigh(standard @ standard.T, check_finite=False)
    return FixedBlock(mean, scale, live, standard, centred, target_mean, np.maximum(squared, 0.0), left,
                      left.T @ centred)


def ridge_loo_with(block: FixedBlock, extra: np.ndarray, alphas: Sequence[float] = RIDGE_ALPHAS) -> RidgeModel:
    """:func:`ridge_loo` of the block's members followed by ``extra`` (the same rows by more members), to float
    rounding, without a new eigendecomposition: the extra members' rows' Gram matrix is a low-rank update of the
    block's, so the penalised inverse comes from the block's eigenvectors by the Woodbury identity, for every
    penalty at once. Weights: the block's members, then ``extra``'s."""
    extra = np.asarray(extra, dtype=np.float64)
    count = len(block.centred)
    mean, scale = extra.mean(axis=0), extra.std(axis=0)
    live = scale > 1e-12
    standard = (extra[:, live] - mean[live]) / scale[live]
    penalties = np.asarray(alphas, dtype=np.float64)
    inverse = 1.0 / (block.squared + penalties[:, None])  # one row per penalty: (G + alpha I)^-1 in the eigenbasis
    solved = inverse * block.projected  # (G + alpha I)^-1 y in the eigenbasis, then corrected for the extra members
    diagonal = inverse @ (block.left ** 2).T  # the diagonal of (G + alpha I)^-1 on the rows
    if standard.shape[1]:
        coordinates = block.left.T @ standard
        scaled = inverse[:, :, None] * coordinates
        capacitance = np.linalg.inv(np.eye(standard.shape[1]) + coordinates.T @ scaled)  # symmetric
        solved = solved - (scaled @ (capacitance @ (coordinates.T @ solved[:, :, None])))[:, :, 0]
        on_rows = block.left @ scaled
        diagonal = diagonal - ((on_rows @ capacitance) * on_rows).sum(axis=2)
    dual = solved @ block.left.T  # (G + alpha I)^-1 y on the rows: the residual is alpha times it
    residual = penalties[:, None] * dual / np.maximum(penalties[:, None] * diagonal - 1.0 / count, 1e-12)
    errors = np.einsum("ij,ij->i", residual, residual)
    best = _least_error(errors)
    weights = np.zeros(len(block.mean) + extra.shape[1])
    fixed_weights, extra_weights = weights[:len(block.mean)], weights[len(block.mean):]
    fixed_weights[block.live] = block.standard.T @ dual[best] / block.scale[block.live]
    extra_weights[live] = standard.T @ dual[best] / scale[live]
    intercept = block.target_mean - float(block.mean @ fixed_weights) - float(mean @ extra_weights)
    return RidgeModel(weights, intercept, float(alphas[best]), float(errors[best]))


def _least_error(errors: np.ndarray) -> int:
    """The index of the penalty of least leave-one-out error (ties within 1e-12: the first)."""
    best, best_error = 0, math.inf
    for index, error in enumerate(errors):
        if error < best_error - 1e-12:
            best, best_error = index, float(error)
    return best


def subsamples(count: int, bags: int, fraction: float, rng: np.random.Generator) -> list[np.ndarray]:
    """``bags`` sorted draws without replacement of ``round(fraction * count)`` of ``range(count)`` (at least
    3, and at least one row left out)."""
    size = min(max(3, int(round(fraction * count))), count - 1)
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
    what the fixed members give every fit on a subsample (:func:`fixed_block`) is computed once, each set of
    ``extra`` members is fitted with it (:func:`ridge_loo_with`; :func:`ridge_loo` where the block does not fit)."""

    def __init__(self, fixed: np.ndarray, targets: np.ndarray, bags: Sequence[np.ndarray],
                 alphas: Sequence[float] = RIDGE_ALPHAS) -> None:
        self.fixed = np.asarray(fixed, dtype=np.float64)
        self.targets = np.asarray(targets, dtype=np.float64)
        self.bags, self.alphas = [np.asarray(rows) for rows in bags], tuple(alphas)
        self.blocks = [fixed_block(self.fixed[rows], self.targets[rows]) for rows in self.bags]
        self.outs = [np.setdiff1d(np.arange(len(self.targets)), rows) for rows in self.bags]

    def fit(self, extra: np.ndarray | None = None) -> tuple[RidgeModel, np.ndarray]:
        """One ridge of the fixed members and ``extra`` (rows by members, every row; None: none) per subsample;
        returns their mean model and each row's mean out-of-bag prediction (NaN for a row no subsample left out)."""
        count = len(self.targets)
        extra = np.zeros((count, 0)) if extra is None else np.asarray(extra, dtype=np.float64)
        features = np.hstack([self.fixed, extra])
        total = np.zeros(count)
        seen = np.zeros(count)
        weights, intercepts = [], []
        for rows, out, block in zip(self.bags, self.outs, self.blocks):
            if block is None:
                model = ridge_loo(features[rows], self.targets[rows], self.alphas)
            else:
                model = ridge_loo_with(block, extra[rows], self.alphas)
            weights.append(model.weights)
            intercepts.append(model.intercept)
            total[out] += model.predict(features[out])
            seen[out] += 1
        with np.errstate(invalid="ignore", divide="ignore"):
            predictions = np.where(seen > 0, total / np.maximum(seen, 1), np.nan)
        mean = RidgeModel(np.mean(weights, axis=0), float(np.mean(intercepts)), math.nan)
        return mean, predictions

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
        tau = kendalltau(predictions[keep], truth).statistic if np.ptp(predictions[keep]) > 0 else 0.0
        return OutOfBag(r2, float(tau) if math.isfinite(tau) else 0.0, model)


def out_of_bag(features: np.ndarray, targets: np.ndarray, bags: Sequence[np.ndarray],
               alphas: Sequence[float] = RIDGE_ALPHAS) -> OutOfBag:
    """The out-of-bag judgement of ``features`` as predictors of ``targets`` (:class:`OutOfBag`)."""
    return BaggedRidge(features, targets, bags, alphas).judge()
