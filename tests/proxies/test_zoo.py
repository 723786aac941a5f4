"""The proxy zoo: every proxy against a value derived by hand on a tiny network, then a
smoke run on one small real architecture of each space."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from autoprox.proxies import zoo
from autoprox.proxies import zoo_scores
from autoprox.proxies import zoo_jacobian as jacobian
from autoprox.proxies import zoo_measures as measures
from autoprox.networks.models import Attention, Block, Mlp
from autoprox.networks.statistics import (
    InputSpec,
    compute_statistics,
    derived_seed,
    make_batch,
)
from autoprox.spaces.architectures import arch_to_config, count_params

pytestmark = pytest.mark.slow

# --------------------------------------------------------------- a linear classifier
# logits z = W x (no bias), L = mean cross-entropy: dL/dW = (P - Y)^T X / B in closed form.

W = np.array([[0.5, -1.0, 0.2], [0.3, 0.4, -0.6]])
X = np.array([[1.0, 2.0, -1.0], [0.5, -1.5, 2.0]])
Y = np.array([0, 1])


def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _linear_net(weight: np.ndarray = W) -> nn.Module:
    net = nn.Sequential(nn.Linear(weight.shape[1], weight.shape[0], bias=False)).double()
    with torch.no_grad():
        net[0].weight.copy_(torch.from_numpy(weight))
    return net


def _batch(x: np.ndarray = X, y: np.ndarray = Y):
    return torch.from_numpy(x), torch.from_numpy(y)


def _hand_gradient(x=X, y=Y, w=W):
    p = _softmax(x @ w.T)
    onehot = np.eye(w.shape[0])[y]
    return (p - onehot).T @ x / len(x), p, onehot


def test_snip_plain_grad_norm_by_hand():
    g, _, _ = _hand_gradient()
    assert measures.snip(_linear_net(), *_batch()) == pytest.approx(np.abs(g * W).sum(), rel=1e-12)
    assert measures.plain(_linear_net(), *_batch()) == pytest.approx((g * W).sum(), rel=1e-12)
    assert measures.grad_norm(_linear_net(), *_batch()) == pytest.approx(np.sqrt((g ** 2).sum()), rel=1e-12)


def test_grasp_by_hand():
    """H g for softmax regression: mean_n (diag(p_n) - p_n p_n^T) (g x_n) x_n^T."""
    g, p, _ = _hand_gradient()
    hg = np.zeros_like(W)
    for n in range(len(X)):
        curvature = np.diag(p[n]) - np.outer(p[n], p[n])
        hg += np.outer(curvature @ (g @ X[n]), X[n]) / len(X)
    assert measures.grasp(_linear_net(), *_batch()) == pytest.approx(-(W * hg).sum(), rel=1e-10)


def test_fisher_by_hand():
    """The layer output is the logits z; dL/dz = (P - Y) / B; 0.5 mean_n sum_c (z g)^2."""
    _, p, onehot = _hand_gradient()
    z = X @ W.T
    dz = (p - onehot) / len(X)
    expected = 0.5 * ((z * dz) ** 2).mean(axis=0).sum()
    assert measures.fisher(_linear_net(), *_batch()) == pytest.approx(expected, rel=1e-10)


def test_zico_by_hand():
    """Two groups of one image: per weight mean|g| / std(g) with std = |g1 - g2| / 2."""
    g1, _, _ = _hand_gradient(X[:1], Y[:1])
    g2, _, _ = _hand_gradient(X[1:], Y[1:])
    mean_abs = (np.abs(g1) + np.abs(g2)) / 2
    std = np.abs(g1 - g2) / 2
    keep = std != 0
    expected = math.log((mean_abs[keep] / std[keep]).sum())
    assert measures.zico(_linear_net(), *_batch(), groups=2) == pytest.approx(expected, rel=1e-10)
    with pytest.raises(measures.ProxyFailure, match="at least 2 images"):
        measures.zico(_linear_net(), *_batch(X[:1], Y[:1]))


def test_te_nas_by_hand():
    """d(sum of logits)/dW = 1 x_n^T, so NTK = C X X^T: X = [e1, 2 e2] gives cond 4."""
    x = np.array([[1.0, 0.0, 0.0], [0.0, 2.0, 0.0]])
    assert measures.te_nas(_linear_net(), torch.from_numpy(x)) == pytest.approx(-4.0, rel=1e-12)
    with pytest.raises(measures.ProxyFailure, match="singular"):
        measures.te_nas(_linear_net(), torch.from_numpy(np.array([[1.0, 0, 0], [2.0, 0, 0]])))


def test_synflow_by_hand_and_signs_restored():
    """Bias-free linear chain: every layer's sum |dR/dw * w| equals R = 1^T |W2||W1| 1."""
    w1 = np.array([[0.5, -1.0, 0.2], [-0.3, 0.4, 0.6]])
    w2 = np.array([[2.0, -0.5]])
    net = nn.Sequential(nn.Linear(3, 2, bias=False), nn.Linear(2, 1, bias=False)).double()
    with torch.no_grad():
        net[0].weight.copy_(torch.from_numpy(w1))
        net[1].weight.copy_(torch.from_numpy(w2))
    r = (np.abs(w2) @ np.abs(w1) @ np.ones(3)).sum()
    assert measures.synflow(net, torch.ones(1, 3)) == pytest.approx(2 * r, rel=1e-12)
    np.testing.assert_array_equal(net[0].weight.detach().numpy(), w1)  # signs restored


