"""timm models as architectures: the ``timm`` space.

A benchmark entry may name a model instead of describing an architecture,
``{"model": "timm:deit_tiny_patch16_224", "imagenet_acc": 72.2}``. The network is timm's,
built with ``pretrained=False`` (nothing is downloaded) and the benchmark's class count,
and everything else (statistics, zoo proxies, ranking, export) reads it by timm's module
names. A model is refused, with the reason, when it does not take 224x224 input, when
one of its transformer blocks (a module with an ``attn`` and an ``mlp``) lacks what the
statistics read (``attn.qkv``, ``attn.proj``, ``mlp.fc1``, ``mlp.act`` and ``mlp.fc2``), or
when the MLP activation is not (batch, tokens, fc1 width) (gated MLPs, 4-D maps).
ConViT is the common case: its first ten blocks use gated positional attention (``qk`` and
``v``, no ``qkv``); scoring only the two blocks that fit would misrepresent the network, so
it is refused rather than scored in part.

Parameter and MAC counts, block widths and token counts come from the model itself, built
on the ``meta`` device (no memory, no arithmetic) and run once with hooks: a Linear or
Conv2d costs (output elements) x (inputs per output), and each block's attention adds its
two matmuls, ``2 N^2`` times the q/k/v width for ``N`` tokens, which is the convention of
:func:`autoprox.spaces.architectures.count_macs` (it gives the same counts on the built-in
spaces' networks).

timm is an optional extra (``pip install 'autoprox[timm]'``; in a clone ``bash scripts/install_timm.sh``,
see ``docs/spaces.md``);
without it the ``timm`` space is listed but parsing a model says how to install it. The
space registers when :mod:`autoprox.networks` is imported (reading a benchmark does), or
through the ``autoprox.spaces`` entry point of an installed autoprox. Registering it does not import torch
(the functions that build a model do): listing spaces and the table commands stay light.
"""

from __future__ import annotations

import functools
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from autoprox.core.errors import ArchitectureError
from autoprox.spaces.base import SearchSpace
from autoprox.spaces.registry import register_space

if TYPE_CHECKING:
    import torch
    from torch import nn

__all__ = ["TIMM_PREFIX", "ModelInfo", "TimmArch", "TimmSpace", "count_by_hooks", "model_info"]

TIMM_PREFIX = "timm:"
IMAGE_SHAPE = (3, 224, 224)
INSTALL_HINT = ("install it with: pip install 'autoprox[timm]' (beside a usual torch), or in a clone of autoprox: "
                "bash scripts/install_timm.sh (docs/spaces.md#installing-timm)")


@dataclass(frozen=True)
class TimmArch:
    """A timm model named ``timm:<architecture>`` (no pretrained tag: the weights are never loaded)."""

    model: str

    space: ClassVar[str] = "timm"

    @property
    def timm_name(self) -> str:
        return self.model[len(TIMM_PREFIX):]


@dataclass(frozen=True)
class ModelInfo:
    """What the counts and descriptors need of a model (for a given class count)."""

    params: int
    macs: int
    blocks: tuple[tuple[int, int, int], ...]  # (width, heads, MLP hidden) per block
    tokens: tuple[int, ...]  # sequence length per block


def _timm(name: str):
    try:
        import timm
    except ImportError:
        raise ArchitectureError(f"timm arch: {TIMM_PREFIX}{name} needs timm, which is not installed; "
                                f"{INSTALL_HINT}") from None
    return timm


def timm_version() -> str | None:
    """The installed timm's version, or None."""
    try:
        import timm
    except ImportError:
        return None
    return timm.__version__


def _meta_model(name: str, num_classes: int) -> nn.Module:
    import torch

    timm = _timm(name)
    with torch.device("meta"):
        return timm.create_model(name, pretrained=False, num_classes=num_classes)


