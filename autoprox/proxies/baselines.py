"""Descriptor baselines: what a proxy has to beat, chosen on a search part alone.

A baseline ranks architectures by their coarse description (parameter count, depth,
width, ...), never by a network. Each is *chosen* (or fitted) on the search part of a
split and then scores any architectures; the choice is plain JSON, so a protocol can
record what was chosen and score it again without choosing again:

``params``
    the parameter count, the same for every target (nothing is chosen);
``coarse``
    the best coarse descriptor for the target (parameter count, depth, width or MACs,
    :data:`autoprox.proxies.figures.BAR_DESCRIPTORS`), by Kendall on the search part;
``blend``
    a rank-linear model: ridge least squares of the target's ranks on the standardised
    :data:`BLEND_FEATURES`, fitted on the search part.

Baselines are registered with :func:`register_baseline` (name -> fit and score
functions), in the manner of timm's ``@register_model``. :func:`choose_baselines`
is the one place that cuts a benchmark down to its search part before fitting, so no
baseline can see the test part.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np

from autoprox.core.errors import ConfigError
from autoprox.core.registry import Registry
from autoprox.proxies.figures import coarse_bar

#: Features of the rank-linear blend, each a descriptor column or the logarithm of one.
BLEND_FEATURES = ("log_params", "depth", "width", "heads", "mlp_ratio", "log_macs")

#: Ridge term of the blend, relative to standardised features and standardised ranks.
DEFAULT_RIDGE = 0.01

#: A choice: plain JSON saying what a baseline chose or fitted for one target.
Choice = dict
#: Descriptor columns: name -> one value per architecture (see
#: :func:`autoprox.spaces.descriptors.descriptor_columns`).
Columns = Mapping[str, np.ndarray]


@dataclass(frozen=True)
class Baseline:
    """A registered baseline: ``fit(columns, accuracies) -> choice`` on a search part, and
    ``score(choice, columns) -> scores`` on any architectures."""

    name: str
    fit: Callable[[Columns, np.ndarray], Choice]
    score: Callable[[Choice, Columns], np.ndarray]
    description: str


#: Registered baselines, in the order reports show them.
BASELINES: Registry[str, Baseline] = Registry("baseline", unknown=ConfigError)


def register_baseline(name: str, score: Callable[[Choice, Columns], np.ndarray], description: str):
    """Register the decorated ``fit`` function as baseline ``name``, scored by ``score``."""

    def decorate(fit: Callable[[Columns, np.ndarray], Choice]):
        BASELINES.add(name, Baseline(name, fit, score, description))
        return fit

    return decorate


# ------------------------------------------------------------------ single descriptors

def descriptor_scores(choice: Choice, columns: Columns) -> np.ndarray:
    """Scores of a single-descriptor choice: the chosen descriptor's column."""
    return np.asarray(columns[choice["descriptor"]], dtype=np.float64)


@register_baseline("params", descriptor_scores, "parameter count")
def fit_params(columns: Columns, accuracies: np.ndarray) -> Choice:
    """The parameter count: nothing is chosen."""
    return {"descriptor": "params"}


@register_baseline("coarse", descriptor_scores, "best coarse descriptor per target, chosen on the search part")
def fit_coarse(columns: Columns, accuracies: np.ndarray) -> Choice:
    """The coarse descriptor with the highest Kendall on these architectures (see
    :func:`autoprox.proxies.figures.coarse_bar`)."""
    bar = coarse_bar(columns, accuracies)
    return {"descriptor": bar["descriptor"], "search_kendall": bar["kendall"]}


# ------------------------------------------------------------------ the rank-linear blend

def blend_features(columns: Columns, names: Sequence[str] = BLEND_FEATURES) -> np.ndarray:
    """The feature matrix (architectures x ``names``); ``log_X`` is the natural logarithm of column ``X``."""
    features = []
    for name in names:
        if name.startswith("log_"):
            features.append(np.log(np.asarray(columns[name[4:]], dtype=np.float64)))
        else:
            features.append(np.asarray(columns[name], dtype=np.float64))
    return np.column_stack(features)


