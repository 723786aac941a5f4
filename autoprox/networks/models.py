"""PyTorch builders for the AutoFormer-Ti and PiT networks of ViT-Bench-101.

Written to match ``shared/spaces.md`` exactly (parameter counts equal
``autoprox.spaces.architectures.count_params``) with timm-style module names, so that
``blocks.0.attn.qkv`` / ``stages.0.blocks.0.mlp.fc1`` mean what they mean in
timm.  There is no dropout or drop-path: zero-cost proxies are scored with
them disabled.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
import torch.nn.functional as F
from torch import nn

from autoprox.core.errors import ArchitectureError
from autoprox.spaces.architectures import (
    AF_STRIDE,
    IN_CHANS,
    PATCH,
    PIT_STRIDE,
    Arch,
    AutoFormerArch,
    PiTArch,
    parse_arch,
    pit_dims,
)

__all__ = [
    "Attention",
    "Mlp",
    "Block",
    "AutoFormerViT",
    "PiT",
    "build_model",
    "transformer_blocks",
]

LN_EPS = 1e-6
INIT_STD = 0.02


class Attention(nn.Module):
    """Multi-head self-attention: one qkv Linear, head_dim = dim // num_heads, proj Linear."""

    def __init__(self, dim: int, num_heads: int) -> None:
        super().__init__()
        if dim % num_heads:
            raise ArchitectureError(f"dim {dim} is not divisible by num_heads {num_heads}")
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=True)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, c = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)  # each (B, heads, N, head_dim)
        x = F.scaled_dot_product_attention(q, k, v)  # softmax(q k^T / sqrt(head_dim)) v
        return self.proj(x.transpose(1, 2).reshape(b, n, c))


class Mlp(nn.Module):
    """fc1 -> GELU -> fc2; ``act`` is a module so hooks can read post-GELU activations."""

    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


class Block(nn.Module):
    """Pre-norm transformer block: x + attn(norm1(x)), then x + mlp(norm2(x))."""

    def __init__(self, dim: int, num_heads: int, mlp_ratio: float) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=LN_EPS)
        self.attn = Attention(dim, num_heads)
        self.norm2 = nn.LayerNorm(dim, eps=LN_EPS)
        self.mlp = Mlp(dim, int(dim * mlp_ratio))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


# --- AutoFormer-Ti -------------------------------------------------------------
class PatchEmbed(nn.Module):
    """Non-overlapping 16x16 patches -> (B, num_patches, dim) tokens."""

    def __init__(self, dim: int, image_size: int = 224) -> None:
        super().__init__()
        self.proj = nn.Conv2d(IN_CHANS, dim, kernel_size=PATCH, stride=AF_STRIDE)
        self.num_patches = ((image_size - PATCH) // AF_STRIDE + 1) ** 2

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x).flatten(2).transpose(1, 2)


