"""The runtime of exported proxies, imported as the real module it is: block finding, the
statistics it collects (the engine's own), the MAC meter, and how it is copied into exports."""

from __future__ import annotations

import ast
import inspect

import pytest
import torch
from torch import nn

from autoprox.genome.aggregations import AGGREGATION_REGISTRY
from autoprox.networks import runtime
from autoprox.networks.models import build_model, transformer_blocks
from autoprox.networks.statistics import (
    InputSpec,
    compute_statistics,
    derived_seed,
    make_batch,
    torch_threads,
)
from autoprox.reports.export import _PROXY_FUNCTIONS, export_source, runtime_source
from autoprox.reports.simplify import readable_formula
from autoprox.primitives import PRIMITIVES


def _top_level_names(source: str) -> set[str]:
    names = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def test_the_runtime_imports_torch_only_and_its_names_do_not_collide():
    tree = ast.parse(inspect.getsource(runtime))
    imported = {alias.name for node in tree.body if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module for node in tree.body if isinstance(node, ast.ImportFrom)}
    # InvalidResult comes from autoprox.primitives.binary, whose source every exported file carries; the names
    # from autoprox.networks.names and ModelError from autoprox.core.errors, which runtime_source writes above
    # the copied code
    assert imported == {"__future__", "math", "warnings", "torch", "autoprox.core.errors", "autoprox.networks.names",
                        "autoprox.primitives.binary"}
    names = _top_level_names(runtime_source())
    assert {"SPREAD_NAMES", "DESCRIPTOR_NAMES", "ModelError"} <= names
    assert not names & set(PRIMITIVES), "a primitive's function would replace a runtime name in exports"
    assert not names & set(AGGREGATION_REGISTRY)
    glue = _top_level_names(_PROXY_FUNCTIONS.replace("__BLOCK_SCORE__", "0").replace("__AGGREGATE_SOURCE__", "")
                            .replace("__AGGREGATION__", "None").replace("__DESCRIPTOR_DOC__", ""))
    assert not names & glue
    assert {"find_blocks", "collect", "block_statistics", "read_descriptors", "score_blocks", "MacMeter"} <= names


def test_exports_carry_the_runtime_verbatim():
    genome = "block_std(frobenius_norm(F1g))"
    source = export_source(genome, readable_formula(genome, simplify=False))
    assert runtime_source() in source
    assert AGGREGATION_REGISTRY["block_std"].source.strip() in source
    assert "@register_aggregation" not in source


@pytest.mark.parametrize("space", ["autoformer", "pit"])
def test_the_engine_statistics_are_the_runtimes(af_small, pit_small, space):
    """compute_statistics (the engine, the cache) and block_statistics (exports) agree bit for bit."""
    arch = (af_small if space == "autoformer" else pit_small).archs[0]
    spec = InputSpec("gaussian", 2)
    engine = compute_statistics(arch, spec, 1, 100)
    model = build_model(arch, num_classes=100, seed=derived_seed(1, "model"))
    images, labels = make_batch(spec, 100, 1)
    with torch_threads(1):
        exported = runtime.block_statistics(model, images, labels)
    assert len(exported) == len(engine) == len(transformer_blocks(model))
    for ours, theirs in zip(engine, exported):
        assert ours.keys() == theirs.keys()
        for name in ours:
            assert torch.equal(ours[name], theirs[name]), name


