"""A declarative ViT family: a search space described by a JSON or TOML file.

The common case of a user's own space, without writing a plug-in: per-stage or per-block
choices of embedding width, depth, heads and MLP ratio, the patch embedding, with or
without a class token, and optional pooling stages as in PiT. AutoFormer-Ti and PiT of
ViT-Bench-101 are expressible exactly (same networks, same parameter and MAC counts: see
``examples/spaces/``), and AutoFormer-S and -B are built-in families. The file format is
documented in ``docs/spaces.md``; in short::

    {"name": "my-vit", "patch_size": 16, "class_token": true, "classifier": "mean",
     "choices": {"embed_dim": [192, 216, 240], "depth": [12, 13, 14],
                 "num_heads": {"values": [3, 4], "per": "block"},
                 "mlp_ratio": {"values": [3.5, 4.0], "per": "block"}}}

An architecture's config holds one entry per choice: a number for a choice made once
(``per: network``, or ``per: stage`` with one stage), a list with one value per stage, or
a list with one value per block (all stages' blocks in order).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autoprox.core.atomic import json_problem, load_json
from autoprox.core.errors import ArchitectureError
from autoprox.spaces.base import (
    SearchSpace,
    SpaceDefinitionError,
    fmt_set,
    is_int,
    is_number,
)
from autoprox.spaces.limits import (
    IMAGE_SIZE,
    IN_CHANS,
    LIMIT_BATCH,
    activation_bytes,
    check_buildable,
    check_limits,
)
from autoprox.spaces.family_definition import WIDTH_KEYS, field_error, normalise_definition

__all__ = ["FamilyArch", "FamilySpace", "SpaceName", "load_family"]


class SpaceName(str):
    """The name of a space defined by a file: a ``str`` that carries the definition.

    Pickled into a worker process it brings the definition along, so the worker's registry
    can rebuild the family (:meth:`autoprox.spaces.registry.SpaceRegistry.get`).
    """

    definition: Mapping | None

    def __new__(cls, name: str, definition: Mapping | None = None) -> SpaceName:  # noqa: PYI034
        made = super().__new__(cls, name)
        made.definition = definition
        return made

    def __reduce__(self):
        return (SpaceName, (str(self), self.definition))


@dataclass(frozen=True)
class Choice:
    """One choice of a family: its allowed values per stage, and where it is made."""

    key: str
    values: tuple[tuple[Any, ...], ...]  # one tuple of allowed values per stage
    per: str
    non_decreasing: bool = False

    def describe(self) -> str:
        sets = {fmt_set(v) for v in self.values}
        shown = next(iter(sets)) if len(sets) == 1 else " / ".join(fmt_set(v) for v in self.values)
        where = "" if self.per == "network" or (self.per == "stage" and len(self.values) == 1) else f" per {self.per}"
        order = ", non-decreasing" if self.non_decreasing else ""
        return f"{shown}{where}{order}"


@dataclass(frozen=True)
class FamilyArch:
    """An architecture of a declarative family, every choice spelled out per stage or per block."""

    widths: tuple[int, ...]  # embedding width of each stage
    depths: tuple[int, ...]  # blocks of each stage
    heads: tuple[int, ...]  # heads of each block, all stages in order
    ratios: tuple[Any, ...]  # MLP ratio of each block
    bases: tuple[int, ...] | None  # base (per-head) width of each stage, when widths come from it
    digest: str  # the family's definition digest: archs of different families never compare equal
    family: FamilySpace = field(compare=False, hash=False, repr=False)

    @property
    def space(self) -> SpaceName:
        return self.family.name


class FamilySpace(SearchSpace):
    """A search space read from a declarative definition (a mapping, as in a JSON file)."""

    def __init__(self, definition: Mapping, source: str = "space definition") -> None:
        normal = normalise_definition(definition, source)
        self.definition = normal
        self.source = source
        # What determines the networks (the description does not): part of every cache key.
        networks = {k: v for k, v in normal.items() if k not in ("description", "limits")}
        self.digest = hashlib.sha256(json.dumps(networks, sort_keys=True).encode()).hexdigest()
        self.name = SpaceName(normal["name"], normal)
        self.summary = normal["description"] or f"declarative ViT family ({Path(source).name})"
        self.patch_size = normal["patch_size"]
        self.patch_stride = normal["patch_stride"]
        self.class_token = normal["class_token"]
        self.position_embedding = normal["position_embedding"]
        self.classifier = normal["classifier"]
        self.init = normal["init"]
        self.stages = normal["stages"]
        self.attention_head_dim = normal["attention_head_dim"]
        self.relative_position = normal["relative_position"]
        self.width_key = next(k for k in WIDTH_KEYS if k in normal["choices"])
        self.markers = (self.width_key,)
        self.choice = {key: Choice(key, tuple(tuple(v) for v in spec["values"]), spec["per"], spec["non_decreasing"])
                       for key, spec in normal["choices"].items()}
        self.keys = (self.width_key, "depth", "num_heads", "mlp_ratio")
        _check_consistency(self, source)

    # --------------------------------------------------------------------- geometry
    @property
    def class_tokens(self) -> int:
        return 1 if self.class_token else 0

    def map_sides(self) -> tuple[int, ...]:
        """Side of the patch map in each stage (224 input; pooling halves it, rounding up)."""
        side = (IMAGE_SIZE - self.patch_size) // self.patch_stride + 1
        sides = [side]
        for _ in range(self.stages - 1):
            sides.append((sides[-1] - 1) // 2 + 1)  # 3x3 kernel, stride 2, padding 1
        return tuple(sides)

    def tokens(self) -> tuple[int, ...]:
        """Sequence length seen by the blocks of each stage (class token included)."""
        return tuple(self.class_tokens + side * side for side in self.map_sides())

    def attention_width(self, width: int, heads: int) -> int:
        """Width of q, k and v: the embedding width, or heads x ``attention_head_dim``."""
        return heads * self.attention_head_dim if self.attention_head_dim else width

    def stage_of_blocks(self, arch: FamilyArch) -> list[int]:
        return [s for s, depth in enumerate(arch.depths) for _ in range(depth)]

    # ---------------------------------------------------------------------- records
    def parse(self, config: Mapping) -> FamilyArch:
        if isinstance(config, FamilyArch):
            if config.digest != self.digest:
                raise ArchitectureError(f"{self.name} arch: the record belongs to another space ({config.space})")
            return config
        if not isinstance(config, Mapping):
            raise ArchitectureError(f"{self.name} arch: config must be a mapping, got {type(config).__name__}")
        for key in config:
            if key not in self.keys:
                raise ArchitectureError(f"{self.name} arch: unknown key {key!r}")
        for key in self.keys:
            if key not in config:
                raise ArchitectureError(f"{self.name} arch: missing key {key!r}")
        depths = tuple(self._read(config, "depth", None))
        stage_of = [s for s, depth in enumerate(depths) for _ in range(depth)]
        width_values = self._read(config, self.width_key, stage_of)
        heads = self._read(config, "num_heads", stage_of)
        ratios = self._read(config, "mlp_ratio", stage_of)
        block_heads = self._per_block(heads, "num_heads", stage_of)
        bases = None
        if self.width_key == "base_dim":
            bases = tuple(width_values)
            widths = tuple(b * h for b, h in zip(bases, heads))  # heads are per stage or network here
        else:
            widths = tuple(width_values)
        arch = FamilyArch(widths, depths, tuple(block_heads), tuple(self._per_block(ratios, "mlp_ratio", stage_of)),
                          bases, self.digest, self)
        self._check_arch(arch)
        return arch

    def _read(self, config: Mapping, key: str, stage_of: list[int] | None) -> list[Any]:
        """The value(s) of one choice, validated: one per stage, or one per block for ``per: block``."""
        choice = self.choice[key]
        value = config[key]
        scalar = choice.per == "network" or (choice.per == "stage" and self.stages == 1)
        if scalar:
            self._check_value(key, key, value, choice.values[0])
            return [self._canonical(value, choice.values[0])] * self.stages
        if not isinstance(value, (list, tuple)):
            raise ArchitectureError(f"{self.name} arch: {key} must be a list, got {value!r}")
        if choice.per == "stage":
            if len(value) != self.stages:
                raise ArchitectureError(f"{self.name} arch: {key} has {len(value)} values, expected {self.stages}")
            out = []
            for s, item in enumerate(value):
                self._check_value(key, f"{key}[{s}]", item, choice.values[s])
                out.append(self._canonical(item, choice.values[s]))
            if choice.non_decreasing and any(b < a for a, b in itertools.pairwise(out)):
                raise ArchitectureError(f"{self.name} arch: {key} must be non-decreasing, got {list(value)}")
            return out
        assert stage_of is not None
        if len(value) != len(stage_of):
            raise ArchitectureError(f"{self.name} arch: {key} has {len(value)} values but depth is {len(stage_of)}")
        out = []
        for i, item in enumerate(value):
            self._check_value(key, f"{key}[{i}]", item, choice.values[stage_of[i]])
            out.append(self._canonical(item, choice.values[stage_of[i]]))
        return out

    def _check_value(self, key: str, label: str, value: Any, allowed: Sequence[Any]) -> None:
        if key == "mlp_ratio":
            if not is_number(value):
                raise ArchitectureError(f"{self.name} arch: {label} must be a number, got {value!r}")
        elif not is_int(value):
            raise ArchitectureError(f"{self.name} arch: {label} must be an int, got {value!r}")
        if value not in allowed:
            raise ArchitectureError(f"{self.name} arch: {label}={value} not in {fmt_set(allowed)}")

    @staticmethod
    def _canonical(value: Any, allowed: Sequence[Any]) -> Any:
        """The allowed value equal to ``value`` (so 4 and 4.0 give one record)."""
        return next(a for a in allowed if a == value)

    def _per_block(self, values: list[Any], key: str, stage_of: list[int]) -> list[Any]:
        if self.choice[key].per == "block":
            return values
        return [values[s] for s in stage_of]

    def _check_arch(self, arch: FamilyArch) -> None:
        stage_of = self.stage_of_blocks(arch)
        if not self.attention_head_dim:
            for i, (s, heads) in enumerate(zip(stage_of, arch.heads)):
                if arch.widths[s] % heads:
                    raise ArchitectureError(f"{self.name} arch: width {arch.widths[s]} is not divisible by "
                                            f"num_heads of block {i} ({heads})")
        for s in range(self.stages - 1):
            if arch.widths[s + 1] % arch.widths[s]:
                raise ArchitectureError(f"{self.name} arch: width of stage {s + 1} ({arch.widths[s + 1]}) is not a "
                                        f"multiple of stage {s}'s ({arch.widths[s]}), which pooling needs")

    def to_config(self, arch: FamilyArch) -> dict[str, Any]:
        stage_of = self.stage_of_blocks(arch)
        firsts = [stage_of.index(s) for s in range(self.stages)]
        per_stage = {
            self.width_key: list(arch.bases if arch.bases is not None else arch.widths),
            "depth": list(arch.depths),
            "num_heads": [arch.heads[i] for i in firsts],
            "mlp_ratio": [arch.ratios[i] for i in firsts],
        }
        per_block = {"num_heads": list(arch.heads), "mlp_ratio": list(arch.ratios)}
        config: dict[str, Any] = {}
        for key in self.keys:
            per = self.choice[key].per
            if per == "block":
                config[key] = per_block[key]
            elif per == "network" or self.stages == 1:
                config[key] = per_stage[key][0]
            else:
                config[key] = per_stage[key]
        return config

    def arch_key(self, arch: FamilyArch) -> str:
        # The definition's digest is part of the key: two files may name different networks alike.
        return json.dumps({"arch": self.to_config(arch), "family_sha256": self.digest[:16]},
                          sort_keys=True, separators=(",", ":"))

    # --------------------------------------------------------------------- counting
    def blocks(self, arch: FamilyArch) -> list[tuple[int, int, int]]:
        stage_of = self.stage_of_blocks(arch)
        return [(arch.widths[s], h, int(arch.widths[s] * r)) for s, h, r in zip(stage_of, arch.heads, arch.ratios)]

    def _block_counts(self, width: int, heads: int, hidden: int, tokens: int) -> tuple[int, int]:
        """(parameters, MACs) of one pre-norm block."""
        d, q = width, self.attention_width(width, heads)
        params = 4 * d + (3 * q * d + 3 * q) + (q * d + d) + (d * hidden + hidden) + (hidden * d + d)
        macs = tokens * (3 * q * d + q * d + 2 * d * hidden) + 2 * tokens * tokens * q
        if self.relative_position:
            params += 2 * 2 * (2 * self.relative_position + 2) * (q // heads)  # k and v tables, vertical + horizontal
            macs += 2 * tokens * tokens * q  # q against the k table, attention against the v table
        return params, macs

    def _counts(self, arch: FamilyArch, num_classes: int) -> tuple[int, int]:
        sides, tokens = self.map_sides(), self.tokens()
        d0, fan_in = arch.widths[0], IN_CHANS * self.patch_size * self.patch_size
        params = fan_in * d0 + d0 + self.class_tokens * d0
        macs = sides[0] ** 2 * d0 * fan_in
        if self.position_embedding == "tokens":
            params += tokens[0] * d0
        elif self.position_embedding == "map":
            params += sides[0] ** 2 * d0
        stage_of = self.stage_of_blocks(arch)
        for (width, heads, hidden), s in zip(self.blocks(arch), stage_of):
            p, m = self._block_counts(width, heads, hidden, tokens[s])
            params, macs = params + p, macs + m
        for s in range(self.stages - 1):
            d_in, d_out = arch.widths[s], arch.widths[s + 1]
            params += d_out * 9 + d_out  # depthwise 3x3 pooling conv
            macs += sides[s + 1] ** 2 * d_out * 9
            if self.class_token:
                params += d_in * d_out + d_out  # the class token's Linear
                macs += d_in * d_out
        d_last = arch.widths[-1]
        params += 2 * d_last + d_last * num_classes + num_classes
        macs += d_last * num_classes
        return params, macs

    def count_params(self, arch: FamilyArch, num_classes: int = 100) -> int:
        return self._counts(arch, num_classes)[0]

    def count_macs(self, arch: FamilyArch, num_classes: int = 100) -> int:
        return self._counts(arch, num_classes)[1]

    def activation_bytes(self, arch: FamilyArch, batch: int = LIMIT_BATCH) -> int:
        """Bytes of the float32 activations one forward pass keeps (:func:`limits.activation_bytes`)."""
        return activation_bytes(self, arch, batch)

    def check_buildable(self, arch: FamilyArch, batch: int = LIMIT_BATCH) -> None:
        """Refuse an architecture this machine's memory cannot hold (:func:`limits.check_buildable`)."""
        check_buildable(self, arch, batch)

    # --------------------------------------------------------------------- sampling
    def draw(self, rng: random.Random) -> FamilyArch:
        """Every choice uniform; ``non_decreasing`` choices uniform over the valid tuples."""
        while True:
            config: dict[str, Any] = {}
            depths = self._draw_choice("depth", rng, None)
            config["depth"] = depths
            stage_depths = depths if isinstance(depths, list) else [depths] * self.stages
            stage_of = [s for s, n in enumerate(stage_depths) for _ in range(n)]
            for key in (self.width_key, "num_heads", "mlp_ratio"):
                config[key] = self._draw_choice(key, rng, stage_of)
            try:
                return self.parse(config)
            except ArchitectureError:
                continue  # widths that pooling or the heads cannot take: draw again

    def _draw_choice(self, key: str, rng: random.Random, stage_of: list[int] | None) -> Any:
        choice = self.choice[key]
        if choice.per == "network" or (choice.per == "stage" and self.stages == 1):
            return rng.choice(choice.values[0])
        if choice.per == "stage":
            while True:
                drawn = [rng.choice(values) for values in choice.values]
                if not choice.non_decreasing or all(a <= b for a, b in itertools.pairwise(drawn)):
                    return drawn
        assert stage_of is not None
        return [rng.choice(choice.values[s]) for s in stage_of]

    def configurations(self, limit: int) -> list[FamilyArch] | None:
        """Every architecture of the family, once each (the combinations of choices that :meth:`draw` can
        give), or None when there are more than ``limit`` combinations to try."""
        depth_options = self._options("depth", None)
        plans = []
        total = 0
        for depths in depth_options:
            stage_depths = depths if isinstance(depths, list) else [depths] * self.stages
            stage_of = [s for s, n in enumerate(stage_depths) for _ in range(n)]
            sizes = [self._option_count(key, stage_of) for key in (self.width_key, "num_heads", "mlp_ratio")]
            total += sizes[0] * sizes[1] * sizes[2]
            if total > limit:
                return None
            plans.append((depths, stage_of))
        found: dict[str, FamilyArch] = {}
        for depths, stage_of in plans:
            keys = (self.width_key, "num_heads", "mlp_ratio")
            for values in itertools.product(*(self._options(key, stage_of) for key in keys)):
                try:
                    arch = self.parse({"depth": depths, **dict(zip(keys, values))})
                except ArchitectureError:
                    continue
                found.setdefault(self.arch_key(arch), arch)
        return list(found.values())

    def _options(self, key: str, stage_of: list[int] | None) -> list[Any]:
        """Every value :meth:`_draw_choice` can give for ``key``."""
        choice = self.choice[key]
        if choice.per == "network" or (choice.per == "stage" and self.stages == 1):
            return list(choice.values[0])
        if choice.per == "stage":
            return [list(drawn) for drawn in itertools.product(*choice.values)
                    if not choice.non_decreasing or all(a <= b for a, b in itertools.pairwise(drawn))]
        assert stage_of is not None
        return [list(drawn) for drawn in itertools.product(*(choice.values[s] for s in stage_of))]

    def _option_count(self, key: str, stage_of: list[int]) -> int:
        """How many values :meth:`_options` gives for ``key`` (without listing a per-block choice's)."""
        choice = self.choice[key]
        if choice.per == "block":
            return math.prod(len(choice.values[s]) for s in stage_of)
        return len(self._options(key, stage_of))

    def extremes(self) -> tuple[FamilyArch, FamilyArch] | None:
        ends = []
        for pick in (min, max):
            depths = [pick(values) for values in self.choice["depth"].values]
            stage_of = [s for s, n in enumerate(depths) for _ in range(n)]
            config: dict[str, Any] = {}
            for key in self.keys:
                choice = self.choice[key]
                per_stage = [pick(values) for values in choice.values]
                if choice.per == "network" or (choice.per == "stage" and self.stages == 1):
                    config[key] = per_stage[0]
                elif choice.per == "stage":
                    config[key] = per_stage
                else:
                    config[key] = [per_stage[s] for s in stage_of]
            try:
                ends.append(self.parse(config))
            except ArchitectureError:
                return None
        return ends[0], ends[1]

    # ---------------------------------------------------------------------- listing
    def choices(self) -> dict[str, str]:
        shown = {key: self.choice[key].describe() for key in self.keys}
        stride = f", stride {self.patch_stride}" if self.patch_stride != self.patch_size else ""
        network = [f"patch {self.patch_size}{stride}", "class token" if self.class_token else "no class token",
                   f"{self.classifier} classifier", f"{self.position_embedding} position embedding",
                   f"{self.stages} stage{'s' if self.stages > 1 else ''}"]
        if self.attention_head_dim:
            network.append(f"attention head dim {self.attention_head_dim}")
        if self.relative_position:
            network.append(f"relative position (max {self.relative_position})")
        shown["network"] = ", ".join(network)
        return shown


