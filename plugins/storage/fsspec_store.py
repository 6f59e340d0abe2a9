"""Storage through fsspec: s3://, memory://, gcs://, ... Anything with a scheme that fsspec knows.

Object stores have no atomic rename and (mostly) no settable mtimes; writers publish there with a
manifest written last (kfmt.storage.staging), and mtimes travel in that manifest.

Listings are not cached unless the caller asks for it (`use_listings_cache`): kfmt lists rarely, and
a stale cached listing would hide files another process (an executor, an earlier killed run) wrote.

On S3, retries and timeouts are bounded unless the user set them (S3_BOUNDS): botocore's defaults (a
60 s connect timeout, and s3fs retrying botocore's retries five times) keep a command that cannot
reach its endpoint waiting for minutes. Every retry botocore makes is logged (`log_s3_retries`), and
an object's body cut short or stalled is read again by kfmt (kfmt.storage.retries). Failures become
one-line kfmt errors in kfmt.storage.failures.
"""
from __future__ import annotations

import datetime
import errno
import os

from kfmt.errors import StorageNotFound
from kfmt.plugin.hookspecs import hookimpl
from kfmt.storage.failures import attempt_failure, body_failure, without_credentials
from kfmt.storage.retries import ATTEMPTS, retried, retry_line, retry_log
from kfmt.storage.store import FileInfo, Storage, StorageBackend, WriteStream

#: botocore settings (config_kwargs) that bound how long an unreachable or silent S3 endpoint holds a
#: command: at most ATTEMPTS attempts in all (botocore's "standard" mode retries connection errors,
#: timeouts, 5xx replies and throttling; its `max_attempts` would count retries only, one more),
#: 5 s to connect, 10 s of silence on a connection: about a minute at worst, seconds when refused.
S3_BOUNDS = {"connect_timeout": 5, "read_timeout": 10,
             "retries": {"total_max_attempts": ATTEMPTS, "mode": "standard"}}
#: s3fs retries timeouts and throttling itself, around botocore's retries (5 times by default);
#: botocore's standard mode retries the same failures, so its attempts are enough
S3FS_RETRIES = 1
AWS_S3_ENDPOINT = "https://s3.amazonaws.com"


def _mtime_ms(entry: dict) -> int | None:
    for key in ("mtime", "LastModified", "last_modified", "created", "updated"):
        value = entry.get(key)
        if value is None:
            continue
        if isinstance(value, datetime.datetime):
            if value.tzinfo is None:
                value = value.replace(tzinfo=datetime.timezone.utc)
            return int(value.timestamp() * 1000)
        if isinstance(value, (int, float)):
            return int(value * 1000)
        if isinstance(value, str):
            try:
                return int(datetime.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000)
            except ValueError:
                continue
    return None


class FsspecWriteStream(WriteStream):
    """An fsspec file opened for writing. On object stores the upload completes only on close()
    (multipart parts are sent as the buffer fills, so memory stays bounded by the block size);
    abort() cancels it, so an aborted stream publishes nothing."""

    #: write buffer (and multipart part) size: S3's minimum part is 5 MiB
    BLOCK_SIZE = 8 * 1024 * 1024

    def __init__(self, fs, path: str, storage: Storage | None = None):
        self.fs = fs
        self.path = path
        self.storage = storage
        self._file = fs.open(path, "wb", block_size=self.BLOCK_SIZE)
        self._done = False

    def write(self, data) -> int:
        return self._file.write(data)

    def close(self) -> None:
        if not self._done:
            self._done = True
            self._file.close()

    def abort(self) -> None:
        if self._done:
            return
        self._done = True
        from fsspec.spec import AbstractBufferedFile  # here: loading the plugin must not import fsspec

        if isinstance(self._file, AbstractBufferedFile):
            # Abort the multipart upload; mark the file closed so that its finaliser does not
            # try to flush the discarded buffer.
            self._file.discard()
            self._file.closed = True
        else:
            self._file.close()
        # Some stores make the file visible as soon as it is opened (memory://): remove it.
        if self.fs.exists(self.path):
            self.fs.rm_file(self.path)