class _GatedAttention(nn.Module):
    """ConViT's gated positional attention: qk and v instead of qkv."""

    def __init__(self, dim):
        super().__init__()
        self.qk = nn.Linear(dim, 2 * dim)
        self.v = nn.Linear(dim, dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        q, k = self.qk(x).chunk(2, dim=-1)
        return self.proj(torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ self.v(x))


class _Attention(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        return self.proj(torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ v)


class _Mlp(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.fc1, self.act, self.fc2 = nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class _ConViTLike(nn.Module):
    """Two gated blocks then one plain block, as ConViT's 10 + 2."""

    def __init__(self, dim=8):
        super().__init__()
        self.blocks = nn.ModuleList()
        for gated in (True, True, False):
            block = nn.Module()
            block.attn = _GatedAttention(dim) if gated else _Attention(dim)
            block.mlp = _Mlp(dim)
            self.blocks.append(block)
        self.head = nn.Linear(dim, 3)

    def forward(self, x):
        for block in self.blocks:
            x = x + block.attn(x)
            x = x + block.mlp(x)
        return self.head(x.mean(dim=1))


def test_skipped_blocks_are_warned_about_naming_how_many():
    model = _ConViTLike()
    with pytest.warns(UserWarning, match=r"found 1 of 3 transformer blocks; 2 with attn and mlp .* "
                                         r"\(first: blocks\.0\) are left out") as caught:
        blocks = runtime.find_blocks(model)
    assert [name for name, _ in blocks] == ["blocks.2"]
    assert len(caught) == 1 and "\n" not in str(caught[0].message)
    with pytest.warns(UserWarning, match="found 1 of 3"):
        stats = runtime.block_statistics(model, torch.randn(2, 5, 8), torch.tensor([0, 2]))
    assert len(stats) == 1


def test_a_model_whose_blocks_all_match_gives_no_warning(af_small, recwarn):
    runtime.find_blocks(build_model(af_small.archs[0]))
    assert not [w for w in recwarn if issubclass(w.category, UserWarning)]


def _frozen_pass(model, images, labels, freeze):
    freeze(model)
    flags = [p.requires_grad for p in model.parameters()]
    with torch_threads(1):
        stats = runtime.block_statistics(model, images, labels, spread=True)
    assert [p.requires_grad for p in model.parameters()] == flags, "requires_grad is restored"
    assert all(p.grad is None for p in model.parameters() if not p.requires_grad), "a frozen weight keeps no .grad"
    return stats


def test_frozen_weights_give_the_statistics_of_trainable_ones(pit_small):
    """A partly or wholly frozen ViT (a fine-tuning setup) gets the gradients of the weights the statistics read
    for the pass, the same numbers as unfrozen, and is left frozen (was: AttributeError on a None .grad)."""
    arch = pit_small.archs[0]
    images, labels = make_batch(InputSpec("gaussian", 2), 100, 1)
    passes = [_frozen_pass(build_model(arch, num_classes=100, seed=0), images, labels, freeze) for freeze in (
        lambda model: None,
        lambda model: transformer_blocks(model)[0].attn.qkv.weight.requires_grad_(False),
        lambda model: model.requires_grad_(False))]
    for stats in passes[1:]:  # the same numbers, to rounding (a frozen bias changes how a Linear's backward sums)
        assert len(stats) == len(passes[0])
        for ours, theirs in zip(passes[0], stats):
            assert ours.keys() == theirs.keys()
            for name in ours:
                torch.testing.assert_close(theirs[name], ours[name], rtol=1e-4, atol=1e-6, msg=name)


class _NoAttention(_ConViTLike):
    """Blocks with timm's names whose forward skips attention: attn.qkv and attn.proj get no gradient."""

    def __init__(self, dim=8):
        super().__init__(dim)
        for block in self.blocks:
            block.attn = _Attention(dim)

    def forward(self, x):
        for block in self.blocks:
            x = x + block.mlp(x)
        return self.head(x.mean(dim=1))


def test_a_statistic_the_pass_cannot_give_is_an_error_only_where_it_is_needed():
    model, inputs, targets = _NoAttention(), torch.randn(2, 5, 8), torch.tensor([0, 2])
    with pytest.raises(runtime.MissingStatistic, match=r"^blocks\.0\.attn\.qkv\.weight has no gradient after the "
                                                       r"pass \(the model's forward does not use it, or it is not "
                                                       r"a leaf tensor, as a parametrized weight is\), so this "
                                                       r"proxy's F1g cannot be read$"):
        runtime.block_statistics(model, inputs, targets)
    with pytest.raises(runtime.MissingStatistic, match=r"^blocks\.0\.attn\.proj\.weight .* S2g cannot be read$"):
        runtime.collect(model, inputs, targets, spread=True, needs={"F3g", "S2g"})
    stats, _ = runtime.collect(model, inputs, targets, spread=True, needs={"F1", "F3g", "F4g", "S3g"})
    assert {"F1", "F2", "F3", "F3g", "F4", "F4g", "S3g", "S4", "S4g"} == set(stats[0]) == set(stats[2])
