"""The two ViT search spaces of ViT-Bench-101, AutoFormer-Ti and PiT, and the functions
that work on an architecture of any registered space.

Pure Python (no torch): architecture records, parsing and validation of the
benchmark's JSON form, exact parameter and multiply-accumulate counts (the
formulas of ``shared/spaces.md``, computed without building a network), and a
seeded sampler.  ``autoprox.networks.models`` builds the networks these records describe.

The module-level functions (:func:`parse_arch`, :func:`count_params`, :func:`sample_arch`,
...) take an architecture of any space: the two built-in ones are handled here, any other
by its space (:mod:`autoprox.spaces.registry`, :class:`autoprox.spaces.base.SearchSpace`).
"""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Union

from autoprox.core.errors import ArchitectureError  # noqa: F401 (re-exported)
from autoprox.spaces.registry import detect_space_of_config, get_space, space_of

__all__ = [
    "SPACES",
    "ArchitectureError",
    "AutoFormerArch",
    "PiTArch",
    "Arch",
    "detect_space",
    "parse_arch",
    "arch_to_config",
    "arch_key",
    "count_params",
    "count_macs",
    "transformer_widths",
    "param_range",
    "sample_arch",
    "pit_dims",
    "pit_map_sizes",
]

#: The spaces of ViT-Bench-101, whose records live here (``space_names()`` lists every space).
SPACES: tuple[str, ...] = ("autoformer", "pit")

# --- choices of each space (immutable) -------------------------------------
AF_HIDDEN_DIMS: tuple[int, ...] = (192, 216, 240)
AF_DEPTHS: tuple[int, ...] = (12, 13, 14)
AF_HEADS: tuple[int, ...] = (3, 4)
AF_MLP_RATIOS: tuple[float, ...] = (3.5, 4.0)

PIT_BASE_DIMS: tuple[int, ...] = (16, 24, 32, 40)
PIT_MLP_RATIOS: tuple[int, ...] = (2, 4, 6, 8)
PIT_HEADS: tuple[int, ...] = (2, 4, 8)
PIT_DEPTHS: tuple[tuple[int, ...], ...] = ((1, 2, 3), (4, 6, 8), (2, 4, 6))
# Every non-decreasing triple of per-stage heads (10 of them), in sorted order.
PIT_HEAD_TRIPLES: tuple[tuple[int, int, int], ...] = tuple(
    t for t in itertools.product(PIT_HEADS, repeat=3) if t[0] <= t[1] <= t[2]
)

# --- fixed geometry ----------------------------------------------------------
IMAGE_SIZE = 224
IN_CHANS = 3
PATCH = 16  # kernel of the patch embedding in both spaces
AF_STRIDE = 16
PIT_STRIDE = 8
AF_KEYS: tuple[str, ...] = ("hidden_dim", "depth", "mlp_ratio", "num_heads")
PIT_KEYS: tuple[str, ...] = ("base_dim", "mlp_ratio", "depth", "num_heads")



# --- small validation helpers -----------------------------------------------
def _fmt_set(choices: Sequence[Any]) -> str:
    return "{" + ", ".join(str(c) for c in choices) + "}"


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _check_int(space: str, name: str, v: Any, choices: Sequence[int]) -> int:
    """Return ``v`` if it is an int (not bool) among ``choices``, else raise."""
    if not _is_int(v):
        raise ArchitectureError(f"{space} arch: {name} must be an int, got {v!r}")
    if v not in choices:
        raise ArchitectureError(f"{space} arch: {name}={v} not in {_fmt_set(choices)}")
    return v


def _check_float(space: str, name: str, v: Any, choices: Sequence[float]) -> float:
    """Return ``v`` as float if it is a number (not bool) among ``choices``."""
    if not _is_number(v):
        raise ArchitectureError(f"{space} arch: {name} must be a number, got {v!r}")
    if float(v) not in choices:
        raise ArchitectureError(f"{space} arch: {name}={v} not in {_fmt_set(choices)}")
    return float(v)


