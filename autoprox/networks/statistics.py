"""The eight per-block ViT statistics a proxy is computed from (one forward/backward pass).

Per transformer block (docs/method.md):

====== ==========================================================
F1     attention qkv Linear weight (3D x D); F1g its gradient
F2     attention output projection weight (D x D); F2g its gradient
F3     MLP fc1 weight (h x D); F3g its gradient
F4     MLP hidden activation after GELU (tokens x h), mean over the batch
F4g    gradient of the loss with respect to F4 (same reduction)
====== ==========================================================

The network is built with a seeded initialisation, one minibatch goes forward, the
cross-entropy loss goes backward once.

The spread statistics (:data:`autoprox.networks.names.SPREAD_NAMES`, asked for with ``spread=True``; cached
apart, only when a run asks for them) come from the same pass. Each is the population
standard deviation over the batch's samples of the per-sample tensor whose batch mean is
the statistic of the same number, so that e.g. ``F1g / S1g`` is ZiCo's
gradient-mean-over-deviation signal:

====== ==========================================================
S1g    per-sample gradient of the attention qkv weight (3D x D, as F1g)
S2g    per-sample gradient of the attention output projection weight (D x D, as F2g)
S3g    per-sample gradient of the MLP fc1 weight (h x D, as F3g)
S4     MLP hidden activation after GELU (tokens x h, as F4)
S4g    gradient of the loss w.r.t. the MLP hidden activation (tokens x h, as F4g)
====== ==========================================================

Sample i's per-sample weight gradient is ``B`` times its contribution to the batch
gradient (:mod:`autoprox.networks.runtime`), for the batch-mean cross-entropy the
gradient of its own loss; the networks have no layer that mixes samples, so this is
exact (a test checks it against one backward pass per sample).

The names, the input spec and the seeds here need no torch: the functions that make tensors import it
(and the networks), so that the layers above read this module without loading torch.
"""

from __future__ import annotations

import hashlib
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Mapping

import numpy as np

from autoprox.core.errors import ConfigError, InputSpecError

if TYPE_CHECKING:
    import torch

STAT_NAMES = ("F1", "F1g", "F2", "F2g", "F3", "F3g", "F4", "F4g")
STAT_DESCRIPTIONS = {
    "F1": "attention qkv weight",
    "F1g": "gradient of the attention qkv weight",
    "F2": "attention output projection weight",
    "F2g": "gradient of the attention output projection weight",
    "F3": "MLP fc1 weight",
    "F3g": "gradient of the MLP fc1 weight",
    "F4": "MLP hidden activation after GELU (mean over the batch)",
    "F4g": "gradient of the loss w.r.t. the MLP hidden activation (mean over the batch)",
}
#: The spread statistics (:mod:`autoprox.networks.runtime`), by name.
SPREAD_DESCRIPTIONS = {
    "S1g": "spread over the batch's samples of the per-sample gradient of the attention qkv weight",
    "S2g": "spread over the batch's samples of the per-sample gradient of the attention output projection weight",
    "S3g": "spread over the batch's samples of the per-sample gradient of the MLP fc1 weight",
    "S4": "spread over the batch's samples of the MLP hidden activation after GELU",
    "S4g": "spread over the batch's samples of the gradient of the loss w.r.t. the MLP hidden activation",
}
IMAGE_SIZE = 224
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".webp")
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

#: One architecture's statistics: per block, statistic name -> float32 tensor.
BlockStats = dict[str, "torch.Tensor"]

#: Devices statistics, the zoo and the ViT search may run on (``--device``).
DEVICES = ("cpu", "cuda", "mps")


def resolve_device(name: str, option: str = "--device") -> torch.device:
    """The torch device ``name``; ConfigError (one line) when this machine has none. ``option`` names the choice as
    the caller takes it: the command line's ``--device`` (``--device cuda``, the default), or a Python parameter's
    name (``device``: ``device='cuda'``), as the option table names an option on each side."""
    import torch

    given, cpu = (f"{option} {name}", f"{option} cpu") if option.startswith("--") else \
        (f"{option}={name!r}", f"{option}='cpu'")
    if name not in DEVICES:
        raise ConfigError(f"unknown device {name!r}; use {', '.join(DEVICES)}")
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"{given}: CUDA is not available on this machine (torch {torch.__version__}); use {cpu}")
    if name == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise ConfigError(f"{given}: Apple's MPS backend is not available on this machine; use {cpu}")
    return torch.device(name)



