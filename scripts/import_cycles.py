"""Import cycles among the modules of one or more package folders, found statically (from the AST).

Usage: ``python scripts/import_cycles.py autoprox primitives``

Every ``import`` and ``from ... import`` statement counts, those inside functions (lazy imports)
included: a lazy import that closes a cycle still ties the two modules together. An import of a
package counts as an import of its ``__init__``; a module's import of its own enclosing packages is
left out (Python runs those ``__init__`` files first anyway, and a package re-exporting its own
modules is no cycle). Prints each cycle (a strongly connected component of more than one module),
then ``cycles: N``; exits 1 when there is any.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Iterable


def modules_of(folders: Iterable[Path]) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` file under each folder (the folder is the top package)."""
    found = {}
    for folder in folders:
        folder = Path(folder).resolve()
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder.parent).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imported_names(path: Path, module: str) -> set[str]:
    """Every dotted name ``path`` imports, relative imports resolved against ``module``."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)  # ``from pkg import module``
    return names


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the known modules it imports (each name cut back to the longest known module it names)."""
    graph = {}
    for module, path in modules.items():
        edges = set()
        for name in imported_names(path, module):
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name and name != module and not module.startswith(name + "."):
                edges.add(name)
        graph[module] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            step = next(edges, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph.get(step, ())))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    found = cycles(import_graph(modules_of(Path(arg) for arg in argv)))
    for component in found:
        print("cycle: " + " <-> ".join(component))
    print(f"cycles: {len(found)}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
