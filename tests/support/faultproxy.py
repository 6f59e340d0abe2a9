"""A fault-injecting HTTP proxy for the tests: it sits on 127.0.0.1 between kfmt and the S3 test
server (tests/support/s3server.py) and passes every request through, except those a `Fault` picks,
which it answers the way a struggling S3 service or network does:

* `reset`: the connection is reset (RST), before the request is forwarded (after `after_bytes` of
  its body, when given: an upload cut off part-way) or, with `upstream=True`, after the server has
  processed it (a write that happened, whose reply was lost);
* `status`: an S3 error reply (503 SlowDown, 500 InternalError, ...) instead of forwarding;
* `truncate`: the server's reply is forwarded with its headers and the first `after_bytes` bytes of
  its body, then the connection is closed (a body cut short);
* `stall`: nothing is sent for `seconds`, before the reply (or after `after_bytes` of its body), then
  the reply goes on (a server or network that stops answering for a while).

A fault picks requests by method, by a regular expression searched in the (URL-decoded) path and
query, and by count: the `nth` matching request and the `times - 1` after it (`times=0`: every one
from the nth on, an outage). Each request is logged (method, path, status sent, fault applied), so a
test sees what happened on the wire. Requests are handled one connection per thread; every reply is
buffered whole (the test objects are small). Requests go to the server on a fresh connection each, so
that a fault on one never disturbs another.

    with FaultProxy(s3_server.endpoint_url) as proxy:
        proxy.add(Fault("status", method="PUT", key=r"\\.log$", nth=2, status=503, code="SlowDown"))
        options = dict(s3_server.storage_options, endpoint_url=proxy.url)
"""
from __future__ import annotations

import re
import socket
import struct
import threading
import time
import urllib.parse
from dataclasses import dataclass, field

MAX_HEADER_LINES = 200


@dataclass
class Fault:
    action: str  # "reset" | "status" | "truncate" | "stall"
    method: str | None = None  # e.g. "PUT"; None: any
    key: str | None = None  # regex searched in the URL-decoded path and query; None: any
    nth: int = 1  # the first matching request (1-based) that gets the fault
    times: int = 1  # how many matching requests in a row get it; 0: all from the nth on
    status: int = 503  # for "status"
    code: str = "SlowDown"  # for "status": the S3 error code in the reply's body
    # reset: request body bytes read first; truncate and stall: reply body bytes sent first
    after_bytes: int | None = None
    seconds: float = 0.0  # for "stall"
    upstream: bool = False  # for "reset": forward the request first, lose the reply
    matched: int = field(default=0, init=False)  # matching requests seen so far
    fired: int = field(default=0, init=False)  # requests the fault was applied to

    def __post_init__(self):
        if self.action not in ("reset", "status", "truncate", "stall"):
            raise ValueError(f"unknown fault action {self.action!r}")
        self._pattern = re.compile(self.key) if self.key is not None else None

    def picks(self, method: str, target: str) -> bool:
        """Whether this request gets the fault (counts it as matching when it matches)."""
        if self.method is not None and method != self.method:
            return False
        if self._pattern is not None and not self._pattern.search(target):
            return False
        self.matched += 1
        if self.matched < self.nth or (self.times and self.matched >= self.nth + self.times):
            return False
        self.fired += 1
        return True


@dataclass(frozen=True)
class Exchange:
    method: str
    target: str  # URL-decoded path and query
    status: int | None  # what the client got (None: no reply)
    fault: str | None


class _Closed(Exception):
    """The peer closed the connection."""


def _read_head(reader) -> tuple[str, list[tuple[str, str]]]:
    first = reader.readline(65536)
    if not first:
        raise _Closed()
    headers = []
    for _ in range(MAX_HEADER_LINES):
        line = reader.readline(65536)
        if line in (b"\r\n", b"\n", b""):
            return first.decode("latin-1").rstrip("\r\n"), headers
        name, _, value = line.decode("latin-1").partition(":")
        headers.append((name.strip(), value.strip()))
    raise ValueError("too many header lines")


def _header(headers, name: str) -> str | None:
    return next((v for k, v in headers if k.lower() == name), None)


