"""PyTorch builders for the networks of every space: AutoFormer-Ti and PiT of ViT-Bench-101,
declarative families (AutoFormer-S and -B among them) and plug-ins.

Written to match ViT-Bench-101's networks exactly (docs/spaces.md) (parameter counts equal
``autoprox.spaces.architectures.count_params``) with timm-style module names, so that
``blocks.0.attn.qkv`` / ``stages.0.blocks.0.mlp.fc1`` mean what they mean in
timm.  There is no dropout or drop-path: zero-cost proxies are scored with
them disabled.

:func:`build_model` builds any architecture: with the builder registered for its record
type (:func:`register_builder`, the way timm registers models), else with its space's
``build_model``. Everything that reads blocks (:func:`transformer_blocks`, the statistics,
the zoo proxies) goes by timm's module names, so timm's own models and a plug-in's work too.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import torch
import torch.nn.functional as F
from torch import nn

from autoprox.core.errors import ArchitectureError
from autoprox.core.registry import Registry
from autoprox.spaces.architectures import Arch, parse_arch
from autoprox.spaces.family import IN_CHANS, FamilyArch
from autoprox.spaces.registry import space_of

__all__ = [
    "Attention",
    "Mlp",
    "Block",
    "FamilyViT",
    "RelativePosition2D",
    "build_model",
    "block_name_problems",
    "register_builder",
    "transformer_blocks",
]

LN_EPS = 1e-6
INIT_STD = 0.02


def init_linear_and_layernorm(model: nn.Module) -> None:
    """timm's ViT initialisation of every Linear (trunc normal 0.02, bias 0) and LayerNorm (1, 0), in module order."""
    for m in model.modules():
        if isinstance(m, nn.Linear):
            nn.init.trunc_normal_(m.weight, std=INIT_STD)
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.LayerNorm):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)


class _ByTimmNames(type(nn.Module)):
    """Metaclass of :class:`Attention` and :class:`Mlp`: ``isinstance`` also accepts any module
    with timm's names for that part (timm's own ``Attention`` and ``Mlp`` among them), so code
    that looks for attention or MLP modules works on timm's models and plug-ins' networks."""

    def __instancecheck__(cls, obj) -> bool:
        if type.__instancecheck__(cls, obj):
            return True
        has_names = cls.__dict__.get("has_timm_names")
        return has_names is not None and isinstance(obj, nn.Module) and has_names(obj)


class Attention(nn.Module, metaclass=_ByTimmNames):
    """Multi-head self-attention: one qkv Linear, head_dim = dim // num_heads, proj Linear.

    With ``attn_dim`` q, k and v have that width instead of ``dim`` (AutoFormer's
    ``heads x 64``), and proj maps it back to ``dim``. ``isinstance(m, Attention)`` is true of
    any module with a Linear ``qkv``, a Linear ``proj`` and ``num_heads`` (timm's names).
    """

    @staticmethod
    def has_timm_names(module: nn.Module) -> bool:
        return (isinstance(getattr(module, "qkv", None), nn.Linear) and isinstance(getattr(module, "proj", None), nn.Linear)
                and isinstance(getattr(module, "num_heads", None), int))

    def __init__(self, dim: int, num_heads: int, attn_dim: int | None = None) -> None:
        super().__init__()
        width = dim if attn_dim is None else attn_dim
        if width % num_heads:
            raise ArchitectureError(f"dim {width} is not divisible by num_heads {num_heads}")
        self.num_heads = num_heads
        self.head_dim = width // num_heads
        self.qkv = nn.Linear(dim, 3 * width, bias=True)
        self.proj = nn.Linear(width, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, _ = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)  # each (B, heads, N, head_dim)
        x = F.scaled_dot_product_attention(q, k, v)  # softmax(q k^T / sqrt(head_dim)) v
        return self.proj(x.transpose(1, 2).reshape(b, n, self.num_heads * self.head_dim))