def _as_tuple(space: str, name: str, v: Any) -> tuple:
    """Accept a list or tuple (not a string or mapping) and return a tuple."""
    if not isinstance(v, (list, tuple)):
        raise ArchitectureError(f"{space} arch: {name} must be a list, got {v!r}")
    return tuple(v)


# --- architecture records ----------------------------------------------------
@dataclass(frozen=True)
class AutoFormerArch:
    """An AutoFormer-Ti subnet: width, depth and per-block heads / MLP ratio.

    Lists are turned into tuples and int ratios into floats, so equal
    architectures compare and hash equal whatever form they were given in.
    """

    hidden_dim: int
    depth: int
    mlp_ratio: tuple[float, ...]
    num_heads: tuple[int, ...]

    space: ClassVar[str] = "autoformer"

    def __post_init__(self) -> None:
        s = self.space
        _check_int(s, "hidden_dim", self.hidden_dim, AF_HIDDEN_DIMS)
        _check_int(s, "depth", self.depth, AF_DEPTHS)
        ratios = _as_tuple(s, "mlp_ratio", self.mlp_ratio)
        heads = _as_tuple(s, "num_heads", self.num_heads)
        for name, vals in (("mlp_ratio", ratios), ("num_heads", heads)):
            if len(vals) != self.depth:
                raise ArchitectureError(
                    f"{s} arch: {name} has {len(vals)} values but depth is {self.depth}"
                )
        ratios = tuple(
            _check_float(s, f"mlp_ratio[{i}]", r, AF_MLP_RATIOS) for i, r in enumerate(ratios)
        )
        heads = tuple(_check_int(s, f"num_heads[{i}]", h, AF_HEADS) for i, h in enumerate(heads))
        object.__setattr__(self, "mlp_ratio", ratios)
        object.__setattr__(self, "num_heads", heads)


@dataclass(frozen=True)
class PiTArch:
    """A PiT network: base head width, shared MLP ratio, per-stage depth and heads.

    Stage ``s`` has width ``base_dim * num_heads[s]``; heads never decrease.
    """

    base_dim: int
    mlp_ratio: int
    depth: tuple[int, int, int]
    num_heads: tuple[int, int, int]

    space: ClassVar[str] = "pit"

    def __post_init__(self) -> None:
        s = self.space
        _check_int(s, "base_dim", self.base_dim, PIT_BASE_DIMS)
        _check_int(s, "mlp_ratio", self.mlp_ratio, PIT_MLP_RATIOS)
        depth = _as_tuple(s, "depth", self.depth)
        heads = _as_tuple(s, "num_heads", self.num_heads)
        for name, vals in (("depth", depth), ("num_heads", heads)):
            if len(vals) != 3:
                raise ArchitectureError(f"{s} arch: {name} has {len(vals)} values, expected 3")
        depth = tuple(
            _check_int(s, f"depth[{i}]", d, PIT_DEPTHS[i]) for i, d in enumerate(depth)
        )
        heads = tuple(_check_int(s, f"num_heads[{i}]", h, PIT_HEADS) for i, h in enumerate(heads))
        if not heads[0] <= heads[1] <= heads[2]:
            raise ArchitectureError(
                f"{s} arch: num_heads must be non-decreasing, got {list(heads)}"
            )
        object.__setattr__(self, "depth", depth)
        object.__setattr__(self, "num_heads", heads)


Arch = Union[AutoFormerArch, PiTArch]  # records of other spaces are their spaces' own types
_BUILTIN = (AutoFormerArch, PiTArch)
_ARCH_TYPES: dict[str, type] = {"autoformer": AutoFormerArch, "pit": PiTArch}
_KEYS: dict[str, tuple[str, ...]] = {"autoformer": AF_KEYS, "pit": PIT_KEYS}


