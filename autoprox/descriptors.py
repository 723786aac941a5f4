"""Coarse architecture descriptors: size, depth, width, heads, MLP ratio.

They are the bar a proxy has to clear (on this benchmark the parameter count, the depth
or the width alone rank architectures well), and they can enter genomes as
architecture-level scalar terminals, so that a proxy can be "size plus what the
statistics add". All are computed from the architecture config, never from a model.
"""

from __future__ import annotations

import math

from autoprox.spaces import count_macs, count_params, transformer_widths

#: Descriptor name -> meaning.
DESCRIPTORS = {
    "params": "parameter count (100-class head)",
    "macs": "multiply-accumulates of one 224x224 image",
    "depth": "number of transformer blocks",
    "width": "mean embedding width over blocks",
    "heads": "mean number of attention heads over blocks",
    "mlp_ratio": "mean MLP expansion ratio over blocks",
}

#: Prefix of the genome terminals built from descriptors (``A_params``, ``A_log_depth``, ...).
TERMINAL_PREFIX = "A_"


def describe(arch, num_classes: int = 100) -> dict[str, float]:
    """Every descriptor of ``arch``."""
    blocks = transformer_widths(arch)
    depth = len(blocks)
    return {
        "params": float(count_params(arch, num_classes)),
        "macs": float(count_macs(arch, num_classes)),
        "depth": float(depth),
        "width": sum(d for d, _, _ in blocks) / depth,
        "heads": sum(h for _, h, _ in blocks) / depth,
        "mlp_ratio": sum(hidden / d for d, _, hidden in blocks) / depth,
    }


def terminal_names() -> list[str]:
    """Genome terminal names: each descriptor and its natural logarithm."""
    names = []
    for name in DESCRIPTORS:
        names += [f"{TERMINAL_PREFIX}{name}", f"{TERMINAL_PREFIX}log_{name}"]
    return names


def terminal_values(arch, num_classes: int = 100) -> dict[str, float]:
    """Values of :func:`terminal_names` for ``arch``."""
    values = {}
    for name, value in describe(arch, num_classes).items():
        values[f"{TERMINAL_PREFIX}{name}"] = value
        values[f"{TERMINAL_PREFIX}log_{name}"] = math.log(value)
    return values


#: The coarse descriptors a proxy must beat, per target ("the bar").
BAR_DESCRIPTORS = ("params", "depth", "width", "macs")


def _kendall(x, y) -> float:
    from autoprox.correlation import correlate

    return correlate(x, y)["kendall"]


def descriptor_columns(archs) -> dict:
    """Every descriptor of ``archs`` as a column: name -> float array, one value per architecture."""
    import numpy as np

    described = [describe(a) for a in archs]
    return {name: np.array([d[name] for d in described], dtype=np.float64) for name in DESCRIPTORS}


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

    from autoprox.ranking import partial_kendall

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