def test_l2_norm_by_hand():
    w2 = np.array([[3.0, -4.0]])
    net = nn.Sequential(nn.Linear(3, 2), nn.Linear(2, 1)).double()
    with torch.no_grad():
        net[0].weight.copy_(torch.from_numpy(W))
        net[1].weight.copy_(torch.from_numpy(w2))
    # biases left out: ||W||_F + ||w2||_F = sqrt(0.25 + 1 + 0.04 + 0.09 + 0.16 + 0.36) + 5
    assert measures.l2_norm(net) == pytest.approx(math.sqrt(1.9) + 5.0, rel=1e-12)


# ---------------------------------------------- input Jacobians: JacCov, EPE-NAS, Zen-NAS
# f(x) = sum_j (W x)_j^2 has the input gradient 2 W^T W x: each image its own Jacobian row.


class _Square(nn.Module):
    def forward(self, x):
        return x * x


def _square_net(weight: np.ndarray = W) -> nn.Module:
    return nn.Sequential(_linear_net(weight)[0], _Square())


def _pearson(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a - a.mean(), b - b.mean()
    return float(a @ b / math.sqrt((a @ a) * (b @ b)))


def _jacov_of_two(r: float, k: float = 1e-5) -> float:
    """The correlation matrix [[1, r], [r, 1]] has the eigenvalues 1 + r and 1 - r."""
    return -sum(math.log(v + k) + 1.0 / (v + k) for v in (1.0 + r, 1.0 - r))


def test_jacov_by_hand():
    rows = 2 * X @ W.T @ W  # the two images' Jacobian rows
    expected = _jacov_of_two(_pearson(rows[0], rows[1]))
    assert jacobian.jacov(_square_net(), torch.from_numpy(X)) == pytest.approx(expected, rel=1e-10)
    # a linear network: every image has the row 1^T W, correlation 1, eigenvalues 2 and 0
    assert jacobian.jacov(_linear_net(), torch.from_numpy(X)) == pytest.approx(_jacov_of_two(1.0), rel=1e-10)
    with pytest.raises(measures.ProxyFailure, match="at least 2 images"):
        jacobian.jacov(_square_net(), torch.from_numpy(X[:1]))
    with pytest.raises(measures.ProxyFailure, match="constant"):  # the row 1^T W = (1, 1, 1)
        jacobian.jacov(_linear_net(np.array([[0.5, 0.5, 0.5], [0.5, 0.5, 0.5]])), torch.from_numpy(X))


def test_epe_nas_by_hand():
    """Labels (0, 1, 0, 2) of a 2-class network: label 0's two rows give
    s = 2 log(1 + k) + 2 log(|r| + k); labels 1 and 2 have one image, log(1 + k) each."""
    k = 1e-5
    x = np.array([[1.0, 2.0, -1.0], [0.5, -1.5, 2.0], [2.0, 0.5, 1.0], [-1.0, 1.0, 0.5]])
    rows = 2 * x @ W.T @ W
    r = _pearson(rows[0], rows[2])
    label_0 = 2 * math.log(1 + k) + 2 * math.log(abs(r) + k)
    expected = abs(label_0) + 2 * math.log(1 + k)
    labels = torch.tensor([0, 1, 0, 2])
    assert jacobian.epe_nas(_square_net(), torch.from_numpy(x), labels) == pytest.approx(expected, rel=1e-10)
    with pytest.raises(measures.ProxyFailure, match="two images of one label"):
        jacobian.epe_nas(_square_net(), torch.from_numpy(x), torch.tensor([0, 1, 2, 3]))


def test_epe_nas_pairwise_form_by_hand():
    """Over 100 classes: s_c divided by the label's image count, single images left out,
    sum over ordered pairs |s_c - s_c'| over the labels scored. Rows (1,2,3), (3,2,1): r = -1;
    (1,2,3), (1,3,2): r = 0.5."""
    k = 1e-5
    rows = np.array([[1.0, 2, 3], [3, 2, 1], [1, 2, 3], [1, 3, 2], [0, 1, 5]])
    labels = [5, 5, 7, 7, 9]
    s5 = (2 * math.log(1 + k) + 2 * math.log(1 + k)) / 2
    s7 = (2 * math.log(1 + k) + 2 * math.log(0.5 + k)) / 2
    assert jacobian.epe_score(rows, labels, 101) == pytest.approx(2 * abs(s5 - s7) / 2, rel=1e-10)
    few = abs(2 * s5) + abs(2 * s7) + math.log(1 + k)  # at most 100 classes: the sums themselves, label 9 too
    assert jacobian.epe_score(rows, labels, 100) == pytest.approx(few, rel=1e-10)


class _LinearBlock(nn.Module):
    """A transformer block by timm's names that is a linear map on one token: attention over a
    single token returns v, and the MLP's GELU is replaced by the identity."""

    def __init__(self):
        super().__init__()
        self.attn = Attention(2, 1)
        self.mlp = Mlp(2, 2)
        self.mlp.act = nn.Identity()
        self.unused_bn = nn.BatchNorm2d(2)

    def forward(self, x):
        return self.mlp(self.attn(x))


def test_zen_score_by_hand():
    """f(x) = A x + c, so f(x) - f(x + g e) = -g A e: log mean_images sum |g A e|, plus
    log sqrt(mean running_var) for the (unused) BatchNorm: log sqrt(4) = log 2."""
    net = _LinearBlock().double()
    wv, proj, fc1, fc2 = np.diag([0.5, 2.0]), np.array([[1.0, -1.0], [0.5, 2.0]]), np.diag([3.0, -1.0]), \
        np.array([[1.0, 1.0], [0.0, 2.0]])
    with torch.no_grad():
        net.attn.qkv.weight[4:].copy_(torch.from_numpy(wv))
        for layer, weight in ((net.attn.proj, proj), (net.mlp.fc1, fc1), (net.mlp.fc2, fc2)):
            layer.weight.copy_(torch.from_numpy(weight))
        net.unused_bn.running_var.fill_(4.0)
    a = fc2 @ fc1 @ proj @ wv
    images = torch.tensor([[[1.0, -2.0]], [[0.5, 0.5]]], dtype=torch.float64)  # (B, tokens, dim)
    noise = np.array([[[1.0, 2.0]], [[-3.0, 0.5]]])
    gap = np.mean([np.abs(0.01 * a @ e[0]).sum() for e in noise])
    expected = math.log(gap) + math.log(2.0)
    assert jacobian.zen_score(net, images, torch.from_numpy(noise)) == pytest.approx(expected, rel=1e-9)
    with pytest.raises(measures.ProxyFailure, match="does not move"):
        jacobian.zen_score(net, images, torch.zeros(2, 1, 2, dtype=torch.float64))
    with pytest.raises(measures.ProxyFailure, match="not finite"):
        jacobian.zen_score(net, images, torch.full((2, 1, 2), float("nan"), dtype=torch.float64))
    with pytest.raises(measures.ProxyFailure, match="no transformer block"):
        jacobian.zen_score(_linear_net(), torch.from_numpy(X), torch.from_numpy(X))


def test_zen_gaussian_initialisation_is_zen_nas_and_seeded():
    def net():
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(64, 64), nn.LayerNorm(64), nn.BatchNorm1d(64))

    first, second = net(), net()
    jacobian.gaussian_init(first, torch.Generator().manual_seed(5))
    jacobian.gaussian_init(second, torch.Generator().manual_seed(5))
    weight = first[0].weight.detach()
    assert torch.equal(weight, second[0].weight) and abs(float(weight.std()) - 1.0) < 0.05
    assert abs(float(weight.mean())) < 0.05 and float(first[0].bias.detach().abs().sum()) == 0.0
    assert torch.equal(first[1].weight, net()[1].weight)  # LayerNorm keeps its initialisation
    assert float(first[2].weight.detach().sum()) == 64.0 and float(first[2].bias.detach().abs().sum()) == 0.0
    # zen: the weights, then the noise, from one generator
    block, again = _LinearBlock(), _LinearBlock()
    images = torch.randn(3, 1, 2, generator=torch.Generator().manual_seed(1))
    value = jacobian.zen(block, images, torch.Generator().manual_seed(2))
    generator = torch.Generator().manual_seed(2)
    jacobian.gaussian_init(again, generator)
    noise = torch.randn(images.shape, generator=generator)
    assert value == pytest.approx(jacobian.zen_score(again, images, noise), rel=1e-12)
    assert value == pytest.approx(jacobian.zen(_LinearBlock(), images, torch.Generator().manual_seed(2)), rel=1e-12)


