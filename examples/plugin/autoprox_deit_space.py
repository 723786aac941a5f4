"""A DeiT-style search space as an autoprox plug-in: the complete example of docs/spaces.md.

What a declarative family cannot say is why one writes a plug-in: here the number of heads
follows the width (64 channels per head, as in DeiT), and the depth is the length of the
per-block MLP ratios. Install the folder (``pip install -e examples/plugin``) and
``autoprox spaces`` lists ``deit-example``; ``autoprox vit-search --space deit-example``
samples it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, ClassVar

from autoprox.core.errors import ArchitectureError
from autoprox.spaces.base import SearchSpace, fmt_set, is_int, is_number

WIDTHS = (192, 384, 576)  # heads = width / 64
DEPTHS = (6, 8, 10, 12)
RATIOS = (2.0, 3.0, 4.0)  # one per block
PATCH, CHANNELS, TOKENS = 16, 3, 197  # 14 x 14 patches of a 224 x 224 image, and the class token


@dataclass(frozen=True)
class DeiTArch:
    """A width and one MLP ratio per block (the depth is their number)."""

    width: int
    mlp_ratio: tuple[float, ...]

    space: ClassVar[str] = "deit-example"  # every record names its space

    @property
    def heads(self) -> int:
        return self.width // 64


class DeiTSpace(SearchSpace):
    name = "deit-example"
    summary = "DeiT-style ViT: width 192/384/576 with 64-channel heads, 6-12 blocks, MLP ratio 2/3/4 per block"
    markers = ("width",)  # configs with this key are this space's

    # --- records: config <-> record, with errors that name the field
    def parse(self, config: Any) -> DeiTArch:
        if isinstance(config, DeiTArch):
            return config
        if not isinstance(config, dict) or set(config) != {"width", "mlp_ratio"}:
            raise ArchitectureError(f"deit-example arch: keys must be width and mlp_ratio, got {config!r}")
        width, ratios = config["width"], config["mlp_ratio"]
        if not is_int(width) or width not in WIDTHS:
            raise ArchitectureError(f"deit-example arch: width={width!r} not in {fmt_set(WIDTHS)}")
        if not isinstance(ratios, (list, tuple)) or len(ratios) not in DEPTHS:
            raise ArchitectureError(f"deit-example arch: mlp_ratio needs one value per block, {fmt_set(DEPTHS)} blocks")
        for i, ratio in enumerate(ratios):
            if not is_number(ratio) or float(ratio) not in RATIOS:
                raise ArchitectureError(f"deit-example arch: mlp_ratio[{i}]={ratio!r} not in {fmt_set(RATIOS)}")
        return DeiTArch(width, tuple(float(r) for r in ratios))

    def to_config(self, arch: DeiTArch) -> dict[str, Any]:
        return {"width": arch.width, "mlp_ratio": list(arch.mlp_ratio)}

    # --- counts, without building the network
    def blocks(self, arch: DeiTArch) -> list[tuple[int, int, int]]:
        return [(arch.width, arch.heads, int(arch.width * r)) for r in arch.mlp_ratio]

    def count_params(self, arch: DeiTArch, num_classes: int = 100) -> int:
        d = arch.width
        embed = CHANNELS * PATCH * PATCH * d + d + d + TOKENS * d  # patch conv, class token, positions
        blocks = sum(4 * d + 3 * d * d + 3 * d + d * d + d + 2 * d * h + h + d for _, _, h in self.blocks(arch))
        return embed + blocks + 2 * d + d * num_classes + num_classes

    def count_macs(self, arch: DeiTArch, num_classes: int = 100) -> int:
        d, n = arch.width, TOKENS
        embed = (TOKENS - 1) * d * CHANNELS * PATCH * PATCH
        blocks = sum(n * (4 * d * d + 2 * d * h) + 2 * n * n * d for _, _, h in self.blocks(arch))
        return embed + blocks + d * num_classes

    # --- sampling: draw() with the given rng only; budgets come from SearchSpace.sample
    def draw(self, rng: random.Random) -> DeiTArch:
        width, depth = rng.choice(WIDTHS), rng.choice(DEPTHS)
        return DeiTArch(width, tuple(rng.choice(RATIOS) for _ in range(depth)))

    def extremes(self) -> tuple[DeiTArch, DeiTArch]:
        return (DeiTArch(min(WIDTHS), (min(RATIOS),) * min(DEPTHS)),
                DeiTArch(max(WIDTHS), (max(RATIOS),) * max(DEPTHS)))

    def choices(self) -> dict[str, str]:
        return {"width": f"{fmt_set(WIDTHS)}, heads = width / 64", "depth": fmt_set(DEPTHS),
                "mlp_ratio": f"{fmt_set(RATIOS)} per block"}

    # --- the network, with timm's module names (blocks.N.attn.qkv, ..., mlp.act)
    def build_model(self, arch: DeiTArch, num_classes: int = 100):
        import torch
        from torch import nn

        from autoprox.networks.models import LN_EPS, Block

        class DeiT(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                d = arch.width
                self.patch_embed = nn.Conv2d(CHANNELS, d, kernel_size=PATCH, stride=PATCH)
                self.cls_token = nn.Parameter(torch.zeros(1, 1, d))
                self.pos_embed = nn.Parameter(torch.zeros(1, TOKENS, d))
                self.blocks = nn.ModuleList(Block(d, arch.heads, r) for r in arch.mlp_ratio)
                self.norm = nn.LayerNorm(d, eps=LN_EPS)
                self.head = nn.Linear(d, num_classes)
                nn.init.trunc_normal_(self.cls_token, std=0.02)
                nn.init.trunc_normal_(self.pos_embed, std=0.02)

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                x = self.patch_embed(x).flatten(2).transpose(1, 2)
                x = torch.cat((self.cls_token.expand(x.shape[0], -1, -1), x), dim=1) + self.pos_embed
                for block in self.blocks:
                    x = block(x)
                return self.head(self.norm(x[:, 0]))

        return DeiT()
