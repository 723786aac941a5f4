"""autoprox: evolutionary discovery of zero-cost proxies for Vision Transformers.

The data flow is the architecture, one layer per step (docs/layout.md):
``spaces`` -> ``networks`` -> ``data`` (benchmark, statistics cache) -> ``genome`` (over the
``primitives`` package) -> ``proxies`` -> ``search`` -> ``apps`` -> ``reports`` -> ``cli``.

The names most users need are here: :class:`ProxySearch` (a search as an estimator),
:class:`Proxy` (any proxy, one scoring path), :func:`resolve_proxy` (a proxy from its name:
``params``, ``zico``, ``autoprox_a``, a genome string, a proxy file or a run directory,
``recommended:pit/joint``),
:func:`load_benchmark` and :func:`build_vit`. They are imported when first used, so
``import autoprox`` stays light.
"""

__version__ = "0.1.0"


class _ClonePrimitives:
    """Finds ``autoprox.primitives`` in a clone used without installing it (``PYTHONPATH=CLONE``), where the
    operations live beside this package, in ``CLONE/primitives``; an install (wheel or editable) has them as
    ``autoprox.primitives`` itself, and this finder, last on ``sys.meta_path``, is then never asked."""

    @classmethod
    def find_spec(cls, fullname: str, path=None, target=None):
        if fullname != f"{__name__}.primitives":
            return None
        import importlib.util
        from pathlib import Path

        location = Path(__file__).resolve().parent.parent / "primitives" / "__init__.py"
        if not location.is_file():
            return None
        return importlib.util.spec_from_file_location(fullname, location,
                                                      submodule_search_locations=[str(location.parent)])


def _install_clone_finder() -> None:
    import sys

    if not any(getattr(finder, "__name__", "") == "_ClonePrimitives" for finder in sys.meta_path):
        sys.meta_path.append(_ClonePrimitives)


_install_clone_finder()

#: Public name -> the module that defines it (imported on first use).
_LAZY = {
    "ProxySearch": "autoprox.api",
    "FoundProxy": "autoprox.api",
    "Proxy": "autoprox.proxies.proxy",
    "resolve_proxy": "autoprox.api",
    "load_benchmark": "autoprox.data.benchmark",
    "search_table": "autoprox.api",
    "score_rows": "autoprox.api",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'autoprox' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


def build_vit(arch, num_classes: int = 100, seed: int | None = None, space_file=None):
    """Build the PyTorch model of an architecture, ready to train.

    ``arch`` is an architecture config (``{"hidden_dim": 192, ...}``), an entry of a
    ViT search's ``top.json`` (with an ``arch`` key), or the path of a JSON file holding
    either (``top.json`` gives its first-ranked architecture, in the space it records; the
    search's folder stands for its ``top.json``). ``num_classes`` is at least 1.
    ``space_file`` is the file of a space defined by one (``--space-file``), registered first;
    a ``top.json`` whose space is not registered is refused in one line saying so.
    ``seed``: the initialisation's seed (None: a new one at every call); the engine's model for
    ``--stat-seeds S`` is ``seed=derived_seed(S, "model")`` (docs/manual.md, *Export*).
    """
    import json
    from pathlib import Path

    from autoprox.core.atomic import load_json
    from autoprox.core.errors import ArchitectureError, VitSearchError
    from autoprox.networks.models import build_model
    from autoprox.spaces.architectures import parse_arch
    from autoprox.spaces.registry import REGISTRY

    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 1:
        raise ArchitectureError(f"num_classes: expected an integer of at least 1, got {num_classes!r}"[:200])
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise ArchitectureError(f"seed: expected an integer or None, got {seed!r}"[:200])
    space = str(REGISTRY.register_file(space_file).name) if space_file is not None else None
    if isinstance(arch, (str, Path)):
        path = Path(arch)
        if path.is_dir():  # a ViT search's folder stands for its top.json, as a run's folder for its best.json
            if not (path / "top.json").is_file():
                raise VitSearchError(f"{path} is a folder without top.json: give a ViT search's folder or its "
                                     "top.json, or an architecture's JSON")
            path = path / "top.json"
        try:
            arch = load_json(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise VitSearchError(f"{path}: no such file (a ViT search's top.json or an architecture's JSON)") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise VitSearchError(f"{path}: cannot be read as JSON ({exc})") from None
        if isinstance(arch, dict) and isinstance(arch.get("top"), list):
            recorded = arch.get("space")
            if isinstance(recorded, str):
                if space is not None and space != recorded:
                    raise VitSearchError(f"{path} is a search of space {recorded!r}, but space_file {space_file} "
                                         f"defines {space!r}")
                try:
                    REGISTRY.get(recorded)
                except ArchitectureError:
                    raise VitSearchError(
                        f"{path} is a search of space {recorded!r}, which is not registered in this process: give "
                        f"its file, build_vit(..., space_file='SPACE.json')") from None
                space = recorded
            if not arch["top"]:
                raise VitSearchError("this ViT search result holds no scored architecture")
            arch = arch["top"][0]
    if isinstance(arch, dict) and isinstance(arch.get("arch"), dict):
        arch = arch["arch"]
    return build_model(parse_arch(arch, space), num_classes=num_classes, seed=seed)


__all__ = ["FoundProxy", "Proxy", "ProxySearch", "__version__", "build_vit", "load_benchmark", "resolve_proxy",
           "score_rows", "search_table"]
