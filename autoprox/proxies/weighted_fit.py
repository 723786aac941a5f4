"""Fitting the weights of a weighted formula: ridge least squares on ranks, bagged, judged out of bag.

The weights of a weighted formula (:class:`autoprox.genome.weighted.WeightedFormula`) are fitted on the
labelled rows of a table: the members' values (the plain columns' centred ranks, the evolved terms) predict
the labels' ranks by ridge regression, each member standardised on the rows fitted so that one penalty
treats them alike, the penalty chosen among :data:`RIDGE_ALPHAS` by the closed-form leave-one-out error.

A search compares many sets of terms on few rows, so a set is judged **out of bag**: on ``bags`` seeded
subsamples of the labelled rows (without replacement), a ridge fitted on each subsample predicts the rows it
left out; each row's out-of-bag prediction is the mean of those, and the fitness is their R^2 against the
labels' ranks (:func:`out_of_bag`). The proxy kept averages the subsamples' weights (bagging: the mean of
linear fits is one linear fit, so the proxy stays one weighted formula).

Everything here is a pure function of arrays; randomness comes from the generator passed in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

__all__ = ["MIN_COVERAGE", "RIDGE_ALPHAS", "WIDE_MEMBERS", "OutOfBag", "RidgeModel", "bagged_ridge", "label_ranks", "out_of_bag",
           "ridge_loo", "subsamples", "usable_columns"]

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
    """A linear model on the members' raw values: ``intercept + features @ weights``."""

    weights: np.ndarray
    intercept: float
    alpha: float

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
    best_error, best_alpha = math.inf, float(alphas[0])
    for alpha, error in zip(penalties, errors):
        if error < best_error - 1e-12:
            best_error, best_alpha = float(error), float(alpha)
    if wide:  # the same solution without a members-by-members system
        solved = standard.T @ (left @ (projected / (squared + best_alpha)))
    elif standard.shape[1] > WIDE_MEMBERS:
        solved = right.T @ (singular / (squared + best_alpha) * projected)
    else:
        gram = standard.T @ standard + best_alpha * np.eye(standard.shape[1])
        solved = np.linalg.solve(gram, standard.T @ centred)
    weights[live] = solved / scale[live]
    return RidgeModel(weights, target_mean - float(mean @ weights), best_alpha)


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


def bagged_ridge(features: np.ndarray, targets: np.ndarray, bags: Sequence[np.ndarray],
                 alphas: Sequence[float] = RIDGE_ALPHAS) -> tuple[RidgeModel, np.ndarray]:
    """One ridge per subsample of ``bags`` (row indices of ``features``); returns their mean model and each row's
    mean out-of-bag prediction (NaN for a row no subsample left out)."""
    count = len(targets)
    total = np.zeros(count)
    seen = np.zeros(count)
    weights, intercepts = [], []
    for rows in bags:
        model = ridge_loo(features[rows], targets[rows], alphas)
        weights.append(model.weights)
        intercepts.append(model.intercept)
        out = np.ones(count, dtype=bool)
        out[rows] = False
        total[out] += model.predict(features[out])
        seen[out] += 1
    with np.errstate(invalid="ignore", divide="ignore"):
        predictions = np.where(seen > 0, total / np.maximum(seen, 1), np.nan)
    mean = RidgeModel(np.mean(weights, axis=0), float(np.mean(intercepts)), math.nan)
    return mean, predictions


def out_of_bag(features: np.ndarray, targets: np.ndarray, bags: Sequence[np.ndarray],
               alphas: Sequence[float] = RIDGE_ALPHAS) -> OutOfBag:
    """The out-of-bag judgement of ``features`` as predictors of ``targets`` (:class:`OutOfBag`)."""
    from scipy.stats import kendalltau  # on first use: --help imports this module

    model, predictions = bagged_ridge(features, targets, bags, alphas)
    keep = np.isfinite(predictions)
    if keep.sum() < 3:
        return OutOfBag(math.nan, math.nan, model)
    truth = targets[keep]
    spread = float(((truth - truth.mean()) ** 2).sum())
    r2 = 1.0 - float(((truth - predictions[keep]) ** 2).sum()) / spread if spread > 0 else math.nan
    tau = kendalltau(predictions[keep], truth).statistic if np.ptp(predictions[keep]) > 0 else 0.0
    return OutOfBag(r2, float(tau) if math.isfinite(tau) else 0.0, model)