def _mlp_only(hidden_weight: np.ndarray) -> nn.Module:
    class MlpNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.mlp = Mlp(2, 3)

        def forward(self, x):
            return self.mlp(x).mean(dim=1)

    net = MlpNet().double()
    with torch.no_grad():
        net.mlp.fc1.weight.copy_(torch.from_numpy(hidden_weight))
        net.mlp.fc1.bias.zero_()
    return net


def test_nwot_by_hand():
    """Codes (1,0,0), (0,1,1), (1,1,1) of 3 units: K = [[3,0,1],[0,3,2],[1,2,3]], det 12."""
    net = _mlp_only(np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]))
    images = torch.tensor([[[1.0, -1.0]], [[-1.0, 2.0]], [[2.0, 1.0]]], dtype=torch.float64)  # (B, tokens, dim)
    assert measures.nwot(net, images) == pytest.approx(math.log(12.0), rel=1e-12)
    same = torch.tensor([[[1.0, -1.0]], [[1.0, -1.0]]], dtype=torch.float64)
    with pytest.raises(measures.ProxyFailure, match="singular"):
        measures.nwot(net, same)


class _TinyViT(nn.Module):
    """One attention module then one MLP (GELU replaced by identity), no residual: with a
    single token the attention output is v, so the network is a linear chain."""

    def __init__(self):
        super().__init__()
        self.attn = Attention(2, 1)
        self.mlp = Mlp(2, 2)
        self.mlp.act = nn.Identity()

    def forward(self, x):
        return self.mlp(self.attn(x))