def _ranges(names: list[str]) -> str:
    """``blocks.0, blocks.1, blocks.2, blocks.5`` -> ``blocks.0-2, blocks.5``."""
    out: list[str] = []
    for name in names:
        head, _, tail = name.rpartition(".")
        if out and tail.isdigit():
            prev = out[-1]
            prev_head, _, prev_tail = prev.rpartition(".")
            last = prev_tail.split("-")[-1]
            if prev_head == head and last.isdigit() and int(last) + 1 == int(tail):
                out[-1] = f"{prev_head}.{prev_tail.split('-')[0]}-{tail}"
                continue
        out.append(name)
    return ", ".join(out)


@functools.cache
def check_model(name: str) -> None:
    """Refuse, with the reason, a timm model the statistics cannot read (cached per name)."""
    import torch

    from autoprox.networks.models import block_name_problems, transformer_blocks

    timm = _timm(name)
    label = f"timm arch: {TIMM_PREFIX}{name}"
    if "." in name:
        raise ArchitectureError(f"{label}: give the architecture without its pretrained tag "
                                f"({name.split('.')[0]!r}); weights are never loaded")
    if not timm.is_model(name):
        raise ArchitectureError(f"{label}: timm {timm.__version__} has no such model "
                                f"(timm.list_models('{name[:4]}*') lists similar names)")
    model = _meta_model(name, 100)
    size = tuple((getattr(model, "pretrained_cfg", None) or {}).get("input_size", IMAGE_SHAPE))
    if size != IMAGE_SHAPE:
        raise ArchitectureError(f"{label}: takes {size[1]}x{size[2]} input; the statistics use 224x224 images")
    problems = block_name_problems(model)
    if problems:
        by_reason: dict[str, list[str]] = {}
        for module, reason in problems:
            by_reason.setdefault(reason, []).append(module)
        found = "; ".join(f"{_ranges(modules)}: {reason}" for reason, modules in by_reason.items())
        raise ArchitectureError(f"{label}: refused, its blocks do not all have the modules the statistics read "
                                f"(attn.qkv, attn.proj, mlp.fc1, mlp.act, mlp.fc2): {found}")
    blocks = transformer_blocks(model)
    if not blocks:
        raise ArchitectureError(f"{label}: has no transformer blocks (modules with attn.qkv, attn.proj, "
                                f"mlp.fc1, mlp.act and mlp.fc2)")
    shapes: list[tuple[int, ...]] = []
    handles = [b.mlp.act.register_forward_hook(lambda _m, _i, out: shapes.append(tuple(out.shape))) for b in blocks]
    try:
        with torch.no_grad():
            model(torch.empty((1, *IMAGE_SHAPE), device="meta"))
    finally:
        for handle in handles:
            handle.remove()
    for block, shape in zip(blocks, shapes):
        if len(shape) != 3 or shape[-1] != block.mlp.fc1.out_features:
            raise ArchitectureError(f"{label}: refused, its MLP activations have shape {list(shape)} where the "
                                    f"statistics read (batch, tokens, fc1 width {block.mlp.fc1.out_features}) "
                                    f"(a gated MLP halves the width; a 4-D activation keeps the spatial map)")


