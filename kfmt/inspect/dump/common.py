"""What the dumpers share: the options, the files they read, and the sink they report to.

A dumper (log.py, indexes.py, producer_state.py, txnindex.py) reads one file and reports what it
finds to a Sink: the text sink prints kafka-dump-log's exact lines, the JSON sink structured objects.
Problems kafka-dump-log reports and goes on from (index mismatches, ...) are sink calls; problems it
throws on are DataErrors, which end the run with one line on stderr (exit 65), as Kafka's tool ends
with a stack trace.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from kfmt.defaults import DEFAULT_DUMP_KAFKA_VERSION, DEFAULT_DUMP_MAX_BYTES, DEFAULT_MAX_MESSAGE_SIZE
from kfmt.errors import DataError, UsageError
from kfmt.format.model import BatchHeader, LegacyMessageInfo
from kfmt.inspect.dump.java_output import (
    java_absolute_path,
    java_file_name,
    java_file_string,
    java_parse_long,
)
from kfmt.storage.store import Storage, open_storage



@dataclass(frozen=True)
class DumpOptions:
    """kafka-dump-log's flags (docs/format.md §15.1)."""

    deep_iteration: bool = False
    print_data_log: bool = False
    verify_index_only: bool = False
    index_sanity_check: bool = False
    skip_record_metadata: bool = False
    max_bytes: int = DEFAULT_DUMP_MAX_BYTES
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    # "offsets", "transaction-log", "cluster-metadata", "share-group-state" or "remote-log-metadata"
    # (kfmt.inspect.dump.decoders); like Kafka's decoder flags it implies print_data_log
    decoder: str | None = None
    # the Kafka version whose kafka-dump-log output is reproduced (kfmt.defaults.DUMP_KAFKA_VERSIONS)
    kafka_version: str = DEFAULT_DUMP_KAFKA_VERSION

    def __post_init__(self):
        if self.decoder is not None and not self.print_data_log:
            object.__setattr__(self, "print_data_log", True)

    @property
    def deep(self) -> bool:
        # --print-data-log implies deep iteration
        return self.deep_iteration or self.print_data_log


@dataclass
class DumpTarget:
    """One file to dump, named the ways Kafka's tool names it.

    `display` is `java.io.File.toString()` of the argument (what "Dumping ..." prints), `absolute`
    its `getAbsolutePath()` (what the stderr summaries print). URLs are shown as given.
    """

    storage: Storage
    path: str
    display: str
    absolute: str
    is_url: bool

    @classmethod
    def open(cls, arg: str, storage_options: dict) -> "DumpTarget":
        storage, path = open_storage(arg, storage_options)
        is_url = "://" in arg
        if is_url:
            return cls(storage, path, arg, arg, True)
        return cls(storage, path, java_file_string(arg), java_absolute_path(arg), False)

    @property
    def name(self) -> str:
        return java_file_name(self.display)

    @property
    def suffix(self) -> str | None:
        """The text from the last '.' of the name on: what Kafka's tool dispatches on."""
        name = self.name
        dot = name.rfind(".")
        return name[dot:] if dot >= 0 else None

    def sibling(self, name: str) -> "DumpTarget":
        """The file `name` in the same directory (an index's .log, a time index's .index)."""
        parent = self.storage.parent(self.path)
        path = self.storage.join(parent, name)
        absolute = f"{self.absolute.rsplit('/', 1)[0]}/{name}"
        display = f"{self.display.rsplit('/', 1)[0]}/{name}" if "/" in self.display else name
        return DumpTarget(self.storage, path, display, absolute, self.is_url)

    def exists(self) -> bool:
        return self.storage.exists(self.path) and not self.storage.isdir(self.path)

    def require(self) -> None:
        """A FILE argument that is not there is the user's mistake (Kafka's tool dies on it)."""
        if self.storage.exists(self.path) and self.storage.isdir(self.path):
            raise UsageError(f"{self.display}: is a directory; kfmt dump takes files (segment, index, "
                             f"snapshot files)")
        if not self.storage.exists(self.path):
            raise UsageError(f"{self.display}: no such file")

    def size(self) -> int:
        return self.storage.info(self.path).size

    def read_all(self):
        return self.storage.map(self.path)

    def read_copy(self) -> bytes:
        """The whole file as a copy, not a map: a running broker writes into its active segment's
        index files and trims them on roll (AbstractIndex), which a map would show half-way or
        fault on; a copy is the file as it was when read (kfmt.partition.live)."""
        return self.storage.read(self.path)

    def read(self, start: int, end: int):
        return self.storage.read(self.path, start, end)

    def base_offset(self) -> int:
        """The offset in the file name: the text before the first '.' (`split("\\\\.")(0).toLong`)."""
        prefix = self.name.split(".")[0]
        value = java_parse_long(prefix)
        if value is None:
            raise DataError(f'the file name does not start with an offset (For input string: "{prefix}")',
                            file=self.display)
        return value