class FsspecStorage(Storage):
    def __init__(self, fs, protocol: str, remote: str | None = None):
        super().__init__()
        self.fs = fs
        self.protocol = protocol
        self.remote = remote
        self._buckets_seen: set[str] = set()

    def url_of(self, path):
        return path if "://" in path else f"{self.protocol}://{path.lstrip('/') if self.protocol != 'memory' else path}"

    def _entry(self, e: dict) -> FileInfo:
        path = e["name"].rstrip("/")
        return FileInfo(name=path.rsplit("/", 1)[-1], path=path, size=int(e.get("size") or 0),
                        is_dir=e.get("type") == "directory", mtime_ms=_mtime_ms(e))

    def listdir(self, path):
        path = path.rstrip("/")
        entries = [self._entry(e) for e in self.fs.ls(path, detail=True, refresh=True)]
        return sorted((e for e in entries if e.path != path), key=lambda i: i.name)

    def walk(self, path):
        path = path.rstrip("/")
        found = self.fs.find(path, detail=True)
        files = (self._entry(e) for name, e in found.items()
                 if e.get("type") != "directory" and not name.endswith("/"))
        return sorted((f for f in files if f.path != path), key=lambda i: i.path)

    def info(self, path):
        return self._entry(self.fs.info(path))

    def exists(self, path):
        if self.fs.exists(path):
            return True
        self._check_bucket(path)
        return False

    def _check_bucket(self, path: str) -> None:
        """On S3 a path in a bucket that does not exist is "not there" like any other; say which
        (once a bucket has been seen, it is not asked again)."""
        if self.protocol not in ("s3", "s3a"):
            return
        bucket = path.lstrip("/").split("/", 1)[0]
        if not bucket or bucket in self._buckets_seen:
            return
        # s3fs's exists() says False for a bucket it may not probe as for one that is not there:
        # only a "not found" answer to HeadBucket counts
        try:
            self.fs.call_s3("head_bucket", Bucket=bucket)
        except FileNotFoundError:
            raise StorageNotFound(f"{self.protocol}://{bucket}: no such bucket at {self.remote}") from None
        except Exception:
            return  # not allowed to ask, or no answer: the path is simply not there
        self._buckets_seen.add(bucket)

    def isdir(self, path):
        return self.fs.isdir(path)

    def _read(self, path, start, end):
        if end is not None and end <= start:
            return b""
        # A whole object is read without a Range header: S3 refuses any range of an empty object.
        ranged = {} if start == 0 and end is None else {"start": start, "end": end}
        try:
            # botocore retries a request that fails; a body failing after the reply came is read again here
            return retried(lambda: self.fs.cat_file(path, **ranged), body_failure, self.url_of(path),
                           f"reading from {self.remote or self.protocol}")
        except OSError as err:
            # 416 "range not satisfiable" (s3fs raises EINVAL): a range starting at or past the end
            if err.errno == errno.EINVAL and ranged and start >= self.info(path).size:
                return b""
            raise

    def makedirs(self, path):
        self.fs.makedirs(path, exist_ok=True)

    def write(self, path, data, mtime_ms=None):
        self.fs.pipe_file(path, bytes(data))  # one request; object stores keep no settable mtime

    def open_write(self, path):
        return FsspecWriteStream(self.fs, path, self)

    def remove(self, path):
        self.fs.rm_file(path)

    def remove_tree(self, path):
        if self.fs.exists(path):
            self.fs.rm(path, recursive=True)

    def rename(self, src, dst):
        self.fs.mv(src, dst, recursive=True)