def test_dss_by_hand():
    a, b, c, d, e, f, g, h = 0.5, 2.0, 1.5, 0.25, 3.0, 0.5, 1.0, 2.0
    q_k = np.array([[0.3, -0.2], [-0.1, 0.4], [0.2, 0.2], [-0.5, 0.1]])
    qkv = np.vstack([q_k, [[-a, 0.0], [0.0, b]]])  # v rows diag(a, b), one sign flipped
    net = _TinyViT().double()
    with torch.no_grad():
        for layer, weight in ((net.attn.qkv, qkv), (net.attn.proj, np.diag([c, -d])),
                              (net.mlp.fc1, np.diag([e, f])), (net.mlp.fc2, np.diag([g, -h]))):
            layer.weight.copy_(torch.from_numpy(weight))
            layer.bias.zero_()
    r = g * e * c * a + h * f * d * b  # R = 1^T |fc2||fc1||proj||Wv| 1
    # proj's gradient is (e g, f h)^T (a, b), rank one; qkv's v rows get (c e g, d f h)^T (1, 1), q and k none
    nuc_grad_proj = math.hypot(e * g, f * h) * math.hypot(a, b)
    nuc_grad_qkv = math.hypot(c * e * g, d * f * h) * math.sqrt(2)
    gram = np.abs(qkv).T @ np.abs(qkv)  # nuclear norm of a 6x2 matrix: sqrt(tr M + 2 sqrt(det M))
    nuc_qkv = math.sqrt(np.trace(gram) + 2 * math.sqrt(np.linalg.det(gram)))
    expected = nuc_grad_qkv * nuc_qkv + nuc_grad_proj * (c + d) + 2 * r  # MLP saliency: R per layer
    assert measures.dss(net, torch.ones(1, 1, 2)) == pytest.approx(expected, rel=1e-9)
    assert float(net.mlp.fc2.weight.detach()[1, 1]) == -h  # signs restored