@dataclass(frozen=True)
class InputSpec:
    """What minibatch the statistics are computed on.

    ``kind`` is ``gaussian`` (standard-normal images, the default), ``ones`` (every
    pixel 1) or ``images`` (a folder of real images, resized to 224x224 and
    normalised with the ImageNet mean and std). Labels are always seeded random
    labels: zero-cost statistics do not need true labels, only a loss.
    """

    kind: str = "gaussian"
    batch_size: int = 8
    image_dir: str | None = None
    #: Where the network runs: ``cpu`` (default), ``cuda`` or ``mps`` (:data:`DEVICES`).
    device: str = "cpu"

    def __post_init__(self) -> None:
        if self.kind not in ("gaussian", "ones", "images"):
            raise InputSpecError(f"unknown input kind {self.kind!r}; use gaussian, ones or images:DIR")
        if isinstance(self.batch_size, bool) or not isinstance(self.batch_size, int) or self.batch_size < 1:
            raise InputSpecError(f"batch size must be an integer of at least 1, got {self.batch_size!r:.60}")
        if (self.kind == "images") != (self.image_dir is not None):
            raise InputSpecError("an image folder goes with, and only with, the images input")
        if self.kind == "images" and not str(self.image_dir).strip():
            raise InputSpecError("images input needs a folder: images:DIR")
        if self.device not in DEVICES:
            raise ConfigError(f"unknown device {self.device!r}; use {', '.join(DEVICES)}")

    @classmethod
    def parse(cls, text: str, batch_size: int = 8, device: str = "cpu") -> "InputSpec":
        """Parse ``gaussian``, ``ones`` or ``images:DIR``."""
        if text.startswith("images:"):
            return cls("images", batch_size, text[len("images:"):], device)
        return cls(text, batch_size, device=device)

    def check_images(self) -> None:
        """InputSpecError (one line) when the ``images`` input names no folder, or one without images; nothing for
        the other inputs. A command checks it before it writes anything, so that a mistyped folder leaves no run,
        protocol or ViT search behind to refuse the corrected command."""
        if self.kind == "images":
            _image_files(self.image_dir)

    def describe(self) -> dict:
        """Everything about the input that determines the statistics (for cache keys).

        The device is recorded only when it is not the CPU: an accelerator's kernels sum
        in other orders and move the last bits, so its statistics are cached apart, and
        CPU keys stay what they always were.
        """
        data: dict = {"kind": self.kind, "batch_size": self.batch_size}
        if self.kind == "images":
            data["images_sha256"] = _folder_digest(_image_files(self.image_dir), Path(self.image_dir))
        if self.device != "cpu":
            data["device"] = self.device
        return data

    def to_json(self) -> dict:
        data = {"kind": self.kind, "batch_size": self.batch_size, "image_dir": self.image_dir}
        if self.device != "cpu":
            data["device"] = self.device
        return data


def _image_files(image_dir: str | None) -> list[Path]:
    folder = Path(image_dir or "")
    if not folder.is_dir():
        raise InputSpecError(f"image folder not found: {folder}")
    files = sorted(p for p in folder.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file())
    if not files:
        raise InputSpecError(f"no images ({', '.join(IMAGE_SUFFIXES)}) in {folder}")
    return files


def _folder_digest(files: list[Path], root: Path) -> str:
    """Digest of the images and their paths relative to ``root`` (their order picks the batch)."""
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()


def derived_seed(seed: int, purpose: str) -> int:
    """An independent seed for one purpose (model init, batch, labels) from the user's seed."""
    words = [seed, *purpose.encode()]
    return int(np.random.SeedSequence(words).generate_state(1, dtype=np.uint32)[0])