# --- parsing and serialisation -----------------------------------------------
def _check_space(space: str) -> str:
    if space not in SPACES:
        raise ArchitectureError(f"unknown search space {space!r}, expected one of {list(SPACES)}")
    return space


def detect_space(config: Mapping) -> str:
    """Name the space a config belongs to, from its marker keys: ``hidden_dim`` -> autoformer,
    ``base_dim`` -> pit, and so on for every registered space (:meth:`SpaceRegistry.detect`)."""
    return str(detect_space_of_config(config).name)


def parse_arch(config: Mapping | Arch, space: str | None = None) -> Arch:
    """Validate a benchmark-style config and return its frozen architecture record.

    Unknown or missing keys are errors; when ``space`` is given the config
    must belong to it.  An already-parsed record is returned as is.
    """
    if isinstance(config, (AutoFormerArch, PiTArch)):
        if space is not None and str(get_space(space).name) != config.space:
            raise ArchitectureError(f"arch is a {config.space} arch but space {space!r} was requested")
        return config
    if not isinstance(config, Mapping) and isinstance(getattr(config, "space", None), str):
        owner = space_of(config)  # a record of another space
        if space is not None and get_space(space) is not owner:
            raise ArchitectureError(f"arch is a {owner.name} arch but space {space!r} was requested")
        return config  # type: ignore[return-value]
    target = get_space(space if space is not None else detect_space(config))
    if space is not None:
        if not isinstance(config, Mapping):
            raise ArchitectureError(f"arch config must be a mapping, got {type(config).__name__}")
        if not target.claims(config):
            try:
                found = detect_space(config)
            except ArchitectureError:
                found = target.name  # no space's marker key: report the missing key below
            if found != target.name:
                raise ArchitectureError(f"{target.name} arch: config looks like a {found} arch (keys {list(config)})")
    return target.parse(config)


def _parse_builtin(config: Mapping, space: str) -> Arch:
    """Parse a config of one of the two built-in spaces (keys checked, then the record validates)."""
    if not isinstance(config, Mapping):
        raise ArchitectureError(f"arch config must be a mapping, got {type(config).__name__}")
    keys = _KEYS[space]
    for k in config:
        if k not in keys:
            raise ArchitectureError(f"{space} arch: unknown key {k!r}")
    for k in keys:
        if k not in config:
            raise ArchitectureError(f"{space} arch: missing key {k!r}")
    return _ARCH_TYPES[space](**{k: config[k] for k in keys})


def arch_to_config(arch: Arch) -> dict[str, Any]:
    """JSON-able config in the benchmark's form (lists, not tuples)."""
    if isinstance(arch, AutoFormerArch):
        return {
            "hidden_dim": arch.hidden_dim,
            "depth": arch.depth,
            "mlp_ratio": list(arch.mlp_ratio),
            "num_heads": list(arch.num_heads),
        }
    if isinstance(arch, PiTArch):
        return {
            "base_dim": arch.base_dim,
            "mlp_ratio": arch.mlp_ratio,
            "depth": list(arch.depth),
            "num_heads": list(arch.num_heads),
        }
    return space_of(arch).to_config(arch)


def arch_key(arch: Arch) -> str:
    """Canonical compact JSON (sorted keys) of an architecture, for caches and dedup."""
    if isinstance(arch, _BUILTIN):
        return json.dumps(arch_to_config(arch), sort_keys=True, separators=(",", ":"))
    return space_of(arch).arch_key(arch)


# --- geometry helpers ------------------------------------------------------
def _conv_out(size: int, kernel: int, stride: int, padding: int = 0) -> int:
    return (size + 2 * padding - kernel) // stride + 1


def pit_dims(arch: PiTArch) -> tuple[int, int, int]:
    """Width of each PiT stage: ``base_dim * num_heads[s]``."""
    return tuple(arch.base_dim * h for h in arch.num_heads)  # type: ignore[return-value]


