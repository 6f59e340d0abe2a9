"""Where bytes live. A Storage is a set of files addressed by path strings: local disk or any fsspec
filesystem (s3://, memory://, ...). Backends are plugins; `open_storage(url)` asks each registered
backend whether it claims the URL.

Every read goes through `read()` or `map()`, which count the bytes they hand out (`bytes_read`): seeks
are tested by that count. Executors open storage from picklable StorageSpec values, never handles.

Writing: `write()` puts a whole small file; `open_write()` streams a large one (a segment) without
holding it in memory, and publishes nothing if the writer is aborted. Stores that keep modification
times say so (`keeps_mtime`); object stores do not, and kfmt carries mtimes in its manifest instead
(kfmt.storage.staging). Every backend passes the same conformance suite (tests/storage/test_storage_conformance.py).
"""
from __future__ import annotations

import os

import posixpath
from dataclasses import dataclass, field

from kfmt.errors import KfmtError, UsageError
from kfmt.storage.failures import STORAGE_VERBS, translated_method, translated_stream_method


@dataclass(frozen=True)
class FileInfo:
    name: str
    path: str
    size: int
    is_dir: bool
    mtime_ms: int | None = None  # modification time in epoch milliseconds, where the store has one


@dataclass(frozen=True)
class StorageSpec:
    """A picklable description of a storage location: enough for an executor to open it again."""

    url: str
    options: tuple = field(default=())  # sorted (key, value) pairs

    @classmethod
    def of(cls, url: str, options: dict | None = None) -> "StorageSpec":
        return cls(url, tuple(sorted((options or {}).items())))

    def open(self) -> tuple["Storage", str]:
        return open_storage(self.url, dict(self.options))