def _load_images(files: list[Path], count: int, generator: torch.Generator) -> torch.Tensor:
    import torch

    try:
        from PIL import Image  # Pillow, only for the real-image input
    except ImportError:
        raise InputSpecError("the images:DIR input needs Pillow (pip install pillow)") from None

    picks = torch.randperm(len(files), generator=generator)[:count].tolist()
    while len(picks) < count:  # fewer images than the batch: repeat them in order
        picks.append(picks[len(picks) % len(files)])
    mean = torch.tensor(IMAGENET_MEAN).view(3, 1, 1)
    std = torch.tensor(IMAGENET_STD).view(3, 1, 1)
    tensors = []
    for index in picks:
        try:
            with Image.open(files[index]) as image:
                rgb = image.convert("RGB").resize((IMAGE_SIZE, IMAGE_SIZE), Image.BILINEAR)
                array = np.asarray(rgb, dtype=np.float32) / 255.0
        except (OSError, ValueError) as exc:  # PIL.UnidentifiedImageError is an OSError
            raise InputSpecError(f"cannot read image {files[index]}: {exc}") from None
        tensors.append((torch.from_numpy(array).permute(2, 0, 1) - mean) / std)
    return torch.stack(tensors)


def make_batch(spec: InputSpec, num_classes: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The minibatch (images, labels) for ``spec``, reproducible from ``seed``."""
    import torch

    generator = torch.Generator().manual_seed(derived_seed(seed, "batch"))
    shape = (spec.batch_size, 3, IMAGE_SIZE, IMAGE_SIZE)
    if spec.kind == "gaussian":
        images = torch.randn(shape, generator=generator)
    elif spec.kind == "ones":
        images = torch.ones(shape)
    else:
        images = _load_images(_image_files(spec.image_dir), spec.batch_size, generator)
    labels = torch.randint(0, num_classes, (spec.batch_size,), generator=generator)
    return images, labels


def statistics_of_model(model: torch.nn.Module, images: torch.Tensor, labels: torch.Tensor,
                        spread: bool = False) -> list[BlockStats]:
    """Run one forward/backward pass of ``model`` and collect the eight statistics per block
    (with ``spread``, the :data:`~autoprox.networks.runtime.SPREAD_NAMES` too).

    The collector is the exported proxies' (:func:`autoprox.networks.runtime.block_statistics`),
    with the model's train/eval modes left as they are: one definition of the statistics.
    """
    from autoprox.networks.runtime import block_statistics

    return block_statistics(model, images, labels, train=None, spread=spread)


@contextmanager
def torch_threads(count: int) -> Iterator[None]:
    """Run a block with ``count`` intra-op threads, restoring the previous setting after.

    Statistics and fitness run single-threaded: a parallel reduction sums in an order
    that depends on the thread count, and the results must not depend on how many
    workers a user asks for. Parallelism comes from running architectures side by side.
    """
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def compute_statistics(arch, spec: InputSpec, seed: int, num_classes: int, spread: bool = False) -> list[BlockStats]:
    """Statistics of ``arch`` built with initialisation seed ``seed`` on the batch of ``spec``
    (with ``spread``, the :data:`~autoprox.networks.runtime.SPREAD_NAMES` too, from the same pass).

    The network is built and initialised on the CPU (the same weights whatever the
    device), then it and the batch move to ``spec.device``; the statistics come back
    to the CPU (for the cache and the fitness).
    """
    from autoprox.networks.models import build_model

    device = resolve_device(spec.device)
    with torch_threads(1):
        model = build_model(arch, num_classes=num_classes, seed=derived_seed(seed, "model"))
        model.train()
        images, labels = make_batch(spec, num_classes, seed)
        if device.type == "cpu":
            return statistics_of_model(model, images, labels, spread)
        stats = statistics_of_model(model.to(device), images.to(device), labels.to(device), spread)
        return [{name: tensor.detach().cpu() for name, tensor in block.items()} for block in stats]


def describe_statistics(stats: list[BlockStats]) -> Mapping[str, list]:
    """Shapes per block, for logs and error messages."""
    return {name: [list(block[name].shape) for block in stats] for name in STAT_NAMES}


def stats_fingerprint(stats: list[BlockStats]) -> str:
    """A short digest of statistics' values (tests and cache checks)."""
    digest = hashlib.sha256()
    for block in stats:
        for name in STAT_NAMES:
            digest.update(block[name].numpy().tobytes())
    return digest.hexdigest()[:16]