class FsspecBackend(StorageBackend):
    name = "fsspec"

    def claims(self, url):
        return "://" in url and not url.startswith("file://")

    def open(self, url, options):
        import fsspec.core

        options = dict(options)
        options.setdefault("use_listings_cache", False)
        scheme = url.split("://", 1)[0].lower()
        if scheme in ("s3", "s3a"):
            options = bounded_s3_options(options)
        fs, path = fsspec.core.url_to_fs(url, **options)
        protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
        remote = None
        if scheme in ("s3", "s3a"):
            remote = f"S3 endpoint {s3_endpoint(fs, options)}"
            fs.retries = S3FS_RETRIES  # a class attribute of s3fs, not an option
            log_s3_retries(fs, remote)
        return FsspecStorage(fs, protocol, remote), path.rstrip("/") or "/"


def log_s3_retries(fs, remote: str) -> None:
    """Have every retry botocore makes for this filesystem logged (kfmt.storage.retries): handlers on
    the session s3fs makes its clients from, set before it makes one (instances are cached: once).

    botocore decides on a retry in `needs-retry` and sends the next attempt through `request-created`;
    the first handler notes what the failed attempt met, the second logs the attempt it starts."""
    if getattr(fs, "_kfmt_retries_logged", False) or fs.session is not None:
        return  # done already, or a session someone else made (its retries are bounded, not logged)
    from aiobotocore.session import AioSession

    fs.session = AioSession(**fs.kwargs)
    events = fs.session.get_component("event_emitter")
    events.register("before-parameter-build.s3", _note_object)
    events.register_first("needs-retry.s3", _note_failure)
    events.register("request-created.s3", lambda request, operation_name, **_: _log_retry(
        request, operation_name, remote))
    fs._kfmt_retries_logged = True


def _note_object(params, context, **_):
    """Which object the request is about, as messages name it."""
    bucket, key = params.get("Bucket"), params.get("Key")
    if bucket:
        context["kfmt_where"] = f"s3://{bucket}/{key}" if key else f"s3://{bucket}"


def _note_failure(response=None, caught_exception=None, request_dict=None, **_):
    if request_dict is None:
        return None
    status = code = None
    if response is not None:
        status = getattr(response[0], "status_code", None)
        code = (response[1].get("Error") or {}).get("Code") if isinstance(response[1], dict) else None
    request_dict["context"]["kfmt_failure"] = attempt_failure(status, code, caught_exception)
    return None  # botocore's own handler decides


def _log_retry(request, operation_name: str, remote: str) -> None:
    context = getattr(request, "context", None) or {}
    attempt = (context.get("retries") or {}).get("attempt", 1)
    if attempt <= 1:
        return
    retries = getattr(context.get("client_config"), "retries", None) or {}
    attempts = retries.get("total_max_attempts") or (retries.get("max_attempts", ATTEMPTS - 1) + 1)
    cause = context.get("kfmt_failure") or "no reason given"
    retry_log.add(retry_line(context.get("kfmt_where", remote), f"{operation_name} at {remote}", cause,
                             attempt, attempts))


def bounded_s3_options(options: dict) -> dict:
    """The options with S3_BOUNDS filled in where the user set nothing (their values win)."""
    options = dict(options)
    config = dict(options.get("config_kwargs") or {})
    for key, value in S3_BOUNDS.items():
        config.setdefault(key, value)
    options["config_kwargs"] = config
    return options


def s3_endpoint(fs, options: dict) -> str:
    """The endpoint requests go to, as messages show it (without any user:password in it)."""
    endpoint = (options.get("endpoint_url") or (options.get("client_kwargs") or {}).get("endpoint_url")
                or getattr(fs, "endpoint_url", None) or os.environ.get("AWS_ENDPOINT_URL_S3")
                or os.environ.get("AWS_ENDPOINT_URL") or AWS_S3_ENDPOINT)
    return without_credentials(str(endpoint))


@hookimpl
def kfmt_register_storage(register):
    register(FsspecBackend())
