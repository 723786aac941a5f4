"""PyTorch builders: exact parameter counts, timm names, forward shapes, MACs by hooks, seeding."""

from __future__ import annotations

import math
import random

import pytest
import torch
from torch import nn

from autoprox.networks import runtime
from autoprox.networks.models import (
    Attention,
    Block,
    Mlp,
    build_model,
    transformer_blocks,
)
from autoprox.spaces.architectures import (
    count_macs,
    count_params,
    parse_arch,
    sample_arch,
    transformer_widths,
)
from tests.spaces.test_spaces import TABLE

torch.set_num_threads(1)

AF_SMALLEST = {"hidden_dim": 192, "depth": 12, "mlp_ratio": [3.5] * 12, "num_heads": [3] * 12}
PIT_SMALL = {"base_dim": 16, "mlp_ratio": 2, "depth": [1, 4, 2], "num_heads": [2, 2, 4]}
PIT_BIGGEST = {"base_dim": 40, "mlp_ratio": 8, "depth": [3, 8, 6], "num_heads": [8, 8, 8]}


def _numel(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("cfg,params", [(c, p) for c, p, _ in TABLE])
def test_table_param_counts(cfg, params):
    model = build_model(cfg)
    assert _numel(model) == params == count_params(parse_arch(cfg))


def test_sampled_and_extreme_param_counts():
    rng = random.Random(11)
    archs = [sample_arch(s, rng) for s in ("autoformer", "pit") for _ in range(3)]
    archs += [parse_arch(AF_SMALLEST), parse_arch(PIT_BIGGEST)]
    for arch in archs:
        for classes in (100, 7):
            assert _numel(build_model(arch, num_classes=classes)) == count_params(arch, classes), arch


def test_timm_names_autoformer():
    model = build_model(AF_SMALLEST)
    names = dict(model.named_parameters())
    for key, shape in [
        ("patch_embed.proj.weight", (192, 3, 16, 16)),
        ("cls_token", (1, 1, 192)),
        ("pos_embed", (1, 197, 192)),
        ("blocks.0.norm1.weight", (192,)),
        ("blocks.0.attn.qkv.weight", (576, 192)),
        ("blocks.0.attn.qkv.bias", (576,)),
        ("blocks.0.attn.proj.weight", (192, 192)),
        ("blocks.0.norm2.bias", (192,)),
        ("blocks.0.mlp.fc1.weight", (672, 192)),
        ("blocks.11.mlp.fc2.weight", (192, 672)),
        ("norm.weight", (192,)),
        ("head.weight", (100, 192)),
    ]:
        assert tuple(names[key].shape) == shape, key
    assert isinstance(model.blocks, nn.ModuleList)
    assert isinstance(model.blocks[0].mlp.act, nn.GELU)
    assert not any(isinstance(m, nn.Dropout) for m in model.modules())


def test_timm_names_pit():
    model = build_model(TABLE[3][0])  # base 16, heads [2, 4, 4] -> dims [32, 64, 64], depth [2, 8, 4]
    names = dict(model.named_parameters())
    for key, shape in [
        ("patch_embed.proj.weight", (32, 3, 16, 16)),
        ("pos_embed", (1, 32, 27, 27)),
        ("cls_token", (1, 1, 32)),
        ("stages.0.blocks.0.attn.qkv.weight", (96, 32)),
        ("stages.0.blocks.1.mlp.fc1.weight", (192, 32)),
        ("stages.1.blocks.7.mlp.fc2.weight", (64, 384)),
        ("stages.2.blocks.3.attn.proj.weight", (64, 64)),
        ("pools.0.conv.weight", (64, 1, 3, 3)),
        ("pools.0.fc.weight", (64, 32)),
        ("pools.1.conv.weight", (64, 1, 3, 3)),
        ("norm.weight", (64,)),
        ("head.weight", (100, 64)),
    ]:
        assert tuple(names[key].shape) == shape, key
    assert model.pools[0].conv.groups == 32 and model.pools[0].conv.stride == (2, 2)
    assert all(isinstance(s.blocks, nn.ModuleList) for s in model.stages)
    assert not any(isinstance(m, nn.Dropout) for m in model.modules())


@pytest.mark.parametrize("cfg", [TABLE[0][0], TABLE[3][0]])
def test_transformer_blocks_order_matches_widths(cfg):
    arch = parse_arch(cfg)
    blocks = transformer_blocks(build_model(arch))
    assert all(isinstance(b, Block) for b in blocks)
    got = [(b.norm1.normalized_shape[0], b.attn.num_heads, b.mlp.fc1.out_features) for b in blocks]
    assert got == transformer_widths(arch)


@pytest.mark.parametrize("cfg,classes", [(AF_SMALLEST, 100), (PIT_SMALL, 10)])
def test_forward_shape(cfg, classes):
    model = build_model(cfg, num_classes=classes, seed=0).eval()
    with torch.no_grad():
        out = model(torch.randn(2, 3, 224, 224))
    assert out.shape == (2, classes) and torch.isfinite(out).all()


def _hook_macs(model: nn.Module) -> float:
    """MACs of one 224x224 image measured on the real network by the runtime's forward hooks."""
    return runtime.read_descriptors(model.eval(), torch.randn(1, 3, 224, 224), ("macs",), head_classes=None)["macs"]


@pytest.mark.parametrize("cfg,macs", [(TABLE[0][0], TABLE[0][2]), (TABLE[5][0], TABLE[5][2])])
def test_count_macs_matches_hooked_network(cfg, macs):
    model = build_model(cfg, seed=0)
    assert _hook_macs(model) == count_macs(parse_arch(cfg)) == macs


@pytest.mark.parametrize("space", ["autoformer", "pit"])
def test_macs_against_torch_flop_counter(space):
    """Both MAC counters (the analytic count_macs, the runtime's hooks) against
    torch.utils.flop_counter on real built models: flops = 2 x MACs.

    The flop counter counts matrix products and convolutions (aten addmm, mm, bmm,
    convolution), as both MAC counters do: Linear layers, the patch embeddings, PiT's
    depthwise pooling convolutions and class-token Linears, the head, and q @ k^T and
    attn @ v (attention runs through SDPA's math kernel, which the counter sees as bmm).
    Excluded by every counter: biases, LayerNorm, GELU, softmax and its scaling,
    residual additions, position embeddings, mean pooling.
    """
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    rng = random.Random(3)
    for arch in [sample_arch(space, rng) for _ in range(2)]:
        for classes in (100, 10):
            model = build_model(arch, num_classes=classes, seed=0).eval()
            images = torch.randn(2, 3, 224, 224)
            with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
                model(images)
            counted = counter.get_flop_counts()["Global"]
            assert {str(op) for op in counted} <= {"aten.addmm", "aten.mm", "aten.bmm", "aten.convolution"}
            macs = count_macs(arch, classes)
            assert counter.get_total_flops() == 2 * 2 * macs, (arch, classes)  # two images
            assert _hook_macs(model) == macs


def test_attention_matches_manual_softmax():
    torch.manual_seed(0)
    attn = Attention(216, 4)
    assert attn.head_dim == 54
    x = torch.randn(2, 5, 216)
    b, n, c = x.shape
    q, k, v = attn.qkv(x).reshape(b, n, 3, 4, 54).permute(2, 0, 3, 1, 4)
    weights = (q @ k.transpose(-2, -1) / math.sqrt(54)).softmax(-1)
    ref = attn.proj((weights @ v).transpose(1, 2).reshape(b, n, c))
    torch.testing.assert_close(attn(x), ref, rtol=1e-5, atol=1e-5)


def test_block_structure():
    blk = Block(240, 3, 3.5)
    assert blk.attn.head_dim == 80 and blk.mlp.fc1.out_features == 840
    assert blk.norm1.eps == 1e-6 and blk.norm2.eps == 1e-6
    mlp = Mlp(8, 16)
    x = torch.randn(3, 8)
    torch.testing.assert_close(mlp(x), mlp.fc2(torch.nn.functional.gelu(mlp.fc1(x))))


def test_autoformer_pools_patch_tokens_only():
    model = build_model(AF_SMALLEST, seed=0).eval()
    x = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        feats = model.norm(model.forward_features(x))  # every token after the last block, then the final norm
        torch.testing.assert_close(model(x), model.head(feats[:, 1:].mean(1)))
        assert not torch.allclose(model(x), model.head(feats.mean(1)))


def test_initialisation():
    af = build_model(AF_SMALLEST, seed=1)
    lin_w = torch.cat([m.weight.flatten() for m in af.modules() if isinstance(m, nn.Linear)])
    assert abs(lin_w.std().item() - 0.02) < 0.001
    assert all((m.bias == 0).all() for m in af.modules() if isinstance(m, nn.Linear))
    assert abs(af.pos_embed.std().item() - 0.02) < 0.002
    conv = af.patch_embed.proj  # PyTorch default: uniform within 1/sqrt(fan_in)
    assert conv.weight.abs().max().item() <= 1 / math.sqrt(768) + 1e-7 and conv.bias.abs().sum() > 0
    pit = build_model(PIT_SMALL, seed=1)
    qkv = pit.stages[0].blocks[0].attn.qkv  # PiT keeps PyTorch's default Linear init
    assert qkv.bias.abs().sum() > 0 and qkv.weight.abs().max().item() <= 1 / math.sqrt(32) + 1e-7
    assert abs(pit.pos_embed.std().item() - 0.02) < 0.002
    norms = [m for m in pit.modules() if isinstance(m, nn.LayerNorm)]
    assert all((n.weight == 1).all() and (n.bias == 0).all() for n in norms)


@pytest.mark.parametrize("cfg", [AF_SMALLEST, PIT_SMALL])
def test_seed_reproducible_and_rng_untouched(cfg):
    torch.manual_seed(42)
    state = torch.random.get_rng_state()
    a = build_model(cfg, seed=5)
    b = build_model(cfg, seed=5)
    c = build_model(cfg, seed=6)
    assert torch.equal(torch.random.get_rng_state(), state)
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not all(torch.equal(sa[k], sc[k]) for k in sa)
    # without a seed the global RNG drives the build (and advances)
    build_model(cfg)
    assert not torch.equal(torch.random.get_rng_state(), state)


def test_build_model_accepts_record_and_config():
    arch = parse_arch(PIT_SMALL)
    a, b = build_model(arch, seed=3), build_model(PIT_SMALL, seed=3)
    assert a.arch == b.arch == arch
    assert all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters()))