class RelativePosition2D(nn.Module):
    """AutoFormer's relative position embedding: a vertical and a horizontal table of
    ``2 * max_distance + 2`` rows; row 0 serves the class token, distances are clipped."""

    def __init__(self, head_dim: int, max_distance: int) -> None:
        super().__init__()
        self.max_distance = max_distance
        self.table_v = nn.Parameter(torch.zeros(2 * max_distance + 2, head_dim))
        self.table_h = nn.Parameter(torch.zeros(2 * max_distance + 2, head_dim))

    def forward(self, tokens: int) -> torch.Tensor:
        """(tokens, tokens, head_dim) embeddings; the first token is the class token."""
        patches = tokens - 1
        side = math.isqrt(patches)
        index = torch.arange(patches, device=self.table_v.device)
        rows, cols = index // side, index % side
        m = self.max_distance
        vertical = (rows[None, :] - rows[:, None]).clamp(-m, m) + m + 1
        horizontal = (cols[None, :] - cols[:, None]).clamp(-m, m) + m + 1
        vertical = F.pad(vertical, (1, 0, 1, 0), value=0)
        horizontal = F.pad(horizontal, (1, 0, 1, 0), value=0)
        return self.table_v[vertical] + self.table_h[horizontal]


class RelPosAttention(Attention):
    """Attention with AutoFormer's relative position terms on the keys and on the values."""

    def __init__(self, dim: int, num_heads: int, attn_dim: int | None, max_distance: int) -> None:
        super().__init__(dim, num_heads, attn_dim)
        self.rel_pos_embed_k = RelativePosition2D(self.head_dim, max_distance)
        self.rel_pos_embed_v = RelativePosition2D(self.head_dim, max_distance)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, _ = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        scale = self.head_dim ** -0.5
        scores = (q @ k.transpose(-2, -1) + torch.einsum("bhid,ijd->bhij", q, self.rel_pos_embed_k(n))) * scale
        weights = scores.softmax(dim=-1)
        x = weights @ v + torch.einsum("bhij,ijd->bhid", weights, self.rel_pos_embed_v(n))
        return self.proj(x.transpose(1, 2).reshape(b, n, self.num_heads * self.head_dim))


class Mlp(nn.Module, metaclass=_ByTimmNames):
    """fc1 -> GELU -> fc2; ``act`` is a module so hooks can read post-GELU activations.

    ``isinstance(m, Mlp)`` is true of any module with Linear ``fc1`` and ``fc2`` and a module
    ``act`` (timm's names).
    """

    @staticmethod
    def has_timm_names(module: nn.Module) -> bool:
        return (isinstance(getattr(module, "fc1", None), nn.Linear) and isinstance(getattr(module, "fc2", None), nn.Linear)
                and isinstance(getattr(module, "act", None), nn.Module))

    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


class Block(nn.Module):
    """Pre-norm transformer block: x + attn(norm1(x)), then x + mlp(norm2(x))."""

    def __init__(self, dim: int, num_heads: int, mlp_ratio: float, attn_dim: int | None = None,
                 relative_position: int | None = None) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=LN_EPS)
        if relative_position:
            self.attn: Attention = RelPosAttention(dim, num_heads, attn_dim, relative_position)
        else:
            self.attn = Attention(dim, num_heads, attn_dim)
        self.norm2 = nn.LayerNorm(dim, eps=LN_EPS)
        self.mlp = Mlp(dim, int(dim * mlp_ratio))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


# --- declarative families -------------------------------------------------------
class FamilyPooling(nn.Module):
    """PiT's pooling between stages: depthwise stride-2 conv on the map, Linear on the class token."""

    def __init__(self, in_dim: int, out_dim: int, class_token: bool) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_dim, out_dim, kernel_size=3, stride=2, padding=1, groups=in_dim, bias=True)
        self.fc = nn.Linear(in_dim, out_dim) if class_token else None

    def forward(self, x: torch.Tensor, cls: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor | None]:
        return self.conv(x), (self.fc(cls) if self.fc is not None else None)


