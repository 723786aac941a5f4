"""The hand-crafted zero-cost proxies the seed papers compare against, as functions of a model.

Every proxy is implemented from its paper's definition as a **model-level function**
(``snip(model, images, labels)``, ``synflow(model, inputs)``, ...) that scores any
``nn.Module`` whose layers it needs are there: ``nn.Linear`` / ``nn.Conv2d`` weights for the
pruning saliencies, the :class:`autoprox.networks.models.Attention` and
:class:`autoprox.networks.models.Mlp` modules (the parts of every transformer block of both
spaces) for the ViT-specific ones. The tests check each on a tiny network whose value is
derived by hand. :mod:`autoprox.proxies.zoo` registers them as the proxies ``autoprox
rank`` knows, each with its input convention, and scores architectures with them. The
measures of the input Jacobian and its finite-difference form (JacCov, EPE-NAS, Zen-NAS)
are in :mod:`autoprox.proxies.zoo_jacobian`.

Input conventions:

``batch``
    the statistics minibatch: by default 8 standard-normal 224x224 images (``--input``
    picks all-ones or real images), seeded random labels, cross-entropy loss (mean over
    the batch), one forward/backward pass unless said otherwise.
``ones``
    SynFlow's data-free convention: every parameter made absolute (signs kept and
    restored afterwards), one all-ones image, loss R = sum of the outputs, float64.
``weights``
    no data at all: the initialised weights only.

TVT min-max normalises its two terms over the candidates being ranked
(:func:`tvt_combine`). Higher is better for every score here (TE-NAS's condition number
is negated). A proxy that cannot score a model raises :class:`ProxyFailure`.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from typing import Iterator, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from autoprox.networks.models import Attention, Mlp, transformer_blocks

#: TVT's published weights (alpha on the student-capability term, beta on the teacher term).
TVT_ALPHA = 2.0
TVT_BETA = -3.0

#: ZiCo: the batch is cut into this many groups, each giving one gradient sample.
ZICO_GROUPS = 2


class ProxyFailure(RuntimeError):
    """A proxy that cannot score an architecture (the message is the reason)."""


# --------------------------------------------------------------------------- helpers


def weight_layers(model: nn.Module) -> list[nn.Module]:
    """Every ``nn.Linear`` and ``nn.Conv2d`` of ``model`` (the layers pruning saliencies sum over)."""
    layers = [m for m in model.modules() if isinstance(m, (nn.Linear, nn.Conv2d))]
    if not layers:
        raise ProxyFailure("the model has no Linear or Conv2d layer")
    return layers


def _modules(model: nn.Module, kind: type, what: str) -> list[nn.Module]:
    found = [m for m in model.modules() if isinstance(m, kind)]
    if not found:
        raise ProxyFailure(f"the model has no {what} module ({kind.__module__}.{kind.__name__})")
    return found


def _total(values) -> float:
    """Sum of 0-d tensors in float64 (per-layer sums are exact enough; the total must not round)."""
    return float(sum(float(v.detach()) if isinstance(v, torch.Tensor) else float(v) for v in values))


def _finite(value: float, name: str) -> float:
    if not math.isfinite(value):
        raise ProxyFailure(f"{name} is {value} (not finite)")
    return value


def _loss(model: nn.Module, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(model(images), labels)


@contextmanager
def absolute_parameters(model: nn.Module) -> Iterator[None]:
    """SynFlow's ``linearize``: every entry of the state dict made absolute, signs restored after."""
    with torch.no_grad():
        signs = {name: torch.sign(tensor) for name, tensor in model.state_dict().items()}
        for tensor in model.state_dict().values():
            tensor.abs_()
    try:
        yield
    finally:
        with torch.no_grad():
            for name, tensor in model.state_dict().items():
                tensor.mul_(signs[name])


# ------------------------------------------------------- pruning-at-initialisation


def snip(model: nn.Module, images: torch.Tensor, labels: torch.Tensor) -> float:
    """SNIP (Lee, Ajanthan & Torr, ICLR 2019): connection sensitivity summed over the network.

    ``sum over every Linear/Conv2d weight of |dL/dw * w|`` (the gradient with respect to a
    multiplicative mask of ones is ``dL/dw * w``), L = cross-entropy on one minibatch.
    Input convention: ``batch``.
    """
    layers = weight_layers(model)
    model.zero_grad(set_to_none=True)
    _loss(model, images, labels).backward()
    return _finite(_total((m.weight.grad * m.weight).abs().sum() for m in layers), "snip")


