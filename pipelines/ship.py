"""Shipping kfmt to Spark executors whose Python does not have it (docs/cluster.md, "Packaging").

Spark's executors run their Python workers with the interpreter PYSPARK_PYTHON names on their own
machines. Where that interpreter has PySpark and its Arrow requirements (pyarrow, numpy, pandas) but
not kfmt or kfmt's own dependencies, the driver ships them: the distributions the workers lack are
copied from the driver's environment into one directory tree (an importable `site-packages` with
their `.dist-info` folders, so that kfmt's plugins are found by their entry points), zipped, and
added with `SparkContext.addArchive(zip#_kfmt_shipped)`. Spark unpacks it in each executor's working
directory, which is its Python workers' current directory, and the workers find it through
PYTHONPATH (`sc.environment`, which every Python function and data source registered afterwards
carries). The compiled kernels travel inside (an archive is unpacked, unlike `spark.submit.pyFiles`
zips, from which no extension module can load), so the workers must run the driver's platform and
Python minor version, which PySpark requires anyway.

The same tree, unpacked on the driver, is on PYTHONPATH too (by its absolute path): Spark plans a
Python data source in a Python worker on the driver's machine, started with the workers' interpreter.

KFMT_SHIP: `auto` (default) ships what a probe of the workers finds missing or of another version;
`always` ships kfmt itself even when the workers have it (the driver's code runs everywhere);
`never` only checks, and fails in one line when the workers lack something.

Built archives are kept in a cache directory (KFMT_SHIP_CACHE, default a folder in the temporary
directory), named by a digest of what they hold, so that the next run reuses them.
"""
from __future__ import annotations

import hashlib
import importlib.metadata as metadata
import os
import re
import shutil
import tempfile
import zipfile
from pathlib import Path

from kfmt.errors import UsageError

SHIP_ENV = "KFMT_SHIP"
CACHE_ENV = "KFMT_SHIP_CACHE"
FOLDER = "_kfmt_shipped"  # where each executor unpacks the archive (its working directory)
MODES = ("auto", "always", "never")
#: PySpark's own requirements on its workers (the Arrow paths kfmt's data source uses): never
#: shipped, because a second copy beside the workers' own would be imported half and half
SPARK_PROVIDED = frozenset({"pyspark", "py4j", "pyarrow", "numpy", "pandas", "python-dateutil", "pytz",
                            "tzdata", "six"})
#: optional distributions shipped when the driver has them (storage backends used by tasks)
OPTIONAL = ("s3fs", "gcsfs", "adlfs")
#: kfmt's packages by import name and where they sit in the shipped tree
KFMT_PACKAGES = ("kfmt", "kfmt.pipelines", "kfmt.default_plugins")


def ship_mode(env: dict | None = None) -> str:
    mode = (os.environ if env is None else env).get(SHIP_ENV, "auto").strip().lower() or "auto"
    if mode not in MODES:
        raise UsageError(f"{SHIP_ENV}={mode}: expected one of {', '.join(MODES)}")
    return mode


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def needed_distributions() -> dict[str, str]:
    """kfmt and every distribution it needs at run time, as installed here: canonical name ->
    version. Requirement markers other than extras are not evaluated: what this environment has
    installed for kfmt is what the workers get."""
    found: dict[str, str] = {}
    todo = ["kfmt", *(name for name in OPTIONAL if _installed(name))]
    while todo:
        name = canonical(todo.pop())
        if name in found:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        found[name] = dist.version
        for requirement in dist.requires or []:
            if "extra ==" not in requirement:
                todo.append(re.match(r"[A-Za-z0-9._-]+", requirement)[0])
    return found


def _installed(name: str) -> bool:
    try:
        metadata.distribution(name)
        return True
    except metadata.PackageNotFoundError:
        return False


def to_ship(driver: dict[str, str], workers: dict[str, str | None], kfmt_imports: bool, mode: str) -> list[str]:
    """The distributions the workers need from the driver: those they lack or have in another
    version (PySpark's own excepted), and kfmt when it does not import there or mode is `always`."""
    names = [n for n, version in driver.items()
             if n not in SPARK_PROVIDED and n != "kfmt" and workers.get(n) != version]
    if not kfmt_imports or mode == "always" or workers.get("kfmt") != driver.get("kfmt"):
        names.append("kfmt")
    return sorted(names)


