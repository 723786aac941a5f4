"""The package's shape: layers that import only downwards, no import cycles (lazy imports included),
modules that fit on a screen or two."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

#: The layers of autoprox, bottom to top; a module may import only from its own layer or below.
LAYERS = ("core", "spaces", "networks", "data", "genome", "proxies", "search", "apps", "reports", "cli")
PACKAGE_FILES = sorted((REPO / "autoprox").rglob("*.py")) + sorted((REPO / "primitives").rglob("*.py"))


def _layer(module: str) -> int | None:
    parts = module.split(".")
    if parts[0] == "primitives":
        return 0  # the operations genomes are built from; they import nothing of autoprox, so any layer may use them
    if len(parts) > 1 and parts[1] in LAYERS:
        return LAYERS.index(parts[1])
    return None  # autoprox/__init__.py and autoprox/api.py sit above every layer


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return {m for m in found if m.split(".")[0] in ("autoprox", "primitives")}


def test_primitives_import_nothing_of_autoprox():
    for path in sorted((REPO / "primitives").rglob("*.py")):
        assert not any(m.startswith("autoprox") for m in _imports(path)), path


@pytest.mark.parametrize("path", PACKAGE_FILES, ids=[str(p.relative_to(REPO)) for p in PACKAGE_FILES])
def test_each_module_imports_only_from_its_layer_or_below(path):
    module = ".".join(path.relative_to(REPO).with_suffix("").parts)
    own = _layer(module)
    if own is None:
        return
    for imported in _imports(path):
        layer = _layer(imported)
        assert layer is None or layer <= own or imported == "autoprox", f"{module} imports {imported} from above"


def test_no_import_cycles_lazy_imports_included():
    tool = REPO.parent / "shared" / "tools" / "import_cycles.py"
    if not tool.is_file():
        pytest.skip(f"{tool} is not beside this checkout")
    result = subprocess.run([sys.executable, str(tool), "autoprox", "primitives"], cwd=REPO, capture_output=True,
                            text=True)
    assert result.returncode == 0 and result.stdout.strip().endswith("cycles: 0"), result.stdout


@pytest.mark.parametrize("path", PACKAGE_FILES, ids=[str(p.relative_to(REPO)) for p in PACKAGE_FILES])
def test_modules_fit_on_a_screen_or_two(path):
    assert len(path.read_text(encoding="utf-8").splitlines()) <= 620, path


def test_every_slow_test_named_in_conftest_exists():
    """A name in SLOW_TESTS that matches no test would silently leave a slow test in the quick lane."""
    from tests.conftest import SLOW_TESTS

    for entry in sorted(SLOW_TESTS):
        path, _, name = entry.partition("::")
        source = REPO / path
        assert source.is_file(), entry
        assert not name or f"def {name}(" in source.read_text(), entry
