"""Storage failures as a person reads them: one mapping (`storage_failure`) from what backends raise
(the standard library's OSErrors, botocore's and aiohttp's exceptions, S3's error codes) to a one-line
kfmt error naming the location and, for a remote store, the service. kfmt.storage.store wraps every
method a Storage backend defines with `translated_method`, so each backend, a plugin's too, reports
its failures this way.

Missing files and files in the way (FileNotFoundError, FileExistsError, ENOTEMPTY...) pass through
untouched: callers decide what those mean (a destination that does not exist yet is no failure).
Permission denied stays a PermissionError (StoragePermissionError), because salvage skips what it may
not read. Messages never contain credentials.
"""
from __future__ import annotations

import errno
import functools
import re

from kfmt.errors import KfmtError, StorageError, StorageNotFound, StoragePermissionError
from kfmt.storage.retries import ATTEMPTS

#: the Storage methods whose failures are translated, and what they were doing (for the message)
STORAGE_VERBS = {"listdir": "list", "walk": "list", "info": "read", "exists": "look up",
                 "isdir": "look up", "_read": "read", "_map": "read", "makedirs": "create",
                 "write": "write", "open_write": "write", "set_mtime": "write", "sync": "write",
                 "remove": "remove", "remove_tree": "remove", "rename": "rename"}

#: S3 error codes (the service's own, as botocore reports them) for refused credentials
_CREDENTIALS_REFUSED = {"InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken",
                        "InvalidClientTokenId", "TokenRefreshRequired", "AuthorizationHeaderMalformed",
                        "InvalidSecurity"}
_ACCESS_DENIED = {"AccessDenied", "AllAccessDisabled", "AccountProblem"}
#: exception class names (anywhere in the cause chain) meaning the service could not be reached:
#: botocore's, aiohttp's and the standard library's, matched by name so that none must be installed
_UNREACHABLE = {"EndpointConnectionError", "ConnectTimeoutError", "ReadTimeoutError",
                "ConnectionClosedError", "ProxyConnectionError", "ClientConnectorError",
                "ServerDisconnectedError", "ServerTimeoutError", "ConnectionError", "TimeoutError",
                "FSTimeoutError", "gaierror"}
_NO_CREDENTIALS = {"NoCredentialsError", "PartialCredentialsError", "CredentialRetrievalError"}
#: what the body of a streamed reply (an object read) fails with once botocore has returned the reply:
#: aiohttp's and botocore's names for a body cut short, and aiobotocore's for one that stalled
_BODY_CUT_SHORT = {"ClientPayloadError", "ResponseStreamingError", "IncompleteReadError", "IncompleteRead"}
_BODY_STALLED = {"AioReadTimeoutError"}
#: S3 error codes that ask the client to slow down (botocore's standard retry mode retries them)
_THROTTLED = {"SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded",
              "TooManyRequestsException", "RequestThrottled", "ServiceUnavailable"}


def translated_method(method, verb: str):
    @functools.wraps(method)
    def call(self, path, *args, **kwargs):
        try:
            return method(self, path, *args, **kwargs)
        except KfmtError:
            raise
        except Exception as err:
            failure = storage_failure(err, self, path, verb)
            if failure is None:
                raise
            raise failure from None  # the cause could carry request details; the message says it all
    call._kfmt_translated = True
    return call


