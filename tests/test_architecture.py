"""The import rules docs/architecture.md states: each layer imports only itself and the layers below
it, and no module imports itself back through others (no cycle). Read from the sources, imports
inside functions included, so a lazy import cannot hide a wrong arrow."""
from __future__ import annotations

import ast
import re
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


# --- the bytes are described in one place: kfmt.format.layout (docs/architecture.md) ---

# Where a module may spell how bytes are laid out: the format layer itself, the codec plugins, whose
# framings (gzip members, xerial snappy, LZ4 frames: docs/format.md §5) are each codec's own, and the
# value format plugins, whose encodings (Avro's binary datums and single-object fingerprints, the
# schema registry's wire format: docs/typed-export.md) are each value format's own, not Kafka's.
LAYOUT_HOMES = ("kfmt.format", "kfmt.default_plugins.compression", "kfmt.default_plugins.values")
# Modules outside them that lay out bytes which are none of Kafka's structures, and why.
NOT_KAFKA_LAYOUTS = {
    "kfmt.partition.broker": "the operating system's struct flock (fcntl F_GETLK), not a file layout",
}
BYTE_ORDER_FORMAT = re.compile(r"^[<>=!]\d*[xcbB?hHiIlLqQnNefdspP][0-9xcbB?hHiIlLqQnNefdspP]*$|^[<>=|][biuf][1248]$")


def _field_positions() -> set[int]:
    """The positions and sizes the declaration names, from 12 (LOG_OVERHEAD) on: a subscript that
    spells one of them is spelling a field's offset (smaller numbers are too common to tell)."""
    from kfmt.format import layout

    numbers = {f.offset for item in layout.LAYOUTS for f in item.fields if f.offset is not None}
    numbers |= {item.size for item in layout.LAYOUTS} | {item.min_size for item in layout.LAYOUTS}
    return {n for n in numbers if n >= layout.LOG_OVERHEAD}


def _names_byte_order(call: ast.Call) -> bool:
    values = list(call.args) + [k.value for k in call.keywords]
    return any(isinstance(v, ast.Constant) and v.value in ("big", "little") for v in values)


