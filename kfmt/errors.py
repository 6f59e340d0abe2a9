"""Errors kfmt raises, and the exit codes the CLI maps them to (CLI.md: 1 runtime, 2 usage, 3 offsets lost with
--fail-on-loss, 65 bad data).

A DataError names the file, the byte position and the offset involved, so that a one-line message on
stderr is enough to find the problem. Low-level decoders raise with what they know (often a position
relative to a batch); the layer that knows the file fills in the rest with `located()`.
"""
from __future__ import annotations

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_DATA = 65  # sysexits EX_DATAERR
# published what it had, but offsets were deleted before any run read them (--fail-on-loss)
EXIT_LOSS = 3


class KfmtError(Exception):
    """A failure that is not the input's fault (I/O, a missing dependency, a bug)."""

    exit_code = EXIT_FAILURE


class UsageError(KfmtError):
    """The command line or the arguments of a library call are wrong."""

    exit_code = EXIT_USAGE


class DataError(KfmtError):
    """The input holds bad data: a corrupt batch, a bad CRC, an impossible length, ..."""

    exit_code = EXIT_DATA

    def __init__(self, message: str, *, file: str | None = None, position: int | None = None,
                 offset: int | None = None):
        super().__init__(message)
        self.message = message
        self.file = file
        self.position = position
        self.offset = offset

    def located(self, *, file: str | None = None, base_position: int = 0,
                offset: int | None = None) -> "DataError":
        """Fill in what an outer layer knows: the file, where the inner buffer starts, an offset.

        Positions raised inside a batch are relative to the batch; adding the batch's position in
        its file gives the absolute byte position.
        """
        if self.file is None and file is not None:
            self.file = file
            if self.position is not None:
                self.position += base_position
            else:
                self.position = base_position
        if self.offset is None:
            self.offset = offset
        return self

    def __str__(self) -> str:
        where = []
        if self.file is not None:
            where.append(self.file)
        if self.position is not None:
            where.append(f"position {self.position}")
        if self.offset is not None:
            where.append(f"offset {self.offset}")
        return f"{': '.join([', '.join(where), self.message]) if where else self.message}"


class StorageError(KfmtError):
    """Storage failed for a reason outside the data: an endpoint that does not answer, credentials
    refused, permission denied, a read-only or full disk (kfmt.storage.failures says which)."""


class StoragePermissionError(StorageError, PermissionError):
    """Permission denied. Still a PermissionError, for callers that skip what they may not read
    (kfmt salvage reports an unreadable segment and goes on)."""


class StorageNotFound(StorageError):
    """A location that does not exist where the user pointed (an S3 bucket that is not there)."""

    exit_code = EXIT_USAGE


class EngineError(KfmtError):
    """The engine that runs a job failed: a Spark master that does not answer, no executors."""


class KfmtWarning(UserWarning):
    """Something kfmt skipped and says so (the command line prints it as one `kfmt: warning:` line)."""


def warned_on_success(fn, *args, **kwargs):
    """fn(...), the warnings it gives held back until it returns: a refusal (an exception) is one
    line, not the warnings of what was looked at before it (the links of a directory that turns out
    not to be a log directory)."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fn(*args, **kwargs)
    for w in caught:
        warnings.warn(w.message, w.category, stacklevel=3)
    return result


class CompressionError(DataError):
    """A compressed payload that its codec cannot decode (or that breaks Kafka's framing rules)."""


class DecompressionLimitExceeded(DataError):
    """A payload that decompresses to more than the configured limit (a decompression bomb)."""