def pit_map_sizes(image_size: int = IMAGE_SIZE) -> tuple[int, int, int]:
    """Side of the PiT feature map in each stage (27, 14, 7 for 224 input)."""
    m0 = _conv_out(image_size, PATCH, PIT_STRIDE)
    m1 = _conv_out(m0, 3, 2, 1)
    m2 = _conv_out(m1, 3, 2, 1)
    return (m0, m1, m2)


def _af_num_patches(image_size: int = IMAGE_SIZE) -> int:
    return _conv_out(image_size, PATCH, AF_STRIDE) ** 2


def transformer_widths(arch: Arch) -> list[tuple[int, int, int]]:
    """(width D, heads, MLP hidden h = int(D * mlp_ratio)) of every block, in forward order."""
    if isinstance(arch, AutoFormerArch):
        d = arch.hidden_dim
        return [(d, h, int(d * r)) for h, r in zip(arch.num_heads, arch.mlp_ratio)]
    if isinstance(arch, PiTArch):
        out: list[tuple[int, int, int]] = []
        for d, h, n in zip(pit_dims(arch), arch.num_heads, arch.depth):
            out.extend([(d, h, int(d * arch.mlp_ratio))] * n)
        return out
    return space_of(arch).blocks(arch)


def _tokens_per_block(arch: Arch) -> list[int]:
    """Sequence length (class token included) seen by every block, in order."""
    if isinstance(arch, AutoFormerArch):
        return [1 + _af_num_patches()] * arch.depth
    maps = pit_map_sizes()
    return [1 + maps[s] ** 2 for s in range(3) for _ in range(arch.depth[s])]


# --- counting ----------------------------------------------------------------
def _block_params(d: int, h: int) -> int:
    """Two LayerNorms, qkv, proj, fc1, fc2 of one pre-norm block."""
    return 4 * d + (3 * d * d + 3 * d) + (d * d + d) + (d * h + h) + (h * d + d)


def _block_macs(d: int, h: int, tokens: int) -> int:
    """Linear layers (qkv, proj, fc1, fc2) per token plus q@k^T and attn@v."""
    return tokens * (3 * d * d + d * d + 2 * d * h) + 2 * tokens * tokens * d


def count_params(arch: Arch, num_classes: int = 100) -> int:
    """Exact number of trainable parameters of the built network (spaces.md formula)."""
    if not isinstance(arch, _BUILTIN):
        return space_of(arch).count_params(arch, num_classes)
    blocks = sum(_block_params(d, h) for d, _, h in transformer_widths(arch))
    if isinstance(arch, AutoFormerArch):
        d = arch.hidden_dim
        embed = PATCH * PATCH * IN_CHANS * d + d + d + (1 + _af_num_patches()) * d
        return embed + blocks + 2 * d + d * num_classes + num_classes
    d0, d1, d2 = dims = pit_dims(arch)
    m0 = pit_map_sizes()[0]
    embed = d0 * m0 * m0 + IN_CHANS * PATCH * PATCH * d0 + d0 + d0
    pools = sum(dims[s + 1] * 9 + dims[s + 1] + dims[s] * dims[s + 1] + dims[s + 1] for s in (0, 1))
    return embed + blocks + pools + 2 * d2 + d2 * num_classes + num_classes