def plain(model: nn.Module, images: torch.Tensor, labels: torch.Tensor) -> float:
    """Plain (Mozer & Smolensky 1988, as a zero-cost proxy in Abdelfattah et al. 2021).

    ``sum over every Linear/Conv2d weight of dL/dw * w`` (SNIP without the absolute
    value: the first-order change of the loss when all weights are removed).
    Input convention: ``batch``.
    """
    layers = weight_layers(model)
    model.zero_grad(set_to_none=True)
    _loss(model, images, labels).backward()
    return _finite(_total((m.weight.grad * m.weight).sum() for m in layers), "plain")


def grad_norm(model: nn.Module, images: torch.Tensor, labels: torch.Tensor) -> float:
    """Grad-norm (Abdelfattah et al., ICLR 2021): ``sum over layers of ||dL/dW||_2``.

    The Euclidean (Frobenius) norm of each Linear/Conv2d weight's gradient, summed over
    the layers. Input convention: ``batch``.
    """
    layers = weight_layers(model)
    model.zero_grad(set_to_none=True)
    _loss(model, images, labels).backward()
    return _finite(_total(torch.linalg.vector_norm(m.weight.grad) for m in layers), "grad_norm")


def l2_norm(model: nn.Module) -> float:
    """L2-norm (NAS-Bench-Suite-Zero, Krishnakumar et al. NeurIPS 2022): ``sum over layers of ||W||_2``.

    The Euclidean (Frobenius) norm of each Linear/Conv2d weight, summed over the layers
    (biases and LayerNorm gains left out, as NASLib's ``l2_norm`` does). Input convention:
    ``weights``.

    Parameters
    ----------
    model : nn.Module
        The network, as initialised.

    Returns
    -------
    float
        The sum of the norms.
    """
    norms = (torch.linalg.vector_norm(m.weight.detach().double()) for m in weight_layers(model))
    return _finite(_total(norms), "l2_norm")


def grasp(model: nn.Module, images: torch.Tensor, labels: torch.Tensor) -> float:
    """GraSP (Wang, Zhang & Grosse, ICLR 2020): ``sum of -w * (H g)`` over Linear/Conv2d weights.

    g = dL/dw and H the Hessian of L, so ``H g`` is the gradient of ``g_detached . g``
    (a Hessian-gradient product by double back-propagation, as Abdelfattah et al.'s
    implementation does, temperature 1). Input convention: ``batch``; two backward passes,
    attention through the math SDPA kernel (the fused CPU kernel has no double backward).
    """
    from torch.nn.attention import SDPBackend, sdpa_kernel

    weights = [m.weight for m in weight_layers(model)]
    model.zero_grad(set_to_none=True)
    # the fused CPU attention kernel has no double backward; the math kernel computes the same
    with sdpa_kernel(SDPBackend.MATH):
        grads = torch.autograd.grad(_loss(model, images, labels), weights, create_graph=True)
        product = sum((g.detach() * g).sum() for g in grads)
        hessian_grad = torch.autograd.grad(product, weights)
    return _finite(_total((-w.detach() * hg).sum() for w, hg in zip(weights, hessian_grad)), "grasp")


def fisher(model: nn.Module, images: torch.Tensor, labels: torch.Tensor) -> float:
    """Fisher (Theis et al. 2018; the zero-cost form of Abdelfattah et al. 2021).

    For the output z of every Linear and Conv2d layer (each layer's activations, as in
    Abdelfattah et al.'s implementation), per channel c: ``0.5 * mean over images of
    (sum over positions of z * dL/dz)^2``; summed over channels and layers. Positions are
    the tokens of a Linear's output (channel = last axis) and the pixels of a Conv2d's
    (channel = axis 1). Input convention: ``batch``.
    """
    layers = weight_layers(model)
    outputs: list[tuple[nn.Module, torch.Tensor]] = []

    def keep(module, _inputs, output):
        if output.requires_grad:
            output.retain_grad()
            outputs.append((module, output))

    handles = [m.register_forward_hook(keep) for m in layers]
    try:
        model.zero_grad(set_to_none=True)
        _loss(model, images, labels).backward()
    finally:
        for handle in handles:
            handle.remove()
    terms = []
    for module, z in outputs:
        product = (z * z.grad).detach()
        if isinstance(module, nn.Conv2d):
            per_channel = product.sum(dim=(2, 3))  # (B, C)
        else:
            per_channel = product.reshape(product.shape[0], -1, product.shape[-1]).sum(dim=1)  # (B, C)
        terms.append(0.5 * per_channel.double().pow(2).mean(dim=0).sum())
    return _finite(_total(terms), "fisher")


