"""The built-in spaces, registered as ordinary plug-ins when :mod:`autoprox.spaces` is imported.

* ``autoformer`` and ``pit``: the two spaces of ViT-Bench-101 (records, exact counts and
  the sampler in :mod:`autoprox.spaces.architectures`, networks as ``shared/spaces.md``
  describes them).
* ``autoformer-s`` and ``autoformer-b``: AutoFormer's Small and Base spaces (Chen et al.,
  ICCV 2021), as declarative families. Their choices are AutoFormer's supernet configs;
  their blocks are AutoFormer's own: q, k and v of width 64 x heads (``change_qkv``: with
  the embedding width as attention width most of their head counts would not divide it,
  e.g. 320 / 6) and relative position tables of distance 14 in every block, on top of the
  absolute position embedding; the classifier reads the mean patch token (``--gp``). With
  these the final AutoFormer-S and -B have 22.9M and 53.7M parameters, AutoFormer's own
  figures (``docs/spaces.md``). Heads of AutoFormer-B: 8, 9 and 10, as in the search space
  of AutoFormer's released supernet-B config (the final -B uses only 9 and 10).

The ``timm`` space (timm models as architectures) registers with :mod:`autoprox.networks`.
"""

from __future__ import annotations

import random
from typing import Any

from autoprox.spaces.architectures import (
    AF_DEPTHS,
    AF_HEADS,
    AF_HIDDEN_DIMS,
    AF_MLP_RATIOS,
    PIT_BASE_DIMS,
    PIT_DEPTHS,
    PIT_HEADS,
    PIT_MLP_RATIOS,
    _draw,
    _extreme_archs,
    _parse_builtin,
    arch_to_config,
    count_macs,
    count_params,
    transformer_widths,
)
from autoprox.spaces.base import SearchSpace, fmt_set
from autoprox.spaces.family import FamilySpace
from autoprox.spaces.registry import register_space

__all__ = ["AUTOFORMER_B", "AUTOFORMER_B_SPACE", "AUTOFORMER_S", "AUTOFORMER_S_SPACE", "AutoFormerTiSpace", "PiTSpace"]


class _BenchSpace(SearchSpace):
    """One of ViT-Bench-101's spaces: everything is in :mod:`autoprox.spaces.architectures`."""

    def parse(self, config):
        return _parse_builtin(config, self.name)

    def to_config(self, arch) -> dict[str, Any]:
        return arch_to_config(arch)

    def blocks(self, arch) -> list[tuple[int, int, int]]:
        return transformer_widths(arch)

    def count_params(self, arch, num_classes: int = 100) -> int:
        return count_params(arch, num_classes)

    def count_macs(self, arch, num_classes: int = 100) -> int:
        return count_macs(arch, num_classes)

    def draw(self, rng: random.Random):
        return _draw(self.name, rng)

    def extremes(self):
        return _extreme_archs(self.name)


@register_space
class AutoFormerTiSpace(_BenchSpace):
    """AutoFormer-Ti of ViT-Bench-101."""

    name = "autoformer"
    summary = "AutoFormer-Ti of ViT-Bench-101 (per-block heads and MLP ratio; shared/spaces.md)"
    markers = ("hidden_dim",)

    def choices(self) -> dict[str, str]:
        return {"hidden_dim": fmt_set(AF_HIDDEN_DIMS), "depth": fmt_set(AF_DEPTHS),
                "num_heads": f"{fmt_set(AF_HEADS)} per block", "mlp_ratio": f"{fmt_set(AF_MLP_RATIOS)} per block",
                "network": "patch 16, class token, mean classifier, attention width = hidden_dim"}


@register_space
class PiTSpace(_BenchSpace):
    """PiT of ViT-Bench-101."""

    name = "pit"
    summary = "PiT of ViT-Bench-101 (three stages with pooling; shared/spaces.md)"
    markers = ("base_dim",)

    def choices(self) -> dict[str, str]:
        return {"base_dim": fmt_set(PIT_BASE_DIMS), "mlp_ratio": fmt_set(PIT_MLP_RATIOS),
                "depth": " / ".join(fmt_set(d) for d in PIT_DEPTHS) + " per stage",
                "num_heads": f"{fmt_set(PIT_HEADS)} per stage, non-decreasing",
                "network": "patch 16 stride 8, class token classifier, width = base_dim x heads"}


#: AutoFormer-Small's space (AutoFormer's supernet-S config).
AUTOFORMER_S = {
    "name": "autoformer-s",
    "description": "AutoFormer-S (Chen et al. 2021): embed 320/384/448, depth 12-14, per-block heads 5/6/7 and "
                   "MLP ratio 3/3.5/4; head dim 64, relative position",
    "patch_size": 16, "class_token": True, "position_embedding": "tokens", "classifier": "mean",
    "init": "trunc_normal", "attention_head_dim": 64, "relative_position": 14,
    "choices": {
        "embed_dim": [320, 384, 448],
        "depth": [12, 13, 14],
        "num_heads": {"values": [5, 6, 7], "per": "block"},
        "mlp_ratio": {"values": [3.0, 3.5, 4.0], "per": "block"},
    },
}

#: AutoFormer-Base's space (AutoFormer's supernet-B config).
AUTOFORMER_B = {
    "name": "autoformer-b",
    "description": "AutoFormer-B (Chen et al. 2021): embed 528/576/624, depth 14-16, per-block heads 8/9/10 and "
                   "MLP ratio 3/3.5/4; head dim 64, relative position",
    "patch_size": 16, "class_token": True, "position_embedding": "tokens", "classifier": "mean",
    "init": "trunc_normal", "attention_head_dim": 64, "relative_position": 14,
    "choices": {
        "embed_dim": [528, 576, 624],
        "depth": [14, 15, 16],
        "num_heads": {"values": [8, 9, 10], "per": "block"},
        "mlp_ratio": {"values": [3.0, 3.5, 4.0], "per": "block"},
    },
}

AUTOFORMER_S_SPACE = register_space(FamilySpace(AUTOFORMER_S, source="autoprox.spaces.builtin"))
AUTOFORMER_B_SPACE = register_space(FamilySpace(AUTOFORMER_B, source="autoprox.spaces.builtin"))
