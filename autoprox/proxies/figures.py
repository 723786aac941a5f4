"""Figures of a proxy's scores: correlations per target, the JCM, and the beyond-size report.

Pure functions of scores, accuracies and architectures: the fitness of a search, the
ranking table and every report read them from here.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np

from autoprox.core.correlation import correlate, jcm
from autoprox.spaces.descriptors import descriptor_columns


def figures(scores: np.ndarray | Mapping[int, np.ndarray], accuracies: Mapping[str, np.ndarray],
            targets: Sequence[str], target_classes: Mapping[str, int] | None = None,
            weights: Mapping[str, float] | None = None) -> dict:
    """Per-target Kendall/Spearman/Pearson and the JCM of ``scores``.

    ``scores`` is one array, or a mapping class count -> array with ``target_classes``
    saying which one each target uses.
    """
    per_target = {}
    for target in targets:
        values = scores if isinstance(scores, np.ndarray) else scores[target_classes[target]]
        per_target[target] = correlate(values, accuracies[target])
    kendalls = {t: per_target[t]["kendall"] for t in targets}
    return {"targets": per_target, "jcm": jcm(kendalls, weights)}


def nan_to_none(value: object) -> object:
    """``value`` with NaN floats (also inside dicts) as ``None``, for strict JSON."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: nan_to_none(v) for k, v in value.items()}
    return value


def coarse_bar(columns, accuracies) -> dict:
    """The bar for one target: the best of :data:`BAR_DESCRIPTORS` (``columns`` from
    :func:`descriptor_columns`) by Kendall with ``accuracies``.

    Architectures whose accuracy is not measured (NaN) are left out. Returns
    ``{"descriptor", "kendall", "n"}``; a NaN Kendall never wins over a defined one.
    """
    import numpy as np

    acc = np.asarray(accuracies, dtype=np.float64)
    keep = ~np.isnan(acc)
    bars = {name: _kendall(columns[name][keep], acc[keep]) for name in BAR_DESCRIPTORS}
    name = max(bars, key=lambda n: (bars[n] if bars[n] == bars[n] else -2.0))
    return {"descriptor": name, "kendall": bars[name], "n": int(keep.sum())}


def beyond_size(scores, archs, accuracies, targets) -> dict:
    """Does a proxy know more than size? Per target, on the given architectures:

    - ``kendall``: the proxy's Kendall with the target;
    - ``kendall_with_params`` / ``kendall_with_depth``: the proxy's own Kendall with the
      parameter count and with the depth (near 1 means size or depth in disguise);
    - ``partial_given_params`` / ``partial_given_depth``: its partial Kendall with the
      target given the parameter count / the depth (what it adds beyond them);
    - ``bar``: the best coarse descriptor for that target (parameter count, depth, width,
      multiply-accumulates) and its Kendall: the figure the proxy has to clear.

    Architectures whose accuracy for a target is not measured are left out of it.
    """
    import numpy as np

    from autoprox.core.correlation import partial_kendall

    scores = np.asarray(scores, dtype=np.float64)
    columns = descriptor_columns(archs)
    report = {}
    for target in targets:
        acc = np.asarray(accuracies[target], dtype=np.float64)
        keep = ~np.isnan(acc)
        s, a = scores[keep], acc[keep]
        params, depth = columns["params"][keep], columns["depth"][keep]
        bar = coarse_bar(columns, acc)
        kendall = _kendall(s, a)
        report[target] = {
            "kendall": kendall,
            "kendall_with_params": _kendall(s, params),
            "kendall_with_depth": _kendall(s, depth),
            "partial_given_params": partial_kendall(s, a, params),
            "partial_given_depth": partial_kendall(s, a, depth),
            "bar": {"descriptor": bar["descriptor"], "kendall": bar["kendall"]},
            "beats_bar": bool(kendall > bar["kendall"]),
            "n": int(keep.sum()),
        }
    return report


def _kendall(x, y) -> float:
    from autoprox.core.correlation import correlate

    return correlate(x, y)["kendall"]


#: The coarse descriptors a proxy must beat, per target ("the bar").
BAR_DESCRIPTORS = ("params", "depth", "width", "macs")