def synflow(model: nn.Module, inputs: torch.Tensor) -> float:
    """SynFlow (Tanaka et al., NeurIPS 2020; as a NAS proxy in Abdelfattah et al. 2021).

    Every parameter made absolute, ``R = 1^T f(1)`` the sum of the outputs for an
    all-ones input, ``sum over Linear/Conv2d weights of |dR/dw * w|``; float64, signs
    restored afterwards. Input convention: ``ones`` (``inputs`` is the all-ones batch).
    In these ViTs the LayerNorms, softmax and GELU stay in the network, so R is not the
    pure product of absolute weights it is in a linear network.
    """
    layers = weight_layers(model)
    model.double()
    with absolute_parameters(model):
        model.zero_grad(set_to_none=True)
        model(inputs.double()).sum().backward()
        value = _total((m.weight.grad * m.weight).abs().sum() for m in layers)
    return _finite(value, "synflow")


# ---------------------------------------------------- expressivity / trainability


def nwot(model: nn.Module, images: torch.Tensor) -> float:
    """NASWOT (Mellor et al., ICML 2021): log-determinant of the activation-pattern kernel.

    Each image's binary code is the sign pattern of every MLP pre-activation (the fc1
    output entering GELU: 1 where > 0), over all tokens, hidden units and blocks. With
    N_A the code length, ``K[i, j] = N_A - Hamming(c_i, c_j)``, accumulated block by
    block as ``c c^T + (1 - c)(1 - c)^T``; the score is ``log |det K|``. Forward only.
    Input convention: ``batch`` (labels unused); the kernel is batch x batch, so the
    score grows with the batch size (NASWOT used 128 CIFAR images; autoprox's default
    batch is 8).
    """
    mlps = _modules(model, Mlp, "MLP")
    size = images.shape[0]
    kernel = torch.zeros(size, size, dtype=torch.float64)

    def count(_module, inputs):
        codes = (inputs[0] > 0).reshape(size, -1).double()
        kernel.add_(codes @ codes.T + (1.0 - codes) @ (1.0 - codes).T)

    handles = [mlp.act.register_forward_pre_hook(count) for mlp in mlps]
    try:
        with torch.no_grad():
            model(images)
    finally:
        for handle in handles:
            handle.remove()
    sign, logdet = torch.linalg.slogdet(kernel)
    if float(sign) == 0.0:
        raise ProxyFailure("nwot: the activation-pattern kernel is singular (two images share one code)")
    return _finite(float(logdet), "nwot")


def zico(model: nn.Module, images: torch.Tensor, labels: torch.Tensor, groups: int = ZICO_GROUPS) -> float:
    """ZiCo (Li et al., ICLR 2023): gradient mean over gradient deviation, log-summed per layer.

    The batch is cut into ``groups`` equal parts (the official code uses one gradient per
    minibatch and two minibatches; here the statistics batch is split in two). For every
    Linear/Conv2d weight, with the per-group gradients g_1..g_G: ``sum over entries of
    mean|g| / std(g)`` (population std, entries with std 0 left out), and the score is
    the sum over layers of its log (layers whose sum is 0 are skipped, as officially).
    Input convention: ``batch``; ``groups`` backward passes on ``B / groups`` images.
    """
    if images.shape[0] < groups:
        raise ProxyFailure(f"zico needs at least {groups} images (one per gradient sample), got {images.shape[0]}")
    layers = weight_layers(model)
    samples: list[list[torch.Tensor]] = [[] for _ in layers]
    for part in torch.arange(images.shape[0]).chunk(groups):
        model.zero_grad(set_to_none=True)
        _loss(model, images[part], labels[part]).backward()
        for index, layer in enumerate(layers):
            samples[index].append(layer.weight.grad.detach().reshape(-1).double())
    score = 0.0
    for grads in samples:
        stacked = torch.stack(grads)
        std = stacked.std(dim=0, unbiased=False)
        mean_abs = stacked.abs().mean(dim=0)
        keep = std != 0
        ratio_sum = float((mean_abs[keep] / std[keep]).sum())
        if ratio_sum != 0.0:
            score += math.log(ratio_sum)
    return _finite(score, "zico")