def count_macs(arch: Arch, num_classes: int = 100) -> int:
    """Multiply-accumulates of one 224x224 image: linear and conv layers plus attention matmuls.

    Convention: a layer costs (output elements) x (inputs per output); softmax,
    norms, GELU, additions and pooling of tokens are free.
    """
    if not isinstance(arch, _BUILTIN):
        return space_of(arch).count_macs(arch, num_classes)
    tokens = _tokens_per_block(arch)
    blocks = sum(_block_macs(d, h, t) for (d, _, h), t in zip(transformer_widths(arch), tokens))
    patch_fan_in = IN_CHANS * PATCH * PATCH
    if isinstance(arch, AutoFormerArch):
        d = arch.hidden_dim
        embed = _af_num_patches() * d * patch_fan_in
        return embed + blocks + d * num_classes  # head once, on the pooled token
    dims, maps = pit_dims(arch), pit_map_sizes()
    embed = maps[0] ** 2 * dims[0] * patch_fan_in
    # depthwise conv: each output element reads 3x3 inputs of one channel; class-token Linear
    pools = sum(maps[s + 1] ** 2 * dims[s + 1] * 9 + dims[s] * dims[s + 1] for s in (0, 1))
    return embed + blocks + pools + dims[2] * num_classes


# --- extremes and sampling ---------------------------------------------------
def _extreme_archs(space: str) -> tuple[Arch, Arch]:
    """The smallest and largest architecture of a space (counts grow in every choice)."""
    if _check_space(space) == "autoformer":
        lo_d, hi_d = min(AF_DEPTHS), max(AF_DEPTHS)
        return (
            AutoFormerArch(min(AF_HIDDEN_DIMS), lo_d, (min(AF_MLP_RATIOS),) * lo_d, (min(AF_HEADS),) * lo_d),
            AutoFormerArch(max(AF_HIDDEN_DIMS), hi_d, (max(AF_MLP_RATIOS),) * hi_d, (max(AF_HEADS),) * hi_d),
        )
    return (
        PiTArch(min(PIT_BASE_DIMS), min(PIT_MLP_RATIOS), tuple(min(c) for c in PIT_DEPTHS), PIT_HEAD_TRIPLES[0]),
        PiTArch(max(PIT_BASE_DIMS), max(PIT_MLP_RATIOS), tuple(max(c) for c in PIT_DEPTHS), PIT_HEAD_TRIPLES[-1]),
    )


def param_range(space: str, num_classes: int = 100) -> tuple[int, int]:
    """Smallest and largest parameter count any architecture of ``space`` has."""
    if space in SPACES:
        lo, hi = _extreme_archs(space)
        return count_params(lo, num_classes), count_params(hi, num_classes)
    found = get_space(space).param_range(num_classes)
    if found is None:
        raise ArchitectureError(f"{space} space has no parameter range (its architectures are not sampled)")
    return found


def _draw(space: str, rng: random.Random) -> Arch:
    """One architecture, every choice uniform (PiT heads uniform over the 10 valid triples)."""
    if space == "autoformer":
        d = rng.choice(AF_HIDDEN_DIMS)
        depth = rng.choice(AF_DEPTHS)
        ratios = tuple(rng.choice(AF_MLP_RATIOS) for _ in range(depth))
        heads = tuple(rng.choice(AF_HEADS) for _ in range(depth))
        return AutoFormerArch(d, depth, ratios, heads)
    return PiTArch(
        base_dim=rng.choice(PIT_BASE_DIMS),
        mlp_ratio=rng.choice(PIT_MLP_RATIOS),
        depth=tuple(rng.choice(c) for c in PIT_DEPTHS),  # type: ignore[arg-type]
        num_heads=rng.choice(PIT_HEAD_TRIPLES),
    )


def sample_arch(
    space: str,
    rng: random.Random,
    params_range: tuple[float, float] | None = None,
    num_classes: int = 100,
    max_tries: int = 10000,
    macs_range: tuple[float, float] | None = None,
) -> Arch:
    """Draw a random architecture of ``space`` using only ``rng``.

    With ``params_range=(min, max)`` (raw parameter counts, inclusive) draws
    are rejected until one fits; likewise ``macs_range`` for multiply-accumulates.
    If none fits after ``max_tries`` draws (or
    the range cannot be met at all) an ArchitectureError names the space's
    feasible range.
    """
    return get_space(space).sample(rng, params_range, num_classes, max_tries, macs_range)