@dataclass(frozen=True, slots=True)
class ControlInfo:
    """What a control record says, as the reproduced Kafka version names it (control_records.py)."""

    type_id: int
    type_name: str  # ABORT, COMMIT, LEADER_CHANGE, SNAPSHOT_HEADER, ... or UNKNOWN
    coordinator_epoch: int | None = None  # ABORT / COMMIT
    json: str | None = None  # a KRaft record, as Kafka's JSON converters write it
    label: str | None = None  # the text the tool prints before `json`, when it prints it


@dataclass(slots=True)
class DumpRecord:
    """One record of a deep iteration, with what kafka-dump-log prints about it."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    key_size: int
    value_size: int
    headers: list = field(default_factory=list)  # [(key bytes, value bytes | None)]
    sequence: int | None = None  # v2 records
    legacy: LegacyMessageInfo | None = None  # v0/v1 messages
    control: ControlInfo | None = None  # records of control batches
    decoded: object = None  # kfmt.inspect.dump.decoders.Decoded, when a decoder is chosen (data records)


@dataclass(slots=True)
class BatchView:
    """A batch as the dump shows it: its header facts, where it is, and whether its CRC holds."""

    header: BatchHeader
    position: int  # the running total of the sizes of the batches before it (Kafka's validBytes)
    crc_valid: bool
    codec_name: str


class Sink:
    """Receives what the dumpers find. The text and JSON forms implement it."""

    def begin_file(self, target: DumpTarget) -> None: ...

    def describe_file(self, target: DumpTarget, kind: str, **facts) -> None: ...

    def unknown_file(self, target: DumpTarget) -> None: ...

    # .log / KRaft snapshot .checkpoint
    def batch_start(self, target: DumpTarget, batch: BatchView) -> None: ...

    def record(self, target: DumpTarget, batch: BatchView, record: DumpRecord) -> None: ...

    def batch_end(self, target: DumpTarget, batch: BatchView, decoded: BatchHeader | None) -> None: ...

    def invalid_bytes(self, target: DumpTarget, position: int, length: int) -> None: ...

    def non_consecutive(self, target: DumpTarget, previous: int, following: int) -> None: ...

    # .index / .timeindex
    def index_empty(self, target: DumpTarget) -> None: ...

    def sanity_check_passed(self, target: DumpTarget) -> None: ...

    def index_entry(self, target: DumpTarget, slot: int, offset: int, position: int) -> None: ...

    def index_mismatch(self, target: DumpTarget, index_offset: int, log_offset: int) -> None: ...

    def time_index_entry(self, target: DumpTarget, slot: int, timestamp: int, offset: int) -> None: ...

    def timestamp_mismatch(self, target: DumpTarget, index_timestamp: int, log_timestamp: int) -> None: ...

    def out_of_order_timestamp(self, target: DumpTarget, index_timestamp: int,
                               previous_timestamp: int) -> None: ...

    def offset_not_found(self, target: DumpTarget, index_offset: int, log_offset: int) -> None: ...

    # .snapshot / .txnindex
    def producer(self, target: DumpTarget, entry) -> None: ...

    def snapshot_corrupt(self, target: DumpTarget, message: str) -> None: ...

    def aborted_txn(self, target: DumpTarget, version: int, txn) -> None: ...

    def finish(self) -> None: ...