class WriteStream:
    """A file being written: `write()` appends, `close()` publishes it, `abort()` discards it.

    As a context manager it closes on success and aborts when the block raises, so an exception
    never leaves a half-written file behind under the final name. Subclasses keep the file's path
    in `path` (and the storage in `storage`), which failures are reported with.
    """

    path: str = "?"
    storage: "Storage | None" = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for name in ("write", "close", "abort"):
            method = cls.__dict__.get(name)
            if method is not None and not hasattr(method, "_kfmt_translated"):
                setattr(cls, name, translated_stream_method(method))

    def write(self, data) -> int:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def abort(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> "WriteStream":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


class Storage:
    """Files under one filesystem. Subclasses implement the underscore methods."""

    sep = "/"
    #: how to open this storage again in another process (set by open_storage)
    spec: StorageSpec | None = None
    #: the service behind a remote store as messages name it ("S3 endpoint http://127.0.0.1:9000");
    #: None for local disk
    remote: str | None = None

    def __init__(self):
        self.bytes_read = 0

    def __init_subclass__(cls, **kwargs):
        # Every backend's failures reach the user through one mapping (kfmt.storage.failures), also the
        # failures of backends that plugins add: the methods a subclass defines are wrapped here.
        super().__init_subclass__(**kwargs)
        for name, verb in STORAGE_VERBS.items():
            method = cls.__dict__.get(name)
            if method is not None and not hasattr(method, "_kfmt_translated"):
                setattr(cls, name, translated_method(method, verb))

    # --- paths ---
    def join(self, *parts: str) -> str:
        return posixpath.join(*parts)

    def basename(self, path: str) -> str:
        return posixpath.basename(path.rstrip("/"))

    def parent(self, path: str) -> str:
        return posixpath.dirname(path.rstrip("/"))

    def url_of(self, path: str) -> str:
        """A URL (or local path) for this path, as a user would type it."""
        return path

    # --- reading ---
    def listdir(self, path: str) -> list[FileInfo]:
        """The entries of a directory, sorted by name (FileNotFoundError if it does not exist)."""
        raise NotImplementedError

    def walk(self, path: str) -> list[FileInfo]:
        """Every file below a directory (recursively; directories themselves are not listed), sorted
        by path. Empty directories contribute nothing: object stores cannot tell them apart from
        absent ones (some keep listing an emptied prefix), so neither may a caller."""
        out = []
        for info in self.listdir(path):
            out.extend(self.walk(info.path) if info.is_dir else [info])
        return sorted(out, key=lambda i: i.path)

    def info(self, path: str) -> FileInfo:
        raise NotImplementedError

    def exists(self, path: str) -> bool:
        raise NotImplementedError

    def isdir(self, path: str) -> bool:
        raise NotImplementedError

    def read(self, path: str, start: int = 0, end: int | None = None):
        """Bytes [start, end) of a file (bytes or a read-only memoryview)."""
        data = self._read(path, start, end)
        self.bytes_read += len(data)
        return data

    def map(self, path: str):
        """The whole file as a buffer: memory-mapped where the store allows, else read."""
        data = self._map(path)
        self.bytes_read += len(data)
        return data

    def checked_sha256(self, path: str) -> str | None:
        """The SHA-256 of the whole file at `path` when this storage checked it against a record as it
        read it (an archive's objects: kfmt.transforms.archive.view), else None: a copy of those very
        bytes is then recorded with it rather than hashed a second time."""
        return None

    def _read(self, path, start, end):
        raise NotImplementedError

    def _map(self, path):
        return self._read(path, 0, None)

    # --- writing ---
    def makedirs(self, path: str) -> None:
        raise NotImplementedError

    def write(self, path: str, data, mtime_ms: int | None = None) -> None:
        """Write a whole file (and set its modification time where the store keeps one)."""
        with self.open_write(path) as stream:
            stream.write(data)
        if mtime_ms is not None:
            self.set_mtime(path, mtime_ms)

    def open_write(self, path: str) -> WriteStream:
        """Stream a file into place (parent directories are created where the store has them)."""
        raise NotImplementedError

    #: True where files keep a settable modification time (local disk); object stores do not.
    keeps_mtime = False

    def set_mtime(self, path: str, mtime_ms: int) -> bool:
        """Set a file's modification time; False where the store cannot keep one."""
        return False

    def sync(self, path: str) -> None:
        """Make everything written below `path` (or the file `path`) durable before it is published
        (a no-op where every completed write already is, as on object stores)."""

    def defer_sync(self, root: str) -> None:
        """Files written below `root` from now on need not be durable when written or closed: the
        caller makes them so with one `sync(root)` before they count (kfmt.storage.staging does,
        before it publishes). A store where every completed write is durable ignores it; local disk
        then syncs the whole tree at once, much cheaper than a sync per file (plugins/storage/local.py)."""

    def remove(self, path: str) -> None:
        raise NotImplementedError

    def remove_tree(self, path: str) -> None:
        raise NotImplementedError

    def rename(self, src: str, dst: str) -> None:
        raise NotImplementedError

    #: True where a directory rename is atomic (local disk); object stores publish with a manifest.
    atomic_rename = False


class StorageBackend:
    """A plugin that opens the URLs it claims."""

    name: str

    def claims(self, url: str) -> bool:
        raise NotImplementedError

    def open(self, url: str, options: dict) -> tuple[Storage, str]:
        """Return (storage, path of url inside it)."""
        raise NotImplementedError


def open_storage(url: str, options: dict | None = None) -> tuple[Storage, str]:
    from kfmt.plugin import registry

    for backend in registry.get().storage:
        if backend.claims(url):
            try:
                storage, path = backend.open(url, dict(options or {}))
                # A relative local path means nothing in an executor's working directory: executors
                # reopen storage from the absolute path the backend resolved.
                storage.spec = StorageSpec.of(url if "://" in url else path,
                                              with_forwarded_credentials(url, options))
                return storage, path
            except ImportError as e:
                raise KfmtError(f"{url}: the {backend.name} storage backend needs {e.name} "
                                f"(pip install 'kfmt[s3]' for s3://)") from None
    raise UsageError(f"no storage backend handles {url!r}")


#: S3 credentials in the driver's environment and the s3fs options they become
_S3_CREDENTIALS = (("AWS_ACCESS_KEY_ID", "key"), ("AWS_SECRET_ACCESS_KEY", "secret"), ("AWS_SESSION_TOKEN", "token"))


def with_forwarded_credentials(url: str, options: dict | None, env: dict | None = None) -> dict:
    """The options a task reopens `url` with: for s3:// without key/secret options, the driver's
    AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (/ AWS_SESSION_TOKEN) as options, so that executors on
    other machines use the identity the driver used (they travel inside the pickled task, never on
    a command line or in a report). Without those variables, executors find credentials their own
    way (instance profile, IRSA, ~/.aws), as s3fs does anywhere."""
    options = dict(options or {})
    env = os.environ if env is None else env
    if not url.startswith(("s3://", "s3a://")) or {"key", "secret", "anon", "profile"} & set(options):
        return options
    if env.get("AWS_ACCESS_KEY_ID") and env.get("AWS_SECRET_ACCESS_KEY"):
        options.update({option: env[name] for name, option in _S3_CREDENTIALS if env.get(name)})
    return options


def parse_storage_options(pairs: list[str] | None) -> dict:
    """--storage-option KEY=VALUE pairs to a dict (values 'true'/'false'/numbers converted)."""
    from kfmt.plugin.options import key_value_pairs

    return {key: _convert(value) for key, value in key_value_pairs(pairs, "--storage-option").items()}


def _convert(value: str):
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    try:
        return int(value)
    except ValueError:
        return value