def test_tvt_student_capability_by_hand():
    blocks = nn.Sequential(Block(2, 1, 2.0), Block(2, 1, 2.0))
    with torch.no_grad():
        for module in blocks.modules():
            if isinstance(module, nn.Linear):
                module.weight.fill_(0.5)
    # per block 12 + 4 + 8 + 8 = 32 weights of 0.5: sqrt(32 / 4) = sqrt(8); biases and LayerNorms left out
    assert measures.student_capability(blocks) == pytest.approx(2 * math.sqrt(8), rel=1e-12)


def test_tvt_teacher_distance_by_hand():
    tokens = torch.zeros(1, 5, 2)
    tokens[0, 0] = 9.0  # the class token, dropped
    tokens[0, 1, 0] = 1.0  # grid position (0, 0)
    grid = measures.tokens_to_grid(tokens)
    assert grid.shape == (1, 2, 2, 2) and float(grid[0, 0, 0, 0]) == 1.0 and float(grid.abs().sum()) == 1.0
    # student map (1, 0, 0, 0); teacher map (1, 1, 1, 1) / 2: distance sqrt(4 * 0.25) = 1
    assert measures.teacher_distance(grid, torch.ones(1, 3, 2, 2)) == pytest.approx(1.0, rel=1e-12)
    # a teacher map of another size is resized (bilinear) before the mapping
    assert measures.teacher_distance(grid, torch.ones(1, 3, 8, 8)) == pytest.approx(1.0, rel=1e-12)
    with pytest.raises(measures.ProxyFailure, match=r"\(B, C, H, W\)"):
        measures.teacher_distance(grid, torch.ones(1, 3))
    with pytest.raises(measures.ProxyFailure, match="square grid"):
        measures.tokens_to_grid(torch.zeros(1, 7, 2))


def test_tvt_min_max_combination_by_hand():
    # f(M_s) = (0, .5, 1), f(M_t) = (1, 0, .5): 2 f(M_s) - 3 f(M_t)
    np.testing.assert_allclose(measures.tvt_combine([1, 2, 3], [0.5, 0.1, 0.3]), [-3.0, 1.0, 0.5])
    np.testing.assert_allclose(measures.tvt_combine([1, 2, 3], None), [0.0, 1.0, 2.0])
    np.testing.assert_array_equal(measures.min_max([4.0, 4.0]), [0.0, 0.0])
    raws = [{"capability": 1.0, "distance": 0.5}, {"capability": 3.0, "distance": 0.1}]
    np.testing.assert_allclose(zoo_scores.set_scores("tvt", raws), [-3.0, 2.0])
    np.testing.assert_allclose(zoo_scores.set_scores("tvt_l2", raws), [0.0, 2.0])


def test_missing_layers_are_failures():
    with pytest.raises(measures.ProxyFailure, match="no MLP"):
        measures.nwot(_linear_net(), torch.from_numpy(X))
    with pytest.raises(measures.ProxyFailure, match="no attention"):
        measures.dss(_linear_net(), torch.ones(1, 3))
    with pytest.raises(measures.ProxyFailure, match="no Linear or Conv2d"):
        measures.snip(nn.Sequential(nn.Identity()), torch.ones(1, 3), torch.zeros(1, dtype=torch.long))


# ------------------------------------------------------- real architectures, both spaces

SPEC = InputSpec("gaussian", batch_size=2)


@pytest.fixture(scope="module")
def small_archs(af_bench, pit_bench):
    return {b.space: min(b.archs, key=count_params) for b in (af_bench, pit_bench)}


def test_same_seed_same_network_and_batch_as_the_statistics(small_archs):
    arch = small_archs["autoformer"]
    stats = compute_statistics(arch, SPEC, 3, 100)
    inputs = zoo.ZooInputs(arch, SPEC, 3, 100)
    assert torch.equal(inputs.model.blocks[0].attn.qkv.weight.detach(), stats[0]["F1"])
    assert inputs.model.training
    images, labels = make_batch(SPEC, 100, 3)
    again, _ = inputs.batch()
    assert torch.equal(images, again)
    assert derived_seed(3, "model") != 3  # the model seed is derived, as in compute_statistics