def build(names: list[str]) -> tuple[Path, Path]:
    """The shipped tree and its zip for these distributions: (directory, archive), from the cache
    when it holds them already."""
    sources = dict(_files_of(name) for name in names)
    digest = hashlib.sha256()
    for name in sorted(sources):
        for rel, source in sorted(sources[name].items()):
            if isinstance(source, bytes):
                digest.update(f"{rel}\0".encode() + hashlib.sha256(source).digest())
            else:
                stat = source.stat()
                digest.update(f"{rel}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode())
    key = digest.hexdigest()[:24]
    cache = Path(os.environ.get(CACHE_ENV) or Path(tempfile.gettempdir()) / f"kfmt-ship-{os.getuid()}")
    tree, archive = cache / key, cache / f"{key}.zip"
    if tree.is_dir() and archive.is_file():
        return tree, archive
    cache.mkdir(parents=True, exist_ok=True, mode=0o700)
    work = Path(tempfile.mkdtemp(prefix=f"{key}.", dir=cache))
    try:
        with zipfile.ZipFile(work / "archive.zip", "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
            for files in sources.values():
                for rel, source in sorted(files.items()):
                    target = work / "tree" / rel
                    target.parent.mkdir(parents=True, exist_ok=True)
                    if isinstance(source, bytes):
                        target.write_bytes(source)
                    else:
                        shutil.copy2(source, target)
                    zf.write(target, rel)
        shutil.rmtree(tree, ignore_errors=True)
        try:
            os.replace(work / "tree", tree)
        except OSError:  # another driver published the same tree meanwhile: same content
            if not tree.is_dir():
                raise
        os.replace(work / "archive.zip", archive)  # last: its presence says the tree is whole
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return tree, archive


def _files_of(name: str) -> tuple[str, dict[str, Path | bytes]]:
    """(name, {path in the shipped tree: file here, or its content}) for one distribution."""
    dist = metadata.distribution(name)
    if name == "kfmt":
        return name, _kfmt_files(dist)
    files = {}
    for entry in dist.files or []:
        rel = str(entry)
        if rel.startswith("..") or "__pycache__" in rel or rel.endswith(".pyc"):
            continue  # scripts outside site-packages, and byte code the workers make themselves
        path = Path(dist.locate_file(entry))
        if path.is_file():
            files[rel] = path
    return name, files


def _kfmt_files(dist) -> dict[str, Path | bytes]:
    """kfmt from where it is imported (an editable install keeps it in the source tree, with
    kfmt.pipelines and kfmt.default_plugins in folders of their own), and a .dist-info folder
    carrying its metadata and entry points (its plugins are found through them)."""
    import importlib

    files: dict[str, Path] = {}
    for package in KFMT_PACKAGES:
        root = Path(importlib.import_module(package).__path__[0])
        prefix = package.replace(".", "/")
        for path in root.rglob("*"):
            rel = path.relative_to(root)
            if path.is_file() and "__pycache__" not in rel.parts and rel.parts[0] != "csrc" \
                    and path.suffix not in (".pyc", ".c", ".h", ".o"):
                files.setdefault(f"{prefix}/{rel.as_posix()}", path)
    # Written from the metadata's text: an install in development mode keeps it in kfmt.egg-info
    info = f"kfmt-{dist.version}.dist-info"
    for meta, sources in (("METADATA", ("METADATA", "PKG-INFO")), ("entry_points.txt", ("entry_points.txt",))):
        text = next((t for t in map(dist.read_text, sources) if t), None)
        if text is not None:
            files[f"{info}/{meta}"] = text.encode()
    return files


def ship(spark, names: list[str]) -> None:
    """Build the archive of `names`, send it to the executors and put it on their PYTHONPATH (and
    on the driver's Python workers', by the local tree's absolute path)."""
    tree, archive = build(names)
    sc = spark.sparkContext
    if not sc.master.startswith("local"):  # local executors share the driver's disk: the tree does
        sc.addArchive(f"{archive}#{FOLDER}")
    paths = [FOLDER, str(tree)] + [p for p in sc.environment.get("PYTHONPATH", "").split(os.pathsep)
                                   if p and p not in (FOLDER, str(tree))]
    sc.environment["PYTHONPATH"] = os.pathsep.join(paths)