def _read_body(reader, headers, *, no_body: bool = False, until_close: bool = False) -> bytes:
    """The body as it travelled (chunked bodies with their framing)."""
    if no_body:
        return b""
    if (_header(headers, "transfer-encoding") or "").lower() == "chunked":
        parts = []
        while True:
            size_line = reader.readline(65536)
            parts.append(size_line)
            size = int(size_line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while True:  # trailers, up to the blank line
                    line = reader.readline(65536)
                    parts.append(line)
                    if line in (b"\r\n", b"\n", b""):
                        return b"".join(parts)
            parts.append(reader.read(size + 2))
    length = _header(headers, "content-length")
    if length is not None:
        return reader.read(int(length))
    return reader.read() if until_close else b""


def _head_bytes(first: str, headers) -> bytes:
    return (first + "\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers) + "\r\n").encode("latin-1")


def _reset(sock: socket.socket) -> None:
    """Close with a RST, as a dropped connection looks to the client."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    sock.close()


def _error_reply(status: int, code: str, method: str) -> bytes:
    body = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
            f"<Message>injected by the test proxy</Message><RequestId>kfmt-fault</RequestId></Error>").encode()
    reasons = {500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable"}
    reason = reasons.get(status, "Error")
    head = _head_bytes(f"HTTP/1.1 {status} {reason}",
                       [("Content-Type", "application/xml"), ("Content-Length", str(len(body))),
                        ("x-amz-request-id", "kfmt-fault")])
    return head + (b"" if method == "HEAD" else body)


class FaultProxy:
    """The proxy: `url` to give kfmt as its endpoint, `add()` faults, `log` of every exchange."""

    def __init__(self, upstream_url: str):
        parsed = urllib.parse.urlsplit(upstream_url)
        self.upstream = (parsed.hostname, parsed.port or 80)
        self.faults: list[Fault] = []
        self.log: list[Exchange] = []
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._stopped = threading.Event()
        self._connections: set[socket.socket] = set()
        self._thread = threading.Thread(target=self._accept, name="fault-proxy", daemon=True)
        self._thread.start()

    def add(self, fault: Fault) -> Fault:
        with self._lock:
            self.faults.append(fault)
        return fault

    def heal(self) -> None:
        """No more faults (the service is back); the log stays."""
        with self._lock:
            self.faults.clear()

    def clear(self) -> None:
        with self._lock:
            self.faults.clear()
            self.log.clear()

    def requests(self, method: str | None = None) -> list[Exchange]:
        with self._lock:
            return [e for e in self.log if method is None or e.method == method]

    def stop(self) -> None:
        self._stopped.set()
        try:
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() (close() alone would not)
        except OSError:
            pass
        self._listener.close()
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._thread.join(timeout=5)

    def __enter__(self) -> "FaultProxy":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    # --- serving ---
    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                conn, _addr = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self._connections.add(conn)
            threading.Thread(target=self._serve, args=(conn,), name="fault-proxy-conn", daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        reader = conn.makefile("rb")
        try:
            while not self._stopped.is_set():
                if not self._exchange(conn, reader):
                    break
        except (_Closed, OSError, ValueError):
            pass
        finally:
            with self._lock:
                self._connections.discard(conn)
            reader.close()
            try:
                conn.close()
            except OSError:
                pass

    def _pick(self, method: str, target: str) -> Fault | None:
        with self._lock:
            return next((f for f in self.faults if f.picks(method, target)), None)

    def _record(self, method: str, target: str, status: int | None, fault: Fault | None) -> None:
        with self._lock:
            self.log.append(Exchange(method, target, status, fault.action if fault else None))

    def _exchange(self, conn: socket.socket, reader) -> bool:
        """One request and its reply; False when the connection must end."""
        first, headers = _read_head(reader)
        method, raw_target, _version = first.split(" ", 2)
        target = urllib.parse.unquote(raw_target)
        fault = self._pick(method, target)
        if (_header(headers, "expect") or "").lower() == "100-continue":
            conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")  # the proxy takes the body itself
            headers = [(k, v) for k, v in headers if k.lower() != "expect"]
        if fault is not None and fault.action == "reset" and not fault.upstream:
            if fault.after_bytes is not None:
                reader.read(fault.after_bytes)
            self._record(method, target, None, fault)
            _reset(conn)
            return False
        body = _read_body(reader, headers)
        if fault is not None and fault.action == "status":
            conn.sendall(_error_reply(fault.status, fault.code, method))
            self._record(method, target, fault.status, fault)
            return True
        if fault is not None and fault.action == "stall" and fault.after_bytes is None:
            time.sleep(fault.seconds)
        status, reply_head, reply_body = self._forward(first, headers, body, method)
        if fault is not None and fault.action == "reset":  # upstream=True: the reply is lost
            self._record(method, target, None, fault)
            _reset(conn)
            return False
        if fault is not None and fault.action == "truncate":
            conn.sendall(reply_head + reply_body[:fault.after_bytes or 0])
            self._record(method, target, status, fault)
            conn.shutdown(socket.SHUT_RDWR)
            return False
        if fault is not None and fault.action == "stall" and fault.after_bytes is not None:
            conn.sendall(reply_head + reply_body[:fault.after_bytes])
            time.sleep(fault.seconds)
            conn.sendall(reply_body[fault.after_bytes:])
        else:
            conn.sendall(reply_head + reply_body)
        self._record(method, target, status, fault)
        return True

    def _forward(self, first: str, headers, body: bytes, method: str) -> tuple[int, bytes, bytes]:
        """The request sent to the server on a new connection; its reply (status, head, body)."""
        # one request per connection upstream: the server closes it, so a reply without a length ends too
        headers = [(k, v) for k, v in headers if k.lower() != "connection"] + [("Connection", "close")]
        with socket.create_connection(self.upstream, timeout=60) as up:
            up.sendall(_head_bytes(first, headers) + body)
            up_reader = up.makefile("rb")
            try:
                while True:
                    status_line, reply_headers = _read_head(up_reader)
                    status = int(status_line.split(" ", 2)[1])
                    if status != 100:  # the server's own 100 Continue: the client had ours
                        break
                no_body = method == "HEAD" or status in (204, 304)
                reply_body = _read_body(up_reader, reply_headers, no_body=no_body,
                                        until_close=True)
            finally:
                up_reader.close()
        reply_headers = [(k, v) for k, v in reply_headers if k.lower() != "connection"]
        return status, _head_bytes(status_line, reply_headers), reply_body
