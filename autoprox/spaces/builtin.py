"""The built-in spaces, registered as ordinary plug-ins when :mod:`autoprox.spaces` is imported.

All four are declarative families (:mod:`autoprox.spaces.family`): one implementation of
validation, counts, sampling and networks for every space.

* ``autoformer`` and ``pit``: the two spaces of ViT-Bench-101, as docs/spaces.md
  describes them (:data:`AUTOFORMER_TI`, :data:`PIT`). They read and write the benchmark's
  configs as they are (:class:`BenchFamily`: its keys in its order, a cache key of the config
  alone, draws in the order of its keys), so that the statistics cache, the committed runs and
  same-seed samples are what they were when these spaces had record classes of their own.
* ``autoformer-s`` and ``autoformer-b``: AutoFormer's Small and Base spaces (Chen et al.,
  ICCV 2021). Their choices are AutoFormer's supernet configs;
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

import itertools
import random
from collections.abc import Mapping, Sequence
from typing import Any

from autoprox.spaces.base import SearchSpace
from autoprox.spaces.family import FamilyArch, FamilySpace
from autoprox.spaces.registry import register_space

__all__ = ["AUTOFORMER_B", "AUTOFORMER_B_SPACE", "AUTOFORMER_S", "AUTOFORMER_S_SPACE", "AUTOFORMER_TI",
           "AUTOFORMER_TI_SPACE", "PIT", "PIT_SPACE", "BenchFamily"]

#: AutoFormer-Ti of ViT-Bench-101: one stage, per-block heads and MLP ratio, attention width = hidden_dim.
AUTOFORMER_TI = {
    "name": "autoformer",
    "description": "AutoFormer-Ti of ViT-Bench-101 (per-block heads and MLP ratio; docs/spaces.md)",
    "patch_size": 16, "class_token": True, "position_embedding": "tokens", "classifier": "mean",
    "init": "trunc_normal",
    "choices": {
        "hidden_dim": [192, 216, 240],
        "depth": [12, 13, 14],
        "num_heads": {"values": [3, 4], "per": "block"},
        "mlp_ratio": {"values": [3.5, 4.0], "per": "block"},
    },
}

#: PiT of ViT-Bench-101: three stages with pooling, width = base_dim x the stage's heads, heads non-decreasing.
PIT = {
    "name": "pit",
    "description": "PiT of ViT-Bench-101 (three stages with pooling; docs/spaces.md)",
    "patch_size": 16, "patch_stride": 8, "class_token": True, "position_embedding": "map", "classifier": "token",
    "init": "default", "stages": 3,
    "choices": {
        "base_dim": {"values": [16, 24, 32, 40], "per": "network"},
        "mlp_ratio": {"values": [2, 4, 6, 8], "per": "network"},
        "depth": {"values": [[1, 2, 3], [4, 6, 8], [2, 4, 6]]},
        "num_heads": {"values": [2, 4, 8], "non_decreasing": True},
    },
}


class BenchFamily(FamilySpace):
    """A space of ViT-Bench-101 as a family that reads and writes the benchmark's configs as they are.

    Parameters
    ----------
    definition : mapping
        The family (:mod:`autoprox.spaces.family`).
    keys : sequence of str
        The config's keys in the benchmark's order: :meth:`to_config` writes them so, and
        :meth:`draw` draws them so (the draws of the record classes these spaces had before).
    """

    def __init__(self, definition: Mapping, keys: Sequence[str]) -> None:
        super().__init__(definition, source="autoprox.spaces.builtin")
        if sorted(keys) != sorted(self.keys):
            raise ValueError(f"{self.name}: keys {list(keys)} are not the family's {list(self.keys)}")
        self.keys = tuple(keys)

    def arch_key(self, arch: FamilyArch) -> str:
        """The config alone (no definition digest): the statistics cache's keys of these spaces."""
        return SearchSpace.arch_key(self, arch)

    def draw(self, rng: random.Random) -> FamilyArch:
        """Every choice uniform, drawn in the order of the config's keys: a choice made once, one
        value per stage, one valid tuple of the non-decreasing ones at once, or one value per block
        (after the depth)."""
        config: dict[str, Any] = {}
        stage_of: list[int] | None = None
        for key in self.keys:
            choice = self.choice[key]
            if choice.per == "network" or (choice.per == "stage" and self.stages == 1):
                config[key] = rng.choice(choice.values[0])
            elif choice.per == "stage" and choice.non_decreasing:
                valid = [t for t in itertools.product(*choice.values) if list(t) == sorted(t)]
                config[key] = list(rng.choice(valid))
            elif choice.per == "stage":
                config[key] = [rng.choice(values) for values in choice.values]
            else:
                if stage_of is None:
                    raise ValueError(f"{self.name}: a choice per block is drawn after the depth")
                config[key] = [rng.choice(choice.values[s]) for s in stage_of]
            if key == "depth":
                depths = config[key] if isinstance(config[key], list) else [config[key]] * self.stages
                stage_of = [s for s, n in enumerate(depths) for _ in range(n)]
        return self.parse(config)


AUTOFORMER_TI_SPACE = register_space(BenchFamily(AUTOFORMER_TI, ("hidden_dim", "depth", "mlp_ratio", "num_heads")))
PIT_SPACE = register_space(BenchFamily(PIT, ("base_dim", "mlp_ratio", "depth", "num_heads")))
#: The names the ``autoprox.spaces`` entry points of installs made before these spaces were families give.
AutoFormerTiSpace, PiTSpace = AUTOFORMER_TI_SPACE, PIT_SPACE


def _autoformer_supernet(size: str, embed_dims: list[int], depths: list[int], heads: list[int]) -> dict:
    """The space of AutoFormer's supernet-``size`` config (Chen et al. 2021): S and B differ only in their
    embedding widths, depths and heads per block."""
    return {
        "name": f"autoformer-{size.lower()}",
        "description": f"AutoFormer-{size} (Chen et al. 2021): embed {'/'.join(map(str, embed_dims))}, depth "
                       f"{depths[0]}-{depths[-1]}, per-block heads {'/'.join(map(str, heads))} and MLP ratio "
                       "3/3.5/4; head dim 64, relative position",
        "patch_size": 16, "class_token": True, "position_embedding": "tokens", "classifier": "mean",
        "init": "trunc_normal", "attention_head_dim": 64, "relative_position": 14,
        "choices": {
            "embed_dim": embed_dims,
            "depth": depths,
            "num_heads": {"values": heads, "per": "block"},
            "mlp_ratio": {"values": [3.0, 3.5, 4.0], "per": "block"},
        },
    }


#: AutoFormer-Small's space (AutoFormer's supernet-S config).
AUTOFORMER_S = _autoformer_supernet("S", [320, 384, 448], [12, 13, 14], [5, 6, 7])
#: AutoFormer-Base's space (AutoFormer's supernet-B config).
AUTOFORMER_B = _autoformer_supernet("B", [528, 576, 624], [14, 15, 16], [8, 9, 10])

AUTOFORMER_S_SPACE = register_space(FamilySpace(AUTOFORMER_S, source="autoprox.spaces.builtin"))
AUTOFORMER_B_SPACE = register_space(FamilySpace(AUTOFORMER_B, source="autoprox.spaces.builtin"))