class FamilyPatchEmbed(nn.Module):
    """Patches of ``kernel`` x ``kernel`` pixels every ``stride`` -> (B, dim, side, side) map."""

    def __init__(self, dim: int, kernel: int, stride: int) -> None:
        super().__init__()
        self.proj = nn.Conv2d(IN_CHANS, dim, kernel_size=kernel, stride=stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x)


class FamilyStage(nn.Module):
    """The blocks of one stage of a multi-stage family (``stages.N.blocks.M``)."""

    def __init__(self, blocks: list[Block]) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(blocks)


class FamilyViT(nn.Module):
    """The network of a declarative family's architecture (:mod:`autoprox.spaces.family`).

    Patch embedding (Conv2d, ``patch_embed.proj``), an optional class token, a position
    embedding over the tokens or over the patch map, the stages' blocks (``blocks.N`` with
    one stage, ``stages.S.blocks.N`` with several, PiT's pooling between stages), a final
    LayerNorm and a Linear head on the class token or on the mean patch token. Modules are
    made, initialised and run in the order of the AutoFormer-Ti and PiT networks of
    ViT-Bench-101 (docs/spaces.md), so their built-in families give the very networks (the
    statistics of every cached entry) those spaces' own classes gave before they were families.
    """

    def __init__(self, arch: FamilyArch, num_classes: int = 100) -> None:
        super().__init__()
        family = arch.family
        family.check_buildable(arch)  # before any tensor is allocated
        self.arch, self.num_classes = arch, num_classes
        self.class_tokens = family.class_tokens
        self.position = family.position_embedding
        self.classifier = family.classifier
        widths, side, tokens = arch.widths, family.map_sides()[0], family.tokens()[0]
        self.patch_embed = FamilyPatchEmbed(widths[0], family.patch_size, family.patch_stride)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, widths[0])) if family.class_token else None
        if self.position == "tokens":
            self.pos_embed = nn.Parameter(torch.zeros(1, tokens, widths[0]))
        elif self.position == "map":
            self.pos_embed = nn.Parameter(torch.zeros(1, widths[0], side, side))
        else:
            self.pos_embed = None
        stage_of = family.stage_of_blocks(arch)
        stage_blocks: list[list[Block]] = [[] for _ in arch.depths]
        for s, heads, ratio in zip(stage_of, arch.heads, arch.ratios):
            attn_dim = family.attention_width(widths[s], heads) if family.attention_head_dim else None
            stage_blocks[s].append(Block(widths[s], heads, ratio, attn_dim, family.relative_position))
        if len(stage_blocks) == 1:
            self.blocks = nn.ModuleList(stage_blocks[0])
        else:
            self.stages = nn.ModuleList(FamilyStage(blocks) for blocks in stage_blocks)
        self.pools = nn.ModuleList(FamilyPooling(widths[s], widths[s + 1], family.class_token)
                                   for s in range(len(widths) - 1))
        self.norm = nn.LayerNorm(widths[-1], eps=LN_EPS)
        self.head = nn.Linear(widths[-1], num_classes)
        self._init_weights(family.init)

    def _init_weights(self, scheme: str) -> None:
        """``trunc_normal`` (AutoFormer): class token, position, every Linear trunc normal 0.02
        (biases 0); ``default`` (PiT): position and class token only, layers keep PyTorch's."""
        embeddings = [self.cls_token, self.pos_embed] if scheme == "trunc_normal" else [self.pos_embed, self.cls_token]
        for parameter in embeddings:
            if parameter is not None:
                nn.init.trunc_normal_(parameter, std=INIT_STD)
        if scheme == "trunc_normal":
            init_linear_and_layernorm(self)
        for m in self.modules():
            if isinstance(m, RelativePosition2D):
                nn.init.trunc_normal_(m.table_v, std=INIT_STD)
                nn.init.trunc_normal_(m.table_h, std=INIT_STD)

    def _stage_blocks(self) -> list[nn.ModuleList]:
        return [self.blocks] if hasattr(self, "blocks") else [stage.blocks for stage in self.stages]

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        """Tokens (B, N, D) after the last block, not yet normalised."""
        x = self.patch_embed(x)
        if self.position == "map":
            x = x + self.pos_embed
        cls = self.cls_token.expand(x.shape[0], -1, -1) if self.cls_token is not None else None
        n = self.class_tokens
        tokens = x
        for s, blocks in enumerate(self._stage_blocks()):
            b, c, h, w = x.shape
            tokens = x.flatten(2).transpose(1, 2)
            if cls is not None:
                tokens = torch.cat((cls, tokens), dim=1)
            if s == 0 and self.position == "tokens":
                tokens = tokens + self.pos_embed
            for blk in blocks:
                tokens = blk(tokens)
            if s < len(self.pools):
                cls, x = (tokens[:, :n] if n else None), tokens[:, n:]
                x, cls = self.pools[s](x.transpose(1, 2).reshape(b, c, h, w), cls)
        return tokens

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = self.forward_features(x)
        if self.classifier == "token":
            return self.head(self.norm(tokens[:, 0]))
        return self.head(self.norm(tokens)[:, self.class_tokens:].mean(dim=1))


