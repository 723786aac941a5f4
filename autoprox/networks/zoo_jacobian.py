"""The zoo's measures of how a network's output moves with its input: JacCov, EPE-NAS, Zen-NAS.

Each follows the definition NAS-Bench-Suite-Zero scores (Krishnakumar et al., NeurIPS 2022;
NASLib's ``predictors/utils/pruners/measures``), written again here as model-level functions
like those of :mod:`autoprox.networks.zoo_measures`:

- :func:`jacov` and :func:`epe_nas` read the **input Jacobians**: the gradient of the sum of
  all outputs with respect to the input images, one flattened row per image
  (:func:`input_jacobians`), and score the correlations between the rows;
- :func:`zen` measures the same sensitivity by a finite difference: how far the features of
  the last transformer block move when the input is perturbed by ``0.01`` Gaussian noise, on a
  network whose weights are re-drawn from N(0, 1) as Zen-NAS does.

Every function raises :class:`~autoprox.networks.zoo_measures.ProxyFailure` where the score is
undefined (a constant Jacobian row, no class with two images, a zero feature difference).
Randomness (Zen-NAS's weights and noise) comes from a ``torch.Generator`` passed in.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from autoprox.networks.models import transformer_blocks
from autoprox.networks.zoo_measures import ProxyFailure

#: JacCov's and EPE-NAS's offset k inside the logarithms (NASLib's value).
JACOV_K = 1e-5
EPE_K = 1e-5
#: EPE-NAS scores a network with more output classes than this by its pairwise form (NASLib's rule).
EPE_MANY_CLASSES = 100
#: Zen-NAS's perturbation scale (``mixup_gamma``).
ZEN_GAMMA = 1e-2


def _finite(value: float, name: str) -> float:
    if not math.isfinite(value):
        raise ProxyFailure(f"{name} is {value} (not finite)")
    return value


def input_jacobians(model: nn.Module, images: torch.Tensor) -> tuple[np.ndarray, int]:
    """The per-image input Jacobians of the sum of the outputs, and the output width.

    Parameters
    ----------
    model : nn.Module
        The network, called once on the whole batch (in the mode it is in).
    images : torch.Tensor
        The batch (B, ...); it is not modified.

    Returns
    -------
    rows : np.ndarray
        (B, D) float64: row i is ``d(sum of all outputs) / d images[i]``, flattened (NASLib's
        ``y.backward(ones)`` and ``x.grad``; with no cross-image layer only image i's outputs
        reach row i).
    classes : int
        The width of the output's last axis (EPE-NAS's class count).
    """
    inputs = images.detach().clone().requires_grad_(True)
    output = model(inputs)
    (gradient,) = torch.autograd.grad(output.sum(), inputs)
    return gradient.detach().reshape(gradient.shape[0], -1).double().cpu().numpy(), int(output.shape[-1])


def correlations(rows: np.ndarray, name: str) -> np.ndarray:
    """Pearson correlation matrix of the rows (``np.corrcoef``); ProxyFailure if a row is constant."""
    with np.errstate(invalid="ignore", divide="ignore"):
        matrix = np.atleast_2d(np.corrcoef(rows))
    if not np.all(np.isfinite(matrix)):
        raise ProxyFailure(f"{name}: an image's input Jacobian is constant (its correlations are undefined)")
    return matrix


def jacov_score(rows: np.ndarray, k: float = JACOV_K) -> float:
    """JacCov's score of Jacobian rows: ``-sum(log(v + k) + 1 / (v + k))`` over the eigenvalues v
    of their correlation matrix.

    Parameters
    ----------
    rows : np.ndarray
        (B, D) Jacobian rows, B >= 2.
    k : float
        The offset (1e-5, NASLib's).

    Returns
    -------
    float
        The score; higher is better (less correlated rows).
    """
    if rows.shape[0] < 2:
        raise ProxyFailure(f"jacov needs at least 2 images (a correlation matrix), got {rows.shape[0]}")
    eigenvalues = np.linalg.eigvalsh(correlations(rows, "jacov"))
    with np.errstate(invalid="ignore", divide="ignore"):
        value = -float(np.sum(np.log(eigenvalues + k) + 1.0 / (eigenvalues + k)))
    return _finite(value, "jacov")


def jacov(model: nn.Module, images: torch.Tensor) -> float:
    """JacCov (Mellor et al. 2020, v1 of "Neural architecture search without training").

    The input Jacobian of the sum of the outputs, one flattened row per image
    (:func:`input_jacobians`); C their correlation matrix, v its eigenvalues;
    ``score = -sum(log(v + k) + 1 / (v + k))``, k = 1e-5. Input convention: ``batch``
    (labels unused), one forward/backward pass to the input.

    Parameters
    ----------
    model : nn.Module
        The network.
    images : torch.Tensor
        The batch (at least 2 images).

    Returns
    -------
    float
        The score.
    """
    rows, _ = input_jacobians(model, images)
    return jacov_score(rows)


def label_groups(labels) -> dict[int, list[int]]:
    """The images of each label (in order of first appearance), as EPE-NAS groups them.

    Parameters
    ----------
    labels : sequence of int
        One label per image.

    Returns
    -------
    dict
        Label -> the indices of its images. ProxyFailure when no label has two images (known
        from the labels alone, before any pass).
    """
    labels = [int(label) for label in np.asarray(labels).reshape(-1)]
    groups: dict[int, list[int]] = {}
    for index, label in enumerate(labels):
        groups.setdefault(label, []).append(index)
    if all(len(members) < 2 for members in groups.values()):
        raise ProxyFailure(f"epe_nas needs two images of one label, and the batch's {len(labels)} labels are all "
                           "different (a larger --batch-size, or fewer classes, gives some)")
    return groups


def epe_score(rows: np.ndarray, labels, classes: int, k: float = EPE_K) -> float:
    """EPE-NAS's score of Jacobian rows grouped by label, as NASLib computes it.

    Per label c with m_c images: C_c the correlation matrix of their rows and
    ``s_c = sum of log(|C_c| + k)`` over its entries. With ``classes`` <= 100 the score is
    ``sum over c of |s_c|``; a label with a single image has C_c = 1 and adds ``log(1 + k)``.
    With more classes each s_c is divided by m_c, labels with a single image are left out
    (NASLib's ``len`` of its scalar correlation fails and skips them) and the score is
    ``sum over c, c' of |s_c - s_c'|`` divided by the number of labels scored.

    Parameters
    ----------
    rows : np.ndarray
        (B, D) Jacobian rows.
    labels : sequence of int
        The B labels.
    classes : int
        The network's output width (which form applies).
    k : float
        The offset (1e-5, NASLib's).

    Returns
    -------
    float
        The score. ProxyFailure when no label has two images: NASLib then returns a constant
        (``B log(1 + k)``, or 0 with many classes) that ranks nothing.
    """
    groups = label_groups(labels)
    if sum(len(members) for members in groups.values()) != rows.shape[0]:
        raise ProxyFailure(f"epe_nas: the labels are not one per Jacobian row ({rows.shape[0]} rows)")
    many = classes > EPE_MANY_CLASSES
    per_label = []
    for members in groups.values():
        if len(members) < 2:
            if not many:
                per_label.append(math.log(1.0 + k))
            continue
        matrix = correlations(rows[members], "epe_nas")
        value = float(np.sum(np.log(np.abs(matrix) + k)))
        per_label.append(value / len(members) if many else value)
    scores = np.asarray(per_label)
    if many:
        value = float(np.abs(scores[:, None] - scores[None, :]).sum()) / len(scores)
    else:
        value = float(np.abs(scores).sum())
    return _finite(value, "epe_nas")


def epe_nas(model: nn.Module, images: torch.Tensor, labels: torch.Tensor) -> float:
    """EPE-NAS (Lopes, Alirezazadeh & Alexandre, ICANN 2021), NASLib's form.

    The input Jacobians of :func:`jacov`, grouped by the batch's labels; per label the
    correlation matrix of its images' rows, scored and summed as :func:`epe_score` says
    (the form for at most 100 classes: ``sum over labels of |sum log(|C| + k)|``).
    Input convention: ``batch`` (the seeded random labels group the images); one
    forward/backward pass to the input.

    Parameters
    ----------
    model : nn.Module
        The network.
    images : torch.Tensor
        The batch.
    labels : torch.Tensor
        Its labels.

    Returns
    -------
    float
        The score.
    """
    labels = labels.detach().cpu().numpy()
    label_groups(labels)  # no label with two images: fail before the pass
    rows, classes = input_jacobians(model, images)
    return epe_score(rows, labels, classes)


def gaussian_init(model: nn.Module, generator: torch.Generator) -> None:
    """Zen-NAS's re-initialisation, in module order: every Conv2d and Linear weight from N(0, 1)
    (drawn on the CPU from ``generator``, so the same on any device), their biases 0; every
    BatchNorm and GroupNorm weight 1 and bias 0. Everything else (LayerNorm, class token,
    position embeddings) keeps its initialisation.

    Parameters
    ----------
    model : nn.Module
        The network, changed in place.
    generator : torch.Generator
        A CPU generator: the one source of the new weights.
    """
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, (nn.Conv2d, nn.Linear)):
                module.weight.copy_(torch.randn(module.weight.shape, generator=generator))
                if module.bias is not None:
                    module.bias.zero_()
            elif isinstance(module, (nn.modules.batchnorm._BatchNorm, nn.GroupNorm)) and module.weight is not None:
                module.weight.fill_(1.0)
                module.bias.zero_()


def _last_block_output(model: nn.Module, images: torch.Tensor) -> torch.Tensor:
    blocks = transformer_blocks(model)
    if not blocks:
        raise ProxyFailure("zen: the model has no transformer block (its features are the last block's tokens)")
    kept: list[torch.Tensor] = []

    def keep(_module, _inputs, output):
        kept.append((output[0] if isinstance(output, (tuple, list)) else output).detach())

    handle = blocks[-1].register_forward_hook(keep)
    try:
        model(images)
    finally:
        handle.remove()
    return kept[-1]


def zen_score(model: nn.Module, images: torch.Tensor, noise: torch.Tensor, gamma: float = ZEN_GAMMA) -> float:
    """Zen-NAS's score of a network as it is: ``log(mean over images of sum |f(x) - f(x + gamma
    noise)|) + sum over BatchNorm layers of log sqrt(mean running_var)``.

    f is the output of the last transformer block (the tokens before the final norm and the
    head, the ViT counterpart of Zen-NAS's feature map before global pooling); the sum runs
    over every feature of an image. Both forward passes run without gradients, in the mode
    the model is in (Zen-NAS's train mode: BatchNorm running variances move with them).

    Parameters
    ----------
    model : nn.Module
        The network (its weights as they are).
    images : torch.Tensor
        The input x.
    noise : torch.Tensor
        The perturbation, the shape of ``images``.
    gamma : float
        Its scale (0.01).

    Returns
    -------
    float
        The score.
    """
    with torch.no_grad():
        clean = _last_block_output(model, images)
        moved = _last_block_output(model, images + gamma * noise.to(images.device, images.dtype))
        gap = float((clean - moved).abs().double().flatten(1).sum(dim=1).mean())
        if not math.isfinite(gap):
            raise ProxyFailure("zen: the features are not finite (NaN or inf)")
        if not gap > 0.0:
            raise ProxyFailure("zen: the perturbation does not move the features (on Gaussian weights they "
                               "can all be 0)")
        value = math.log(gap)
        for module in model.modules():
            if isinstance(module, nn.modules.batchnorm._BatchNorm) and module.running_var is not None:
                value += math.log(math.sqrt(float(module.running_var.double().mean())))
    return _finite(value, "zen")


def zen(model: nn.Module, images: torch.Tensor, generator: torch.Generator, gamma: float = ZEN_GAMMA) -> float:
    """Zen-NAS (Lin et al., ICCV 2021) as NASLib computes it, on a transformer.

    The weights re-drawn as Zen-NAS does (:func:`gaussian_init`), then the noise
    (standard normal, the shape of the batch) drawn from the same ``generator``, then
    :func:`zen_score`. The BatchNorm term restores the scale that BatchNorm takes out of
    Zen-NAS's ConvNet features. These ViTs have LayerNorm and no BatchNorm: the term is 0,
    and the features are taken before the final LayerNorm, so their scale stays in them.
    Input convention: ``batch`` (x is the batch's images; labels unused); two forward passes.

    Parameters
    ----------
    model : nn.Module
        The network; its weights are replaced.
    images : torch.Tensor
        The input x.
    generator : torch.Generator
        A CPU generator (the weights, then the noise).
    gamma : float
        The perturbation scale (0.01).

    Returns
    -------
    float
        The score.
    """
    gaussian_init(model, generator)
    noise = torch.randn(images.shape, generator=generator)
    return zen_score(model, images, noise, gamma)


__all__ = [
    "EPE_K",
    "EPE_MANY_CLASSES",
    "JACOV_K",
    "ZEN_GAMMA",
    "correlations",
    "epe_nas",
    "epe_score",
    "gaussian_init",
    "input_jacobians",
    "jacov",
    "jacov_score",
    "label_groups",
    "zen",
    "zen_score",
]