def te_nas(model: nn.Module, images: torch.Tensor) -> float:
    """TE-NAS's trainability term (Chen, Gong & Wang, ICLR 2021): minus the NTK condition number.

    Per image i, the gradient of the sum of its logits with respect to every parameter
    whose name contains ``weight`` (TE-NAS's choice: Linear, Conv2d and LayerNorm
    weights) is one row of J; ``NTK = J J^T`` (batch x batch, float64) and the score is
    ``-lambda_max / lambda_min`` (TE-NAS prefers a small condition number). Images go
    through one at a time: the networks have no cross-image layer (no BatchNorm), so this
    equals back-propagating each image's logits through the batched forward, at a fraction
    of the cost. TE-NAS's second term, the number of linear regions, is left out: it
    counts the regions of a piecewise-linear (ReLU) network, and these ViTs (GELU,
    softmax, LayerNorm) have none; its nearest analogue is NWOT's activation patterns.
    Input convention: ``batch`` (labels unused).
    """
    params = [p for name, p in model.named_parameters() if "weight" in name and p.requires_grad]
    if not params:
        raise ProxyFailure("te_nas: the model has no weight parameters")
    rows = []
    for index in range(images.shape[0]):
        output = model(images[index:index + 1])
        grads = torch.autograd.grad(output.sum(), params, allow_unused=True)
        rows.append(torch.cat([g.reshape(-1) for g in grads if g is not None]))
    jacobian = torch.stack(rows)
    del rows
    ntk = torch.zeros(len(jacobian), len(jacobian), dtype=torch.float64)
    for chunk in jacobian.split(1 << 20, dim=1):  # float64 Gram without a float64 copy of J
        chunk = chunk.double()
        ntk += chunk @ chunk.T
    eigenvalues = torch.linalg.eigvalsh(ntk)
    low, high = float(eigenvalues[0]), float(eigenvalues[-1])
    if not low > 0.0:
        raise ProxyFailure(f"te_nas: the NTK is singular (smallest eigenvalue {low:.3g})")
    return _finite(-high / low, "te_nas")


# ----------------------------------------------------------------- ViT-specific


def dss(model: nn.Module, inputs: torch.Tensor) -> float:
    """TF-TAS's DSS indicator (Zhou et al., CVPR 2022), equations 4 to 6 of the paper.

    ``DSS = sum over attention modules of sum over m in {qkv, proj} of
    ||dR/dW_m||_nuc * ||W_m||_nuc  +  sum over MLP modules of sum over n in {fc1, fc2} of
    sum |dR/dW_n * W_n|``, where R is the SynFlow loss of section 3.4: every parameter
    made absolute, one all-ones image, R = sum of the outputs (float64). Both terms are
    evaluated while the weights are absolute, as the official code does (it computes the
    score before restoring the signs); the MLP saliency takes the absolute value of each
    product like SynFlow. Input convention: ``ones``.

    Where the official release differs from the paper, the paper is followed: the
    release's test for the qkv layer compares the layer's class name with 'qkv' (never
    true), so there qkv gets the MLP-style saliency and only the square projection gets
    nuclear norms; it also adds the saliency of the patch embedding and the head.
    """
    attentions = _modules(model, Attention, "attention")
    mlps = _modules(model, Mlp, "MLP")
    model.double()
    with absolute_parameters(model):
        model.zero_grad(set_to_none=True)
        model(inputs.double()).sum().backward()
        diversity = []
        for attention in attentions:
            for layer in (attention.qkv, attention.proj):
                diversity.append(torch.linalg.matrix_norm(layer.weight.grad, ord="nuc")
                                 * torch.linalg.matrix_norm(layer.weight.detach(), ord="nuc"))
        saliency = [(layer.weight.grad * layer.weight).abs().sum() for mlp in mlps for layer in (mlp.fc1, mlp.fc2)]
        value = _total(diversity) + _total(saliency)
    return _finite(value, "dss")


def student_capability(model: nn.Module) -> float:
    """TVT's student-capability metric M_s (Wei et al. 2023, eq. 3): ``sum over blocks of ||W_block||_2``.

    For each transformer block, the L2 norm of all its Linear weight matrices taken
    together (qkv, proj, fc1, fc2: ``sqrt(sum of squares)``); summed over the blocks.
    Biases and LayerNorm gains are not "weights" here. Input convention: ``weights``.
    """
    blocks = transformer_blocks(model)
    if not blocks:
        raise ProxyFailure("tvt: the model has no transformer block")
    total = 0.0
    for block in blocks:
        squares = sum(float(m.weight.detach().double().pow(2).sum()) for m in block.modules() if isinstance(m, nn.Linear))
        total += math.sqrt(squares)
    return _finite(total, "tvt M_s")


