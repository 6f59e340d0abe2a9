"""The import rules docs/architecture.md states: each layer imports only itself and the layers below
it, and no module imports itself back through others (no cycle). Read from the sources, imports
inside functions included, so a lazy import cannot hide a wrong arrow."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# Source folder -> the package name it installs as (setup.py maps plugins/ and pipelines/ into kfmt).
SOURCES = {"kfmt": "kfmt", "plugins": "kfmt.default_plugins", "pipelines": "kfmt.pipelines"}

# The layers of docs/architecture.md, bottom first. A module may import modules of its own layer
# and of lower layers only. Packages of one layer do not import each other unless listed together.
LAYERS = [
    ["kfmt.errors", "kfmt.defaults", "kfmt.memory"],
    ["kfmt.plugin"],
    ["kfmt.storage"],
    ["kfmt.format"],
    ["kfmt.default_plugins"],
    ["kfmt.partition"],
    ["kfmt.write", "kfmt.rows"],
    ["kfmt.pipelines"],
    ["kfmt.transforms", "kfmt.inspect"],
    ["kfmt.api"],
    ["kfmt.cli", "kfmt.__main__"],
]
# Modules that sit outside the layers: the package face (kfmt/__init__.py: the version and the
# public API, imported lazily) and the kernel module built from kfmt/csrc.
UNLAYERED = {"kfmt", "kfmt._speedups"}
# Same-layer neighbours that may not import each other (they are independent of one another).
INDEPENDENT = [("kfmt.write", "kfmt.rows"), ("kfmt.transforms", "kfmt.inspect")]


def _modules() -> dict[str, Path]:
    found = {}
    for folder, package in SOURCES.items():
        for path in (REPO / folder).rglob("*.py"):
            rel = path.relative_to(REPO / folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            found[".".join([package, *parts])] = path
    return found


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            out.add(module)
            # `from kfmt.format import segment` imports the module kfmt.format.segment
            out.update(f"{module}.{alias.name}" for alias in node.names
                       if f"{module}.{alias.name}" in MODULES)
    return {m for m in out if m == "kfmt" or m.startswith("kfmt.")}


def _layer(module: str) -> tuple[int, str] | None:
    if module in UNLAYERED:
        return None
    for level, packages in enumerate(LAYERS):
        for package in packages:
            if module == package or module.startswith(package + "."):
                return level, package
    raise AssertionError(f"{module} is in no layer of docs/architecture.md")


def test_every_module_is_in_a_layer():
    for name in MODULES:
        _layer(name)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_imports_follow_the_layers(name):
    here = _layer(name)
    if here is None:
        return
    wrong = []
    for target in sorted(_imports(name, MODULES[name])):
        there = _layer(target)
        if there is None or there[1] == here[1]:
            continue
        if there[0] > here[0] or (there[0] == here[0]
                                  and tuple(sorted((here[1], there[1]))) in map(tuple, map(sorted, INDEPENDENT))):
            wrong.append(f"{target} ({there[1]})")
    assert not wrong, f"{name} ({here[1]}) imports upward: {', '.join(wrong)}"


def test_no_import_cycle():
    graph = {name: {t for t in _imports(name, path) if t in MODULES and t != name}
             for name, path in MODULES.items()}
    # A package's __init__ re-exporting its modules is not a cycle of meaning; every other is.
    for name, targets in graph.items():
        graph[name] = {t for t in targets if not name.startswith(t + ".")}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str):
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                raise AssertionError("import cycle: " + " -> ".join(stack[stack.index(nxt):] + [nxt]))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)


def test_no_test_module_imports_another():
    """Test modules share helpers through tests/support/ and fixtures through conftest.py, never by
    importing one another: a test file is not a library (renaming it must not break another), and
    what is shared stays in view. Imports inside functions count too."""
    tests = REPO / "tests"
    test_modules = {p.stem for p in tests.rglob("test_*.py")}
    wrong = []
    for path in sorted(tests.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            else:
                continue
            wrong += [f"{path.relative_to(REPO)}:{node.lineno} imports {name}"
                      for name in names if name.split(".")[-1] in test_modules or name.split(".")[0] in test_modules]
    assert not wrong, "test modules import test modules (move the helpers to tests/support/):\n" + "\n".join(wrong)
