"""Generations of an archive (docs/archive.md): which object holds each file of a generation, and
where a new version of a file goes.

An archive is appended to run after run. Each run that has something new publishes a generation:
a complete kfmt manifest (kfmt.storage.manifest) written to `_kfmt_generations/<N>.json`, then copied
to `_kfmt_manifest.json` at the archive's root, the pointer to the latest generation. The copy is
one object written whole (a PUT on object stores, a rename on local disk), so a reader that finds
the pointer finds a complete manifest; a run killed before it leaves the previous generation the
latest one.

Objects are never overwritten once a generation lists them: a file's first version is stored at
its own path (`<topic>-<partition>/<base offset>.log`), so the first generation is laid out as the
source is; a later version with other bytes (a segment the cleaner rewrote, an active segment that
has grown since it was archived up to its last complete batch, a leader-epoch-checkpoint the broker
rewrote) goes to `_kfmt_objects/<path>.<SHA-256>`, content-addressed. A version some generation
already holds is never uploaded again. The manifest's `files` are the objects (by their key below
the archive, with size, SHA-256 and the source file's modification time); the archive section maps
each file of the generation to its object (`files`) and lists every object any generation up to
this one holds (`objects`), so that the next run knows what is there without reading older
generations.
"""
from __future__ import annotations

from dataclasses import dataclass

from kfmt.errors import DataError
from kfmt.storage.manifest import Manifest
from kfmt.transforms.archive.archive_format import SECTION, ArchivedPartition, parse_section

GENERATIONS_DIR = "_kfmt_generations"
OBJECTS_DIR = "_kfmt_objects"


def generation_name(number: int) -> str:
    """The generation manifest's key below the archive."""
    return f"{GENERATIONS_DIR}/{number:08d}.json"


@dataclass(frozen=True)
class StoredFile:
    """One file of a generation: the object holding it and the size of the source file it was
    read from (an active segment is archived up to its last complete batch: the object is shorter)."""

    object: str
    source_size: int

    def to_json(self) -> dict:
        return {"object": self.object, "source_size": self.source_size}


@dataclass(frozen=True)
class StoredObject:
    """One object of the archive: the file it is a version of, its size and SHA-256."""

    rel: str
    size: int
    sha256: str

    def to_json(self) -> dict:
        return {"rel": self.rel, "size": self.size, "sha256": self.sha256}


@dataclass
class Generation:
    """A published generation: its manifest (files keyed by object) and archive section."""

    number: int
    manifest: Manifest
    section: dict
    partitions: list[ArchivedPartition]
    files: dict[str, StoredFile]  # file of the generation (path as in a broker's directory) -> object
    objects: dict[str, StoredObject]  # every object of this and every earlier generation

    def natural_manifest(self) -> Manifest:
        """The manifest with every file under its own path (what a reader of the generation sees)."""
        files = {}
        for rel, stored in self.files.items():
            record = self.manifest.files[stored.object]
            files[rel] = type(record)(rel, record.size, record.sha256, record.mtime_ms)
        return Manifest(self.manifest.root, files, self.manifest.run, self.manifest.created_ms,
                        self.manifest.sections)

    def object_of(self) -> dict[str, str]:
        return {rel: stored.object for rel, stored in self.files.items()}


def parse_generation(manifest: Manifest, file: str) -> Generation:
    """A manifest with an archive section as a generation. An archive written before generations
    (section version 1: every file at its own path) is generation 1."""
    section, partitions = parse_section(manifest, file)
    if section["version"] == 1:
        files = {rel: StoredFile(rel, r.size) for rel, r in manifest.files.items()}
        objects = {rel: StoredObject(rel, r.size, r.sha256) for rel, r in manifest.files.items()}
        return Generation(1, manifest, section, partitions, files, objects)
    try:
        number = int(section["generation"])
        files = {rel: StoredFile(str(doc["object"]), int(doc["source_size"]))
                 for rel, doc in section["files"].items()}
        objects = {key: StoredObject(str(doc["rel"]), int(doc["size"]), str(doc["sha256"]))
                   for key, doc in section["objects"].items()}
        missing = sorted({s.object for s in files.values()} - set(manifest.files))
        if missing:
            raise ValueError(f"files held by objects the manifest does not list: {', '.join(missing[:3])}")
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise DataError(f"unreadable {SECTION} section: {err}", file=file) from None
    return Generation(number, manifest, section, partitions, files, objects)


class ObjectIndex:
    """Where each version of each file is (or goes): the objects the published generations hold."""

    def __init__(self, objects: dict[str, StoredObject], present: dict[str, int] | None = None):
        """`present`: key -> size of the objects found at the archive (None: trust the index). An
        indexed object found missing or of another size is uploaded again under its key."""
        self.objects = dict(objects)
        self._by_version = {(o.rel, o.sha256): key for key, o in objects.items()
                            if present is None or present.get(key) == o.size}

    def versions(self, rel: str) -> tuple[tuple[str, str], ...]:
        """(SHA-256, key) of every intact version of `rel` the archive holds."""
        return tuple((sha, key) for (r, sha), key in self._by_version.items() if r == rel)

    def natural_taken(self, rel: str) -> bool:
        return rel in self.objects

    def add(self, key: str, rel: str, size: int, sha256: str) -> None:
        self.objects[key] = StoredObject(rel, size, sha256)
        self._by_version[(rel, sha256)] = key


def object_key(rel: str, sha256: str, versions, natural_taken: bool) -> tuple[str, bool]:
    """(the key of the object holding this version of `rel`, whether an intact one is there already).
    A version the archive holds keeps its object; a new one goes to the file's own path while no
    generation holds an object there, else to a content-addressed key."""
    for sha, key in versions:
        if sha == sha256:
            return key, True
    return (f"{OBJECTS_DIR}/{rel}.{sha256}" if natural_taken else rel), False