def _layout_spellings(path: Path, positions: set[int]) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Import) and any(a.name == "struct" for a in node.names) or \
                isinstance(node, ast.ImportFrom) and node.module == "struct":
            found.append(f"{line}: imports struct")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and BYTE_ORDER_FORMAT.match(node.value):
            found.append(f"{line}: the format {node.value!r}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in ("from_bytes", "to_bytes") and _names_byte_order(node):
            found.append(f"{line}: .{node.func.attr}")
        elif isinstance(node, ast.Subscript):
            numbers = {n.value for n in ast.walk(node.slice) if isinstance(n, ast.Constant)
                       and type(n.value) is int and n.value in positions}
            found += [f"{line}: position {n} in a subscript" for n in sorted(numbers)]
    return found


@pytest.mark.parametrize("name", sorted(MODULES))
def test_field_offsets_and_struct_formats_stay_inside_kfmt_format(name):
    """A struct format, a byte-ordered dtype, int.from_bytes or a declared field position in a
    subscript outside the format layer is a layout spelled a second time: take it from
    kfmt.format.layout (the declaration) or a kfmt.format module instead."""
    if any(name == home or name.startswith(home + ".") for home in LAYOUT_HOMES) or name in NOT_KAFKA_LAYOUTS:
        return
    found = _layout_spellings(MODULES[name], _field_positions())
    assert not found, f"{name} spells byte layouts: " + "; ".join(found)


def test_the_c_header_is_generated_from_the_declaration():
    from kfmt.format import layout_c

    assert layout_c.HEADER.read_text() == layout_c.render(), (
        "kfmt/csrc/layout.h differs from kfmt/format/layout.py: run `python -m kfmt.format.layout_c`")


def test_kernel_sources_take_layouts_from_the_generated_header():
    """No kernel redefines a name of kfmt/csrc/layout.h, nor reads a field at a declared position by
    number (`p + 21`, `b[16]`), nor tests an attribute bit by its hex value."""
    from kfmt.format import layout_c

    names = set(re.findall(r"^#define (\w+)", layout_c.render(), re.M))
    positions = "|".join(str(n) for n in sorted(_field_positions(), reverse=True))
    # a big-endian load or store at a declared position, a byte of an entry by number, an attribute bit
    by_number = re.compile(rf"(?:(?:be|put)(?:16|32|64)\(\s*\w+\s*\+\s*(?:{positions})\b|"
                           rf"\b(?:p|b|q|d|entry|head)\[\s*(?:{positions})\s*\]|&\s*\(?0x(?:07|08|10|20|40)\b)")
    wrong = []
    for source in sorted((REPO / "kfmt" / "csrc").glob("*.[ch]")):
        if source.name == "layout.h" or source.stem in ("md5", "xxh3", "crc", "json_lines", "avro"):
            continue  # the header itself; hash functions, JSON escaping and Avro's encoding: no Kafka bytes
        text = re.sub(r"/\*.*?\*/|//[^\n]*", lambda m: "\n" * m[0].count("\n"), source.read_text(), flags=re.S)
        defined = set(re.findall(r"^\s*#define (\w+)", text, re.M))
        wrong += [f"{source.name} defines {n} again" for n in sorted(defined & names)]
        wrong += [f"{source.name}:{text.count(chr(10), 0, m.start()) + 1}: {m[0]}" for m in by_number.finditer(text)]
    assert not wrong, "\n".join(wrong)


def test_no_module_compares_a_magic_with_a_number():
    """docs/plugins.md: the core does not branch on a message format by its number; it names the
    format through kfmt.format.layout (MAGIC_V2, ...) or leaves the choice to the format plugin. The
    built-in plugins and the engine name them the same way (lz4's v0 header checksum among them)."""
    literal = re.compile(r"magic\s*(?:==|>=|<=|<|>|!=)\s*[0-2]\b|magic\w* in \(\s*[0-2]\s*,")
    wrong = [f"{path.relative_to(REPO)}:{text.count(chr(10), 0, m.start()) + 1}"
             for package in ("kfmt", "plugins", "pipelines") for path in sorted((REPO / package).rglob("*.py"))
             for text in [path.read_text()] for m in literal.finditer(text)]
    assert not wrong, "\n".join(wrong)


# --- the choice between a compiled kernel and its reference is made in kfmt/format (issue 23, point 2) ---

KERNEL_SWITCH = {"kfmt.format.kernels", "kfmt._speedups"}
# Modules outside kfmt/format that may still import the switch, and why (at most 3).
KERNEL_CHOOSERS = {
    # Avro datums into Arrow buffers (kfmt/csrc/avro.c, driven by plugins/values/avro_program.py) and
    # KFMT_PURE_PYTHON's hold on Protobuf's bulk decoder: the value formats' own encodings, not
    # Kafka's bytes (as LAYOUT_HOMES), chosen where each value format decodes its column.
    "kfmt.default_plugins.values.registry_formats": "Avro in one pass per registry chunk",
    "kfmt.default_plugins.values.writer_schema": "Avro / Protobuf bulk decode per writer schema",
}


@pytest.mark.parametrize("name", sorted(MODULES))
def test_kernel_choice_stays_inside_kfmt_format(name):
    """Only kfmt/format imports kfmt.format.kernels (or the extension itself): a caller imports a
    kfmt.format function named for what it does, which runs the kernel or the reference itself
    (docs/architecture.md, "Kernels and their references")."""
    if name == "kfmt.format" or name.startswith("kfmt.format.") or name in KERNEL_CHOOSERS:
        return
    found = sorted(_imports(name, MODULES[name]) & KERNEL_SWITCH)
    assert not found, (f"{name} imports {', '.join(found)}: move the kernel call and its reference into a "
                       f"kfmt.format module and call that")


def test_the_kernel_choosers_outside_kfmt_format_are_few_and_real():
    assert len(KERNEL_CHOOSERS) <= 3
    stale = [name for name in KERNEL_CHOOSERS if not _imports(name, MODULES[name]) & KERNEL_SWITCH]
    assert not stale, f"no longer import the kernels (drop them from KERNEL_CHOOSERS): {stale}"


# --- sizes that read in one sitting (issue 23, point 5) ---

MODULE_LINES, FUNCTION_LINES, PARAMETERS = 400, 60, 8
# What the sources hold today, a ratchet: a change may lower these counts (then lower them here),
# never raise them. Parameters are not counted for the public API (kfmt/api's public functions and
# methods: docs/python.md's keywords), where a flat keyword list is the interface.
SIZE_LIMITS = {f"modules over {MODULE_LINES} lines": 0, f"functions over {FUNCTION_LINES} lines": 1,
               f"functions with over {PARAMETERS} parameters": 15}


def _parameters(node: ast.FunctionDef) -> int:
    args = node.args
    named = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
    return len(named) - (1 if named[:1] in (["self"], ["cls"]) else 0)


def size_offenders() -> dict[str, list[str]]:
    """Each size rule -> where the sources of kfmt/, plugins/ and pipelines/ break it."""
    found: dict = {rule: [] for rule in SIZE_LIMITS}
    rules = list(SIZE_LIMITS)
    for folder in SOURCES:
        for path in sorted((REPO / folder).rglob("*.py")):
            rel, text = path.relative_to(REPO).as_posix(), path.read_text()
            if text.count("\n") > MODULE_LINES:
                found[rules[0]].append(f"{rel}: {text.count(chr(10))} lines")
            public_api = rel.startswith("kfmt/api/")
            for node in ast.walk(ast.parse(text)):
                if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                length = node.end_lineno - node.lineno + 1
                if length > FUNCTION_LINES:
                    found[rules[1]].append(f"{rel}:{node.lineno} {node.name}: {length} lines")
                exempt = public_api and not node.name.startswith("_")
                if _parameters(node) > PARAMETERS and not exempt:
                    found[rules[2]].append(f"{rel}:{node.lineno} {node.name}: {_parameters(node)} parameters")
    return found


def test_sizes_do_not_grow():
    over = [f"{rule}: {len(where)}, at most {SIZE_LIMITS[rule]}:\n  " + "\n  ".join(where)
            for rule, where in size_offenders().items() if len(where) > SIZE_LIMITS[rule]]
    assert not over, "split or shrink these (docs/architecture.md, 'Sizes'):\n" + "\n".join(over)


# --- one class per name (issue 23, point 3) ---

# Names that still label two unrelated classes (a value format's result and a dump decoder's; a
# protocol field and a layout field; the byte layout and an Avro schema's column layout; the plugin
# registry and the schema-registry value format; the CLI's parser and an Avro schema parser): a
# ratchet, this set only shrinks.
SHARED_CLASS_NAMES = {"Decoded", "Field", "Layout", "Registry", "_Parser"}


def test_one_class_per_name():
    where: dict[str, list[str]] = {}
    for folder in SOURCES:
        for path in sorted((REPO / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ClassDef):
                    where.setdefault(node.name, []).append(f"{path.relative_to(REPO).as_posix()}:{node.lineno}")
    shared = {name: places for name, places in where.items() if len(places) > 1}
    assert set(shared) <= SHARED_CLASS_NAMES, {n: p for n, p in shared.items() if n not in SHARED_CLASS_NAMES}