def translated_stream_method(method):
    @functools.wraps(method)
    def call(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except KfmtError:
            raise
        except Exception as err:
            failure = storage_failure(err, self.storage, self.path, "write")
            if failure is None:
                raise
            raise failure from None
    call._kfmt_translated = True
    return call


def _causes(err: BaseException):
    """The exception and everything it wraps: causes, contexts, and the `error`/`os_error` botocore
    and aiohttp keep the underlying socket error in."""
    seen, todo = set(), [err]
    while todo:
        e = todo.pop(0)
        if e is None or id(e) in seen or not isinstance(e, BaseException):
            continue
        seen.add(id(e))
        yield e
        kwargs = getattr(e, "kwargs", None)
        todo += [e.__cause__, e.__context__, getattr(e, "os_error", None),
                 kwargs.get("error") if isinstance(kwargs, dict) else None]
        todo += [a for a in getattr(e, "args", ()) if isinstance(a, BaseException)]


def _service_code(chain: list[BaseException]) -> str | None:
    for e in chain:
        response = getattr(e, "response", None)
        if isinstance(response, dict):
            code = (response.get("Error") or {}).get("Code")
            if code:
                return str(code)
    return None


def _connection_reason(chain: list[BaseException]) -> str:
    for e in chain:
        if isinstance(e, ConnectionRefusedError) or getattr(e, "errno", None) == errno.ECONNREFUSED:
            return "connection refused"
    names = {c.__name__ for e in chain for c in type(e).__mro__}
    text = " ".join(str(e) for e in chain).lower()
    if "refused" in text:
        return "connection refused"
    if "gaierror" in names or "name or service not known" in text or "name resolution" in text:
        return "host name not found"
    if names & {"ConnectTimeoutError", "ReadTimeoutError", "TimeoutError", "ServerTimeoutError",
                "FSTimeoutError"} or "timed out" in text or "timeout" in text:
        return "timed out"
    if names & {"ConnectionClosedError", "ServerDisconnectedError"} or "reset" in text:
        return "connection closed by the server"
    return "connection failed"


def _http_status(chain: list[BaseException]) -> int | None:
    for e in chain:
        response = getattr(e, "response", None)
        if isinstance(response, dict):
            status = (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
            if isinstance(status, int):
                return status
    return None


def body_failure(err: BaseException) -> str | None:
    """How the body of a reply failed after its headers came (cut short, or stalled past the read
    timeout), or None for any other failure: only these are left for kfmt to retry
    (kfmt.storage.retries)."""
    names = {c.__name__ for e in _causes(err) for c in type(e).__mro__}
    if names & _BODY_CUT_SHORT:
        return "the reply was cut short"
    if names & _BODY_STALLED:
        return "the reply stalled past the read timeout"
    return None


def attempt_failure(status: int | None, code: str | None, exception: BaseException | None) -> str | None:
    """What one failed attempt of a request met, as a retry line says it: the reply's status and S3
    error code, or why the connection failed; None for an attempt that did not fail."""
    if exception is not None:
        return _connection_reason(list(_causes(exception)))
    if status is not None and (status >= 500 or code in _THROTTLED):
        return f"HTTP {status} {code}" if code else f"HTTP {status}"
    return None


def _bucket_url(where: str) -> str:
    m = re.match(r"^([a-z0-9]+://[^/]+)", where)
    return m[1] if m else where


def storage_failure(err: BaseException, storage, path: str, verb: str) -> KfmtError | None:
    """The kfmt error a backend failure means, or None for failures that are not about reaching or
    being allowed into storage (a missing file, a file in the way: callers decide what those mean).

    Messages name the location (the URL or path the user gave) and, for a remote store, the service;
    never the credentials."""
    where = storage.url_of(path) if storage is not None else str(path)
    remote = getattr(storage, "remote", None)
    chain = list(_causes(err))
    names = {c.__name__ for e in chain for c in type(e).__mro__}
    code = _service_code(chain)
    service = remote or where
    if code in _CREDENTIALS_REFUSED:
        return StorageError(f"{service} refused the credentials ({code}) for {where}")
    if code in _ACCESS_DENIED:
        return StoragePermissionError(f"{where}: access denied by {service} (cannot {verb})")
    if code in ("403", "Forbidden"):  # an answer without a body (HEAD): S3 does not say which
        return StoragePermissionError(f"{service} refused access to {where} (HTTP 403: wrong "
                                      f"credentials, or no permission to {verb})")
    if code == "NoSuchBucket":
        return StorageNotFound(f"{_bucket_url(where)}: no such bucket" + (f" at {remote}" if remote else ""))
    if names & _NO_CREDENTIALS:
        return StorageError(f"{service}: no credentials for {where} (give key= and secret= storage "
                            f"options, or set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)")
    status = _http_status(chain)
    if remote is not None and status is not None and (status >= 500 or code in _THROTTLED):
        return StorageError(f"{where}: {remote} answered HTTP {status}{f' {code}' if code else ''} "
                            f"(cannot {verb}; gave up after {ATTEMPTS} attempts)")
    if remote is not None and (body := body_failure(err)) is not None:
        return StorageError(f"{where}: cannot {verb} it from {remote}: {body} (gave up after "
                            f"{ATTEMPTS} attempts)")
    if remote is not None and names & _UNREACHABLE:
        return StorageError(f"cannot reach {remote}: {_connection_reason(chain)} (trying to {verb} {where})")
    if isinstance(err, PermissionError):
        return StoragePermissionError(f"{where}: permission denied (cannot {verb})")
    if verb == "create" and isinstance(err, FileExistsError):  # makedirs: a file is in the way
        return StorageError(f"{err.filename or where}: not a directory (cannot create {where})")
    if isinstance(err, OSError) and err.errno in (errno.EROFS, errno.ENOSPC, errno.EDQUOT):
        return StorageError(f"{where}: {err.strerror.lower() if err.strerror else 'write failed'} (cannot {verb})")
    return None


def without_credentials(url: str) -> str:
    """A URL as messages show it: user and password removed (http://user:pass@host -> http://host)."""
    return re.sub(r"^([a-zA-Z][a-zA-Z0-9+.-]*://)[^/@]*@", r"\1", url)