def spatial_attention(features: torch.Tensor) -> torch.Tensor:
    """TVT's mapping F (eq. 1): ``phi(sum over channels of X_c^2)`` for (B, C, H, W) features.

    phi divides each image's map, flattened to H*W values, by its L2 norm (the
    normalisation of attention transfer, Zagoruyko & Komodakis 2017; TVT leaves phi open).
    Returns (B, H*W).
    """
    if features.dim() != 4:
        raise ProxyFailure(f"attention maps need (B, C, H, W) features, got shape {tuple(features.shape)}")
    maps = features.double().pow(2).sum(dim=1).flatten(1)
    return maps / torch.linalg.vector_norm(maps, dim=1, keepdim=True).clamp_min(1e-300)


def tokens_to_grid(tokens: torch.Tensor) -> torch.Tensor:
    """(B, N, C) tokens of the last block -> (B, C, P, P) grid, the class token dropped.

    When N - 1 is a square the first token is the class token (both spaces); when N
    itself is a square all tokens are patches.
    """
    batch, count, channels = tokens.shape
    for skip in (1, 0):
        side = math.isqrt(count - skip)
        if side * side == count - skip and side > 0:
            return tokens[:, skip:].transpose(1, 2).reshape(batch, channels, side, side)
    raise ProxyFailure(f"tvt: {count} tokens do not form a square grid (with or without a class token)")


def student_features(model: nn.Module, images: torch.Tensor) -> torch.Tensor:
    """The student's token features after its last transformer block, as a (B, C, P, P) grid."""
    blocks = transformer_blocks(model)
    if not blocks:
        raise ProxyFailure("tvt: the model has no transformer block")
    kept: list[torch.Tensor] = []
    handle = blocks[-1].register_forward_hook(lambda _m, _i, output: kept.append(output.detach()))
    try:
        with torch.no_grad():
            model(images)
    finally:
        handle.remove()
    return tokens_to_grid(kept[-1])


def teacher_distance(student: torch.Tensor, teacher: torch.Tensor) -> float:
    """TVT's teacher-aware metric M_t (eq. 2): ``||F(T~) - F(S)||_2``, mean over the batch.

    ``student`` is (B, C_S, P, P); ``teacher`` (B, C_T, H, W) is resized to P x P
    (bilinear) into T~ before the mapping F (:func:`spatial_attention`).
    """
    if teacher.dim() != 4 or teacher.shape[0] != student.shape[0]:
        raise ProxyFailure(f"tvt: the teacher must give (B, C, H, W) feature maps for the B={student.shape[0]} "
                           f"images, got shape {tuple(teacher.shape)}")
    resized = F.interpolate(teacher.double(), size=student.shape[-2:], mode="bilinear", align_corners=False)
    gap = spatial_attention(resized) - spatial_attention(student)
    return _finite(float(torch.linalg.vector_norm(gap, dim=1).mean()), "tvt M_t")


def min_max(values: Sequence[float]) -> np.ndarray:
    """TVT's f: ``(x - min) / (max - min)`` over the candidate set; all 0 when the set is constant."""
    array = np.asarray(values, dtype=np.float64)
    spread = float(np.max(array) - np.min(array)) if array.size else 0.0
    return (array - np.min(array)) / spread if spread > 0 else np.zeros_like(array)


def tvt_combine(capability: Sequence[float], distance: Sequence[float] | None,
                alpha: float = TVT_ALPHA, beta: float = TVT_BETA) -> np.ndarray:
    """TVT's score (eq. 4) over a candidate set: ``alpha f(M_s) + beta f(M_t)`` (f = :func:`min_max`).

    Without ``distance`` (no teacher) the score is ``alpha f(M_s)`` alone (``tvt_l2``).
    """
    score = alpha * min_max(capability)
    if distance is not None:
        score = score + beta * min_max(distance)
    return score


def teacher_features(teacher: nn.Module, images: torch.Tensor) -> torch.Tensor:
    """The teacher's feature map for ``images`` (called as given, without gradients)."""
    with torch.no_grad():
        output = teacher(images)
    if not isinstance(output, torch.Tensor) or output.dim() != 4:
        shape = tuple(output.shape) if isinstance(output, torch.Tensor) else type(output).__name__
        raise ProxyFailure(f"tvt: the teacher must return a (B, C, H, W) feature map, got {shape}")
    return output


__all__ = ["TVT_ALPHA", "TVT_BETA", "ZICO_GROUPS", "ProxyFailure", "absolute_parameters", "dss", "fisher", "grad_norm",
           "grasp", "l2_norm", "min_max", "nwot", "plain", "snip", "spatial_attention", "student_capability",
           "student_features", "synflow", "te_nas", "teacher_distance", "teacher_features", "tokens_to_grid",
           "tvt_combine", "weight_layers", "zico"]