@pytest.mark.parametrize("space", ["autoformer", "pit"])
def test_every_proxy_runs_on_a_real_architecture(small_archs, space):
    arch = small_archs[space]
    values = {}
    for name in zoo.ZOO:
        # EPE-NAS needs two images of one label: a one-class head gives the batch's two images one label
        raw = zoo_scores.raw_value(name, arch, SPEC, 0, 1 if name == "epe_nas" else 100)
        value = raw["capability"] if isinstance(raw, dict) else raw
        assert math.isfinite(value), name
        values[name] = value
    assert values["nwot"] > 0 and values["synflow"] > 0 and values["dss"] > 0 and values["te_nas"] < 0
    assert values["tvt"] == values["tvt_l2"]  # no teacher: the student-capability part
    assert values["l2_norm"] > 0 and values["epe_nas"] > 0
    assert len(set(make_batch(SPEC, 100, 0)[1].tolist())) == 2  # two labels: EPE-NAS fails, with the reason
    with pytest.raises(measures.ProxyFailure, match="two images of one label"):
        zoo_scores.raw_value("epe_nas", arch, SPEC, 0, 100)


def test_values_do_not_depend_on_threads_and_repeat_exactly(small_archs):
    arch = small_archs["pit"]
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        first = zoo_scores.raw_value("snip", arch, SPEC, 1, 100)
        torch.set_num_threads(1)
        second = zoo_scores.raw_value("snip", arch, SPEC, 1, 100)
    finally:
        torch.set_num_threads(before)
    assert first == second
    assert zoo_scores.raw_value("snip", arch, SPEC, 2, 100) != first  # another seed, another network


def test_tvt_with_a_teacher_on_real_architectures(small_archs):
    torch.manual_seed(0)
    teacher = nn.Sequential(nn.Conv2d(3, 4, 16, stride=16), nn.ReLU())  # (B, 4, 14, 14)
    for arch in small_archs.values():
        raw = zoo_scores.raw_value("tvt", arch, SPEC, 0, 100, teacher=teacher)
        assert set(raw) == {"capability", "distance"} and 0.0 <= raw["distance"] <= 2.0
    with pytest.raises(measures.ProxyFailure, match=r"teacher must return a \(B, C, H, W\)"):
        zoo_scores.raw_value("tvt", small_archs["pit"], SPEC, 0, 100, teacher=nn.Flatten())


def test_score_cache_round_trip_and_corrupt_entry(tmp_path, small_archs):
    cache = zoo_scores.ZooScoreCache(tmp_path)
    arch = small_archs["pit"]
    results = zoo_scores.compute_raw_values(["synflow", "zico"], [arch], InputSpec("gaussian", 1), 0, 100,
                                     score_cache=cache)
    assert results["synflow"][0].ok and not results["synflow"][0].cached
    assert not results["zico"][0].ok and "at least 2 images" in results["zico"][0].error  # failure kept, not cached
    again = zoo_scores.compute_raw_values(["synflow"], [arch], InputSpec("gaussian", 1), 0, 100, score_cache=cache)
    assert again["synflow"][0].cached and again["synflow"][0].raw == results["synflow"][0].raw
    path = cache.path("synflow", arch, InputSpec("gaussian", 1), 0, 100)
    path.write_text("{not json")
    assert cache.load("synflow", arch, InputSpec("gaussian", 1), 0, 100) is None and not path.exists()


