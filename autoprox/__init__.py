"""autoprox: evolutionary discovery of zero-cost proxies for Vision Transformers.

The data flow is the architecture, one module per step:
``spaces`` -> ``models`` -> ``statistics`` / ``cache`` -> ``genome`` (over the
``primitives`` package) -> ``fitness`` -> ``evolution`` -> ``rundir`` -> ``cli``.
"""

__version__ = "0.1.0"


def build_vit(arch, num_classes: int = 100, seed: int | None = None):
    """Build the PyTorch model of an architecture, ready to train.

    ``arch`` is an architecture config (``{"hidden_dim": 192, ...}``), an entry of a
    ViT search's ``top.json`` (with an ``arch`` key), or the path of a JSON file holding
    either (``top.json`` gives its first-ranked architecture).
    """
    import json
    from pathlib import Path

    from autoprox.core.errors import VitSearchError
    from autoprox.networks.models import build_model
    from autoprox.spaces.architectures import parse_arch

    if isinstance(arch, (str, Path)):
        arch = json.loads(Path(arch).read_text(encoding="utf-8"))
        if isinstance(arch, dict) and isinstance(arch.get("top"), list):
            if not arch["top"]:
                raise VitSearchError("this ViT search result holds no scored architecture")
            arch = arch["top"][0]
    if isinstance(arch, dict) and isinstance(arch.get("arch"), dict):
        arch = arch["arch"]
    return build_model(parse_arch(arch), num_classes=num_classes, seed=seed)