def count_by_hooks(model: nn.Module, image: torch.Tensor) -> ModelInfo:
    """Parameters, MACs, block widths and tokens of ``model`` on one image (``image`` is (1, 3, H, W)).

    Linear and Conv2d layers cost (output elements) x (inputs per output); every transformer
    block's attention adds ``2 N^2 q`` (q k^T and attention x v) for ``N`` tokens of q/k/v width
    ``q``, times the sequences it sees per image (windows). Run on the ``meta`` device it costs
    nothing but the Python.
    """
    import torch
    from torch import nn

    from autoprox.networks.models import transformer_blocks

    macs = [0]
    tokens: list[int] = []
    blocks = transformer_blocks(model)

    def layer(module: nn.Module, _inputs, output: torch.Tensor) -> None:
        if isinstance(module, nn.Linear):
            macs[0] += output.numel() * module.in_features
        else:
            kernel = module.weight.shape[2] * module.weight.shape[3]
            macs[0] += output.numel() * (module.in_channels // module.groups) * kernel

    def attention(module: nn.Module, inputs) -> None:
        x = inputs[0]
        sequences, length = x.shape[0] // image.shape[0], x.shape[-2]
        macs[0] += sequences * 2 * length * length * (module.qkv.out_features // 3)
        tokens.append(length)

    handles = [m.register_forward_hook(layer) for m in model.modules() if isinstance(m, (nn.Linear, nn.Conv2d))]
    handles += [block.attn.register_forward_pre_hook(attention) for block in blocks]
    try:
        with torch.no_grad():
            model(image)
    finally:
        for handle in handles:
            handle.remove()
    widths = tuple((b.attn.qkv.in_features, b.attn.num_heads, b.mlp.fc1.out_features) for b in blocks)
    return ModelInfo(sum(p.numel() for p in model.parameters()), macs[0], widths, tuple(tokens))


@functools.lru_cache(maxsize=256)
def model_info(name: str, num_classes: int = 100) -> ModelInfo:
    """Counts of timm model ``name`` with a ``num_classes`` head (cached)."""
    import torch

    check_model(name)
    model = _meta_model(name, num_classes)
    model.train()
    return count_by_hooks(model, torch.empty((1, *IMAGE_SHAPE), device="meta"))


class TimmSpace(SearchSpace):
    """timm's models, each an architecture ``{"model": "timm:<name>"}``."""

    name = "timm"
    summary = "timm models by name ({\"model\": \"timm:deit_tiny_patch16_224\"}), built with pretrained=False"
    markers = ("model",)

    def parse(self, config: Mapping) -> TimmArch:
        if isinstance(config, TimmArch):
            return config
        if not isinstance(config, Mapping):
            raise ArchitectureError(f"timm arch: config must be a mapping, got {type(config).__name__}")
        for key in config:
            if key != "model":
                raise ArchitectureError(f"timm arch: unknown key {key!r}")
        model = config.get("model")
        if not isinstance(model, str) or not model.startswith(TIMM_PREFIX) or not re.fullmatch(
                r"timm:[A-Za-z0-9_.]+", model):
            raise ArchitectureError(f"timm arch: model must look like 'timm:deit_tiny_patch16_224', got {model!r}")
        check_model(model[len(TIMM_PREFIX):])
        return TimmArch(model)

    def to_config(self, arch: TimmArch) -> dict[str, Any]:
        return {"model": arch.model}

    def blocks(self, arch: TimmArch) -> list[tuple[int, int, int]]:
        return list(model_info(arch.timm_name).blocks)

    def count_params(self, arch: TimmArch, num_classes: int = 100) -> int:
        return model_info(arch.timm_name, num_classes).params

    def count_macs(self, arch: TimmArch, num_classes: int = 100) -> int:
        return model_info(arch.timm_name, num_classes).macs

    def draw(self, rng: random.Random) -> TimmArch:
        raise ArchitectureError("timm space: its architectures are the models a benchmark names; it cannot be "
                                "sampled (choose among them with vit-search --on-bench FILE)")

    def choices(self) -> dict[str, str]:
        version = timm_version()
        installed = f"timm {version}" if version else f"timm not installed: {INSTALL_HINT}"
        return {"model": "timm:<name> of any timm model taking 224x224 input whose blocks have attn.qkv, "
                         f"attn.proj, mlp.fc1, mlp.act and mlp.fc2 ({installed})"}

    def build_model(self, arch: TimmArch, num_classes: int = 100) -> nn.Module:
        check_model(arch.timm_name)
        return _timm(arch.timm_name).create_model(arch.timm_name, pretrained=False, num_classes=num_classes)


TIMM_SPACE = register_space(TimmSpace())