# --- building any architecture ----------------------------------------------------
#: Record type -> builder ``(arch, num_classes) -> nn.Module`` (see :func:`register_builder`).
MODEL_BUILDERS: Registry[type, Callable[..., nn.Module]] = Registry("model builder")


def register_builder(record_type: type) -> Callable:
    """Decorator: ``@register_builder(MyArch)`` makes the decorated ``(arch, num_classes)``
    callable (a function or an ``nn.Module`` class) the builder of ``MyArch`` records; a type that
    has a builder already is refused (RegistryError)."""

    def register(builder: Callable) -> Callable:
        MODEL_BUILDERS.add(record_type, builder)
        return builder

    return register


register_builder(FamilyArch)(FamilyViT)


def _construct(arch: Arch, num_classes: int) -> nn.Module:
    for record_type in type(arch).__mro__:
        if record_type in MODEL_BUILDERS:
            return MODEL_BUILDERS[record_type](arch, num_classes)
    return space_of(arch).build_model(arch, num_classes)


def build_model(arch: Arch | Mapping, num_classes: int = 100, seed: int | None = None) -> nn.Module:
    """Build the network of ``arch`` (a record of any space, or a benchmark config).

    With ``seed`` the initialisation is reproducible and the caller's global
    torch RNG state is left untouched (the build runs in a forked RNG).
    """
    arch = parse_arch(arch)
    if seed is None:
        return _construct(arch, num_classes)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return _construct(arch, num_classes)


def _is_block(module: nn.Module) -> bool:
    return isinstance(getattr(module, "attn", None), Attention) and isinstance(getattr(module, "mlp", None), Mlp)


def transformer_blocks(model: nn.Module) -> list[nn.Module]:
    """Every transformer block of ``model`` in forward order (registration order here): each
    module with an ``attn`` holding ``qkv`` and ``proj`` and an ``mlp`` holding ``fc1``, ``act``
    and ``fc2`` (timm's names), so :class:`Block` and timm's blocks alike."""
    return [m for m in model.modules() if _is_block(m)]


def block_name_problems(model: nn.Module) -> list[tuple[str, str]]:
    """``(module name, what is missing)`` for every module that has an ``attn`` and an ``mlp``
    (a transformer block, by timm's names) but lacks what the statistics read."""
    problems = []
    for name, module in model.named_modules():
        attn, mlp = getattr(module, "attn", None), getattr(module, "mlp", None)
        if not (isinstance(attn, nn.Module) and isinstance(mlp, nn.Module)):
            continue
        missing = []
        if not Attention.has_timm_names(attn):
            missing.append(f"attn is {type(attn).__name__} without a Linear qkv" if not isinstance(
                getattr(attn, "qkv", None), nn.Linear) else f"attn ({type(attn).__name__}) lacks proj or num_heads")
        if not Mlp.has_timm_names(mlp):
            missing.append(f"mlp is {type(mlp).__name__} without Linear fc1/fc2 and act")
        if missing:
            problems.append((name, "; ".join(missing)))
    return problems