def fit_rank_blend(features: np.ndarray, accuracies: np.ndarray, ridge: float = DEFAULT_RIDGE,
                   names: Sequence[str] = BLEND_FEATURES) -> Choice:
    """Ridge least squares of the accuracies' ranks on standardised ``features``.

    Rows whose accuracy is NaN are left out. Features are centred and scaled by their
    mean and standard deviation on these rows (a constant feature gets scale 1 and, by
    the ridge term, weight 0); ranks are standardised likewise, so ``ridge`` is on one
    scale whatever the benchmark. Minimises ``mean((r - X b)^2) + ridge * |b|^2``.

    Returns the choice: feature names, centre, scale and coefficients.
    """
    from scipy import stats as sps  # on first use: --help imports this module

    if ridge < 0:
        raise ConfigError(f"the blend's ridge term must be >= 0, got {ridge}")
    x = np.asarray(features, dtype=np.float64)
    y = np.asarray(accuracies, dtype=np.float64)
    keep = ~np.isnan(y)
    x, y = x[keep], y[keep]
    center = x.mean(axis=0) if len(x) else np.zeros(x.shape[1])
    scale = x.std(axis=0) if len(x) else np.ones(x.shape[1])
    scale = np.where(scale > 0, scale, 1.0)
    coef = np.zeros(x.shape[1])
    if len(y) >= 2 and np.ptp(y) > 0:
        ranks = sps.rankdata(y)
        target = (ranks - ranks.mean()) / ranks.std()
        z = (x - center) / scale
        gram = z.T @ z / len(y) + ridge * np.eye(z.shape[1])
        right = z.T @ target / len(y)
        coef = np.linalg.solve(gram, right) if ridge > 0 else np.linalg.lstsq(gram, right, rcond=None)[0]
    return {"features": list(names), "center": center.tolist(), "scale": scale.tolist(),
            "coef": coef.tolist(), "ridge": float(ridge), "n": len(y)}


def blend_scores(choice: Choice, columns: Columns) -> np.ndarray:
    """Scores of a fitted blend on the architectures of ``columns``.

    The weighted sum runs feature by feature in element-wise operations, not as a matrix
    product, so an architecture's score is the same bits whichever architectures it is scored
    with (BLAS may sum one row and many rows in different orders)."""
    z = (blend_features(columns, choice["features"]) - np.asarray(choice["center"])) / np.asarray(choice["scale"])
    total = np.zeros(len(z))
    for column, weight in zip(z.T, np.asarray(choice["coef"], dtype=np.float64)):
        total += column * weight
    return total


@register_baseline("blend", blend_scores, "rank-linear blend of descriptors fitted on the search part")
def fit_blend(columns: Columns, accuracies: np.ndarray) -> Choice:
    """The rank-linear blend of :data:`BLEND_FEATURES` with :data:`DEFAULT_RIDGE`."""
    return fit_rank_blend(blend_features(columns), accuracies)


# ------------------------------------------------------------------ choosing on a split

def _rows(columns: Columns, indices: Sequence[int]) -> dict[str, np.ndarray]:
    rows = list(indices)
    return {name: np.asarray(values, dtype=np.float64)[rows] for name, values in columns.items()}


def choose_baselines(columns: Columns, accuracies: Mapping[str, np.ndarray], search: Sequence[int],
                     targets: Sequence[str], names: Sequence[str] | None = None) -> dict[str, dict[str, Choice]]:
    """Each baseline's choice per target, made on the rows ``search`` alone.

    ``columns`` and ``accuracies`` cover a whole benchmark; only their ``search`` rows
    are passed on to the fitting functions. Returns ``{baseline: {target: choice}}``.
    """
    names = list(BASELINES) if names is None else list(names)
    for name in names:
        BASELINES.lookup(name)
    part = _rows(columns, search)
    rows = list(search)
    return {name: {t: BASELINES[name].fit(part, np.asarray(accuracies[t], dtype=np.float64)[rows]) for t in targets}
            for name in names}


def baseline_scores(name: str, choice: Choice, columns: Columns, indices: Sequence[int] | None = None) -> np.ndarray:
    """Scores of baseline ``name``'s ``choice`` on the rows ``indices`` of ``columns`` (default all)."""
    part = columns if indices is None else _rows(columns, indices)
    return BASELINES[name].score(choice, part)


__all__ = [
    "BASELINES", "BLEND_FEATURES", "DEFAULT_RIDGE", "Baseline", "baseline_scores", "blend_features", "blend_scores",
    "choose_baselines", "descriptor_scores", "fit_blend", "fit_coarse", "fit_params", "fit_rank_blend",
    "register_baseline",
]
