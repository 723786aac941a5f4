"""Coarse architecture descriptors: size, depth, width, heads, MLP ratio.

They are the bar a proxy has to clear (on this benchmark the parameter count, the depth
or the width alone rank architectures well), and they can enter genomes as
architecture-level scalar terminals, so that a proxy can be "size plus what the
statistics add". All are computed from the architecture config, never from a model.
"""

from __future__ import annotations

import math

from autoprox.spaces.architectures import count_macs, count_params, transformer_widths

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






def descriptor_columns(archs) -> dict:
    """Every descriptor of ``archs`` as a column: name -> float array, one value per architecture."""
    import numpy as np

    described = [describe(a) for a in archs]
    return {name: np.array([d[name] for d in described], dtype=np.float64) for name in DESCRIPTORS}


#: What each descriptor is in each built-in space: the same formula (:func:`describe`) reads
#: different things where the spaces are built differently. A multi-space search accepts the
#: architecture terminals only where every space it searches gives each descriptor one meaning
#: (:func:`terminal_differences`).
TERMINAL_MEANINGS = {
    "autoformer": {
        "params": "parameter count (100-class head)",
        "macs": "multiply-accumulates of one 224x224 image (197 tokens in every block)",
        "depth": "number of transformer blocks (12 to 16)",
        "width": "the embedding width, one for every block (192 to 240)",
        "heads": "mean number of attention heads over blocks (each block 3 or 4)",
        "mlp_ratio": "mean MLP expansion ratio over blocks (each block 3.5 to 4)",
    },
    "pit": {
        "params": "parameter count (100-class head)",
        "macs": "multiply-accumulates of one 224x224 image (token count shrinks by stage)",
        "depth": "number of transformer blocks over the three stages",
        "width": "mean over blocks of the stage width base_dim x heads (the width doubles at each pooling)",
        "heads": "mean over blocks of the stage's heads (the heads double at each pooling)",
        "mlp_ratio": "the one MLP expansion ratio of every block",
    },
}


def terminal_meanings(space: str) -> dict[str, str]:
    """What each descriptor means in ``space`` (:data:`TERMINAL_MEANINGS`; a space outside it: the
    generic meaning of :data:`DESCRIPTORS`, as its blocks give it)."""
    known = TERMINAL_MEANINGS.get(space)
    if known is not None:
        return dict(known)
    return {name: f"{meaning} (as space {space}'s blocks give it)" for name, meaning in DESCRIPTORS.items()}


def terminal_differences(spaces) -> list[str]:
    """The descriptors whose meaning differs between ``spaces``; empty when they define every one alike."""
    meanings = [terminal_meanings(s) for s in spaces]
    return [name for name in DESCRIPTORS if len({m[name] for m in meanings}) > 1]