class AutoFormerViT(nn.Module):
    """AutoFormer-Ti subnet: class token + 196 patches, mean-pooled patch tokens -> head."""

    def __init__(self, arch: AutoFormerArch, num_classes: int = 100) -> None:
        super().__init__()
        d = arch.hidden_dim
        self.arch = arch
        self.num_classes = num_classes
        self.patch_embed = PatchEmbed(d)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, d))
        self.pos_embed = nn.Parameter(torch.zeros(1, self.patch_embed.num_patches + 1, d))
        self.blocks = nn.ModuleList(
            Block(d, h, r) for h, r in zip(arch.num_heads, arch.mlp_ratio)
        )
        self.norm = nn.LayerNorm(d, eps=LN_EPS)
        self.head = nn.Linear(d, num_classes)
        self._init_weights()

    def _init_weights(self) -> None:
        """Linear: trunc normal 0.02 / bias 0; cls and pos: trunc normal 0.02; conv default."""
        nn.init.trunc_normal_(self.cls_token, std=INIT_STD)
        nn.init.trunc_normal_(self.pos_embed, std=INIT_STD)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.trunc_normal_(m.weight, std=INIT_STD)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.LayerNorm):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        """Normalised tokens (B, 197, D) after the last block."""
        x = self.patch_embed(x)
        cls = self.cls_token.expand(x.shape[0], -1, -1)
        x = torch.cat((cls, x), dim=1) + self.pos_embed
        for blk in self.blocks:
            x = blk(x)
        return self.norm(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.forward_features(x)
        return self.head(x[:, 1:].mean(dim=1))  # mean over patch tokens, class token excluded


# --- PiT -----------------------------------------------------------------------
class ConvEmbedding(nn.Module):
    """Overlapping 16x16 patches with stride 8 -> (B, dim, 27, 27) feature map."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(IN_CHANS, dim, kernel_size=PATCH, stride=PIT_STRIDE, padding=0, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


class PiTStage(nn.Module):
    """Blocks over [class token; flattened map]; returns the map and class token separately."""

    def __init__(self, dim: int, depth: int, num_heads: int, mlp_ratio: float) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block(dim, num_heads, mlp_ratio) for _ in range(depth))

    def forward(self, x: torch.Tensor, cls: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        b, c, h, w = x.shape
        n_cls = cls.shape[1]
        tokens = torch.cat((cls, x.flatten(2).transpose(1, 2)), dim=1)
        for blk in self.blocks:
            tokens = blk(tokens)
        cls, x = tokens[:, :n_cls], tokens[:, n_cls:]
        return x.transpose(1, 2).reshape(b, c, h, w), cls


class ConvHeadPooling(nn.Module):
    """Halve the map with a depthwise stride-2 conv and widen the class token with a Linear."""

    def __init__(self, in_dim: int, out_dim: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_dim, out_dim, kernel_size=3, stride=2, padding=1, groups=in_dim, bias=True)
        self.fc = nn.Linear(in_dim, out_dim)

    def forward(self, x: torch.Tensor, cls: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.conv(x), self.fc(cls)


class PiT(nn.Module):
    """Pooling-based ViT: three stages of widths base_dim * heads, classified from the class token."""

    def __init__(self, arch: PiTArch, num_classes: int = 100, image_size: int = 224) -> None:
        super().__init__()
        dims = pit_dims(arch)
        side = (image_size - PATCH) // PIT_STRIDE + 1
        self.arch = arch
        self.num_classes = num_classes
        self.patch_embed = ConvEmbedding(dims[0])
        self.pos_embed = nn.Parameter(torch.zeros(1, dims[0], side, side))
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dims[0]))
        self.stages = nn.ModuleList(
            PiTStage(d, n, h, arch.mlp_ratio) for d, n, h in zip(dims, arch.depth, arch.num_heads)
        )
        self.pools = nn.ModuleList(ConvHeadPooling(dims[s], dims[s + 1]) for s in range(len(dims) - 1))
        self.norm = nn.LayerNorm(dims[-1], eps=LN_EPS)
        self.head = nn.Linear(dims[-1], num_classes)
        # Only the embeddings are re-initialised; Linear/Conv2d keep PyTorch defaults.
        nn.init.trunc_normal_(self.pos_embed, std=INIT_STD)
        nn.init.trunc_normal_(self.cls_token, std=INIT_STD)

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        """Normalised class token (B, dims[2]) after the last stage."""
        x = self.patch_embed(x) + self.pos_embed
        cls = self.cls_token.expand(x.shape[0], -1, -1)
        for s, stage in enumerate(self.stages):
            x, cls = stage(x, cls)
            if s < len(self.pools):
                x, cls = self.pools[s](x, cls)
        return self.norm(cls[:, 0])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.forward_features(x))


# --- public helpers --------------------------------------------------------------
def _construct(arch: Arch, num_classes: int) -> nn.Module:
    if isinstance(arch, AutoFormerArch):
        return AutoFormerViT(arch, num_classes)
    return PiT(arch, num_classes)


def build_model(arch: Arch | Mapping, num_classes: int = 100, seed: int | None = None) -> nn.Module:
    """Build the network of ``arch`` (a record or a benchmark config).

    With ``seed`` the initialisation is reproducible and the caller's global
    torch RNG state is left untouched (the build runs in a forked RNG).
    """
    arch = parse_arch(arch)
    if seed is None:
        return _construct(arch, num_classes)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return _construct(arch, num_classes)


def transformer_blocks(model: nn.Module) -> list[Block]:
    """Every transformer Block of ``model`` in forward order (registration order here)."""
    return [m for m in model.modules() if isinstance(m, Block)]