def test_a_cached_nan_is_corrupt_recomputed_and_warned_about_once(tmp_path, small_archs):
    """Issue 11: a score-cache entry holding NaN was trusted (all-null Kendall)."""
    import json
    import warnings

    cache = zoo_scores.ZooScoreCache(tmp_path)
    archs = [small_archs["pit"], small_archs["autoformer"]]
    spec = InputSpec("gaussian", 2)
    good = zoo_scores.compute_raw_values(["tvt_l2"], archs, spec, 0, 100, score_cache=cache)["tvt_l2"]
    for arch, bad in zip(archs, (float("nan"), {"capability": float("inf")})):
        path = cache.path("tvt_l2", arch, spec, 0, 100)
        record = json.loads(path.read_text())
        path.write_text(json.dumps(record | {"raw": bad}))  # json writes NaN and Infinity
    fresh = zoo_scores.ZooScoreCache(tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        again = zoo_scores.compute_raw_values(["tvt_l2"], archs, spec, 0, 100, score_cache=fresh)["tvt_l2"]
    assert [r.raw for r in again] == [r.raw for r in good] and not any(r.cached for r in again)
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1 and "NaN or inf" in messages[0] and "\n" not in messages[0]
    assert all(fresh.load("tvt_l2", a, spec, 0, 100)[0] == r.raw for a, r in zip(archs, good))  # rewritten


def test_the_registry_records_each_proxy_on_its_function():
    assert list(zoo.ZOO) == ["snip", "grasp", "synflow", "grad_norm", "fisher", "plain", "nwot", "zico", "te_nas",
                             "dss", "tvt", "tvt_l2", "jacov", "l2_norm", "zen", "epe_nas"]
    for name, entry in zoo.ZOO.items():
        assert entry.name == name and entry.source and entry.definition and entry.input in ("batch", "ones", "weights")
        assert entry.raw.zoo_proxy is entry
    assert {n for n, e in zoo.ZOO.items() if e.set_level} == {"tvt", "tvt_l2"}
    assert {n for n, e in zoo.ZOO.items() if e.needs_teacher} == {"tvt"}
    assert zoo_scores.computed_name("tvt") == "tvt_l2" and zoo_scores.computed_name("tvt", teacher=nn.Identity()) == "tvt"
    assert zoo_scores.computed_name("snip") == "snip"
    with pytest.raises(ValueError, match="already registered"):
        zoo.register_zoo("snip", source="", definition="", input="batch", passes="")(lambda inputs: 0.0)


def test_a_registered_proxy_is_scored_like_the_others(small_archs):
    @zoo.register_zoo("test_width", source="a test", definition="the qkv width of the first block",
                      input="weights", passes="")
    def width(inputs):
        return float(inputs.model.blocks[0].attn.qkv.weight.shape[1])

    try:
        arch = small_archs["autoformer"]
        width = float(arch_to_config(arch)["hidden_dim"])
        assert zoo_scores.raw_value("test_width", arch, SPEC, 0, 100) == width
        results = zoo_scores.compute_raw_values(["test_width", "snip"], [arch], SPEC, 0, 100)
        assert results["test_width"][0].raw == width and results["snip"][0].ok
    finally:
        zoo.ZOO.unregister("test_width")


# ------------------------------------------- the published Auto-Prox proxies as genomes


def test_autoprox_a_and_p_by_hand():
    """Eq. 2 and 3 on hand-made statistics of two blocks, through the genome evaluator."""
    from autoprox.genome.tree import score_architecture
    from autoprox.genome.template import template_genes
    from autoprox.proxies.proxy import resolve_proxy

    a, p = resolve_proxy("autoprox_a"), resolve_proxy("autoprox_p")
    assert a.kind == p.kind == "genome"
    template_genes(a.genome), template_genes(p.genome)  # both fit the template the search mutates
    block1 = {"F1g": torch.tensor([[1.0, -2.0], [3.0, -4.0]]), "F3g": torch.zeros(2, 3),
              "F1": torch.zeros(3, 2), "F3": torch.tensor([[0.0, -math.log(3.0)]])}
    block2 = {"F1g": torch.zeros(2, 2), "F3g": torch.full((1, 1), 100.0),
              "F1": torch.full((1, 2), 100.0), "F3": torch.zeros(2, 2)}
    # A: mean|F1g| + mean sigmoid(F3g): block1 2.5 + 0.5, block2 0 + 1
    assert score_architecture(a.genome, [block1, block2]) == pytest.approx((3.0 + 1.0) / 2, rel=1e-6)
    # P: ||sigmoid(F1)||_F - mean logsoftmax(|F3|) over each row
    p1 = math.sqrt(6 * 0.25) - (math.log(3.0) - 2 * math.log(4.0)) / 2  # row |F3| = (0, ln 3): log(1/4), log(3/4)
    p2 = math.sqrt(2.0) - math.log(0.5)  # sigmoid(100) = 1; a row of zeros: log(1/2) each
    assert score_architecture(p.genome, [block1, block2]) == pytest.approx((p1 + p2) / 2, rel=1e-6)
