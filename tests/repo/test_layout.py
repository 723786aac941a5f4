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
    if parts[0] == "primitives" or parts[:2] == ["autoprox", "primitives"]:
        return 0  # the operations genomes are built from (primitives/, installed as autoprox.primitives); they
        # import nothing of autoprox but core, so any layer may use them
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


def test_primitives_import_nothing_of_autoprox_but_core():
    """Nothing but ``autoprox.core`` (below every layer: the one Registry and the errors), nor themselves by an
    absolute name: primitives/ is installed as autoprox.primitives, so its modules import one another
    relatively (``from .table import ...``)."""
    for path in sorted((REPO / "primitives").rglob("*.py")):
        assert all(name.startswith("autoprox.core.") for name in _imports(path)), path


def _upward_imports(module: str, imported: set[str]) -> list[str]:
    """The imports of ``module`` from a layer above its own."""
    own = _layer(module)
    if own is None:
        return []
    return [f"{module} imports {name} from above" for name in sorted(imported)
            if (layer := _layer(name)) is not None and layer > own and name != "autoprox"]


def test_an_upward_import_is_caught():
    assert _upward_imports("autoprox.apps.ranking", {"autoprox.cli.main", "autoprox.core.errors", "autoprox.primitives"}) \
        == ["autoprox.apps.ranking imports autoprox.cli.main from above"]
    assert _upward_imports("autoprox.api", {"autoprox.cli.main"}) == []  # the API sits above every layer


def test_every_module_imports_only_from_its_layer_or_below():
    assert len(PACKAGE_FILES) > 50
    upward = [line for path in PACKAGE_FILES
              for line in _upward_imports(".".join(path.relative_to(REPO).with_suffix("").parts), _imports(path))]
    assert not upward, "\n".join(upward)


def _import_cycles_script():
    """``scripts/import_cycles.py``, the repository's own static check (no tool outside the clone)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("import_cycles", REPO / "scripts" / "import_cycles.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_import_cycles_lazy_imports_included():
    result = subprocess.run([sys.executable, "scripts/import_cycles.py", "autoprox", "primitives"], cwd=REPO,
                            capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout.strip().endswith("cycles: 0"), result.stdout + result.stderr


def test_a_lazy_import_cycle_is_caught(tmp_path):
    """The check sees an import inside a function, a relative one and ``from package import module``, and leaves
    out a module's import of its own package (its ``__init__`` re-exporting it is no cycle)."""
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("from pkg.sub import low\n")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "low.py").write_text("import pkg\n\ndef f():\n    from pkg import high\n")
    (package / "high.py").write_text("from .sub import low\n")
    (package / "alone.py").write_text("from pkg.sub import low\n")
    script = _import_cycles_script()
    graph = script.import_graph(script.modules_of([package]))
    assert graph["pkg.sub.low"] == {"pkg.high"} and graph["pkg.high"] == {"pkg.sub", "pkg.sub.low"}
    assert script.cycles(graph) == [["pkg.high", "pkg.sub.low"]]
    assert script.main([str(package)]) == 1
    (package / "sub" / "low.py").write_text("import pkg\n")
    assert script.cycles(script.import_graph(script.modules_of([package]))) == []


def test_no_skip_reason_names_a_path_outside_the_repository():
    """Issue 43: a skip's reason named ``shared/tools/import_cycles.py``, which a user does not have."""
    import re

    reasons = [(path.name, m.group(1)) for path in sorted((REPO / "tests").rglob("*.py"))
               for m in re.finditer(r"pytest\.skip\((.*?)\)\n", path.read_text(encoding="utf-8"), re.S)]
    assert reasons and not [r for r in reasons if "shared" in r[1] or "REPO.parent" in r[1] or "{tool}" in r[1]]


def test_modules_fit_on_a_screen_or_two():
    lengths = {path: len(path.read_text(encoding="utf-8").splitlines()) for path in PACKAGE_FILES}
    long = [f"{path.relative_to(REPO)}: {n} lines" for path, n in lengths.items() if n > 620]
    assert not long, "; ".join(long)


def test_every_mark_on_a_test_is_registered():
    """A misspelt mark (``pytest.mark.slwo``) would silently leave a slow test in the quick lane: every mark the
    tests use is a built-in one or registered in pyproject.toml."""
    import tomllib

    markers = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["markers"]
    known = {line.split(":")[0] for line in markers} | {"parametrize", "skip", "skipif", "xfail", "usefixtures",
                                                          "filterwarnings"}
    used = {}
    for path in sorted((REPO / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute)
                    and node.value.attr == "mark" and isinstance(node.value.value, ast.Name)
                    and node.value.value.id == "pytest"):
                used.setdefault(node.attr, path.name)
    assert "slow" in used and set(used) <= known, {name: file for name, file in used.items() if name not in known}


def test_nothing_of_the_clone_points_at_files_a_user_does_not_have():
    """Issue 32: examples/README.md read ``../shared/vit-bench-101/...`` and wrote into ``runs/examples``, and
    ``autoprox spaces`` and docstrings cited ``shared/spaces.md``, which are beside the developers' clone only."""
    import re

    listed = subprocess.run(["git", "ls-files", "-z", "--", "*.md", "*.py", "*.toml", "*.json", "*.sh", "*.cff"],
                            cwd=REPO, check=True, capture_output=True, text=True).stdout.split("\0")
    outside = re.compile(r"\.\./shared/|(?<![\w/])shared/(spaces|method)\.md|(?<![\w/])shared/papers")
    found = [f"{name}:{number}" for name in listed if name and not name.startswith("runs/")
             and name != "tests/repo/test_layout.py"
             for number, line in enumerate((REPO / name).read_text(encoding="utf-8", errors="replace").splitlines(), 1)
             if outside.search(line)]
    assert found == []
    examples = (REPO / "examples" / "README.md").read_text()
    assert "runs/examples" not in examples and "/tmp/autoprox/examples/" in examples
    from autoprox.spaces.registry import get_space

    assert all("docs/spaces.md" in get_space(name).summary for name in ("autoformer", "pit"))


def test_the_tests_mirror_the_package_folders():
    """Issue 42: the tests were one flat folder of 69 files, some named after modules that exist in two folders.
    Each test file now sits in the folder of the package it tests (``tests/search/`` for ``autoprox/search/``;
    ``tests/primitives/`` for ``primitives/``; ``tests/repo/`` for checks of the repository itself; the public
    API at the top), every folder is a package, and no two test files share a name."""
    tests = REPO / "tests"
    files = sorted(path for path in tests.rglob("test_*.py") if "fixtures" not in path.relative_to(tests).parts)
    package_folders = {path.parent.relative_to(REPO / "autoprox").as_posix()
                       for path in (REPO / "autoprox").rglob("__init__.py")} | {"primitives"}
    folders = {path.parent.relative_to(tests).as_posix() for path in files}
    assert folders - {"."} <= package_folders | {"repo"}, sorted(folders - package_folders - {"repo", "."})
    assert [path.name for path in files if path.parent == tests] == ["test_api.py"]
    names = [path.name for path in files]
    assert len(files) > 60 and len(set(names)) == len(names), sorted({n for n in names if names.count(n) > 1})
    missing = sorted(folder for folder in folders - {"."}
                     for part in [tests / folder] if not (part / "__init__.py").exists())
    assert not missing, missing