# ------------------------------------------------------------------- consistency
def _check_consistency(family: FamilySpace, source: str) -> None:
    """Checks that need several fields: every width takes every head count, pooling widths divide."""
    if min(family.map_sides()) < 1:
        raise field_error(source, "patch_size", "leaves no patch of the 224x224 input")
    choice = family.choice
    if family.width_key != "base_dim" and not family.attention_head_dim:
        for s in range(family.stages):
            for width, heads in itertools.product(choice[family.width_key].values[s], choice["num_heads"].values[s]):
                if width % heads:
                    raise field_error(source, "choices.num_heads", f"{heads} heads do not divide {family.width_key} {width} "
                                f"(attention width = embedding width); change the choices or give attention_head_dim "
                                f"(q, k, v width = heads x attention_head_dim, as AutoFormer's 64)")
    ends = family.extremes()
    if family.stages > 1 and ends is None:
        raise field_error(source, "choices", "its smallest or largest architecture is not valid: with pooling between "
                                       "stages every stage's width must be a multiple of the previous stage's")
    if ends is not None:
        check_limits(family, ends[1], source)


# ------------------------------------------------------------------------ files
def load_family(path: str | os.PathLike) -> FamilySpace:
    """Read a family definition from a ``.json`` or ``.toml`` file."""
    path = Path(path)
    if not path.is_file():
        raise SpaceDefinitionError(f"space file not found: {path}")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise SpaceDefinitionError(f"{path}: not a UTF-8 text file (byte {exc.start})") from None
    suffix = path.suffix.lower()
    if suffix == ".json":
        try:
            data = load_json(text)
        except json.JSONDecodeError as exc:
            raise SpaceDefinitionError(f"{path}: not JSON ({json_problem(exc)})") from None
    elif suffix == ".toml":
        try:
            import tomllib
        except ImportError:  # Python 3.10
            raise SpaceDefinitionError(f"{path}: TOML space files need Python 3.11 (tomllib); "
                                       f"write the space as JSON") from None
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise SpaceDefinitionError(f"{path}: not TOML ({exc})") from None
    else:
        raise SpaceDefinitionError(f"{path}: a space file is .json or .toml, got {suffix or 'no suffix'!r}")
    return FamilySpace(data, source=str(path))
