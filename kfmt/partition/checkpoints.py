"""Text checkpoint files and partition.metadata (docs/format.md §9-§11).

Checkpoint format: a version line, a count line, then `count` entry lines. Kafka is strict: a wrong
version, a count that differs from the lines, or a malformed line is an error (and can take a whole
log directory offline), while a 0-byte file is a valid empty checkpoint.
"""
from __future__ import annotations

import base64
import re
from dataclasses import dataclass

from kfmt.errors import DataError

# Java's BufferedReader.readLine ends a line at \n, \r or \r\n; Integer.parseInt / Long.parseLong
# take an optional sign and ASCII digits, nothing else (no blanks); the entry formatters split a line
# on `\s+` the way Java's String.split does (a leading blank yields an empty first field, trailing
# empty fields are dropped).
_LINE = re.compile(r"([^\r\n]*)(\r\n|\r|\n|$)")
_JAVA_INT = re.compile(r"[+-]?[0-9]+", re.ASCII)
INT32_RANGE = (-2**31, 2**31 - 1)
INT64_RANGE = (-2**63, 2**63 - 1)


def java_lines(text: str) -> list[tuple[int, str]]:
    """(byte position, line) pairs as BufferedReader.readLine returns them (no line after a final
    terminator)."""
    out, pos, i = [], 0, 0
    while i < len(text):
        m = _LINE.match(text, i)
        out.append((pos, m[1]))
        pos += len(m[0].encode("utf-8"))
        i = m.end()
    return out


def java_parse_int(value: str, value_range=INT32_RANGE) -> int | None:
    """Integer.parseInt / Long.parseLong: the number, or None where Java throws NumberFormatException."""
    if not _JAVA_INT.fullmatch(value):
        return None
    number = int(value)
    return number if value_range[0] <= number <= value_range[1] else None


def java_split_whitespace(line: str) -> list[str]:
    fields = re.split(r"\s+", line, flags=re.ASCII)
    while fields and fields[-1] == "":
        fields.pop()
    return fields


def checkpoint_text(data, file: str) -> str:
    """A checkpoint file's bytes as text, as CheckpointFile reads them (a UTF-8 BufferedReader:
    malformed input fails the read, and with it the log directory)."""
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError as err:
        raise DataError(f"not valid UTF-8 ({err.reason}), as Kafka's checkpoint reader requires",
                        file=file, position=err.start) from None


def parse_checkpoint(text: str, file: str, version: int, fields: int) -> list[list[str]]:
    return [entry for _position, entry in checkpoint_entries(text, file, version, fields)]


def checkpoint_entries(text: str, file: str, version: int, fields: int) -> list[tuple[int, list[str]]]:
    """(byte position, fields) of each entry line, read as CheckpointFile.CheckpointReadBuffer does
    (docs/format.md §11.1): an empty file, or a version line alone, is a valid empty checkpoint; otherwise every
    line after the count line must be an entry and their number must equal the count."""
    lines = java_lines(text)
    if not lines:
        return []
    read_version = java_parse_int(lines[0][1])
    if read_version is None:
        raise DataError(f"malformed checkpoint version line {lines[0][1]!r}, expected {version}",
                        file=file, position=0)
    if read_version != version:
        raise DataError(f"checkpoint version {read_version}, expected {version}", file=file, position=0)
    if len(lines) < 2:
        return []
    count_position, count_line = lines[1]
    count = java_parse_int(count_line)
    if count is None or count < 0:
        raise DataError(f"malformed checkpoint entry count line {count_line!r}, expected a number "
                        f">= 0", file=file, position=count_position)
    entries = []
    for position, line in lines[2:]:
        entry = java_split_whitespace(line)
        if len(entry) != fields:
            raise DataError(f"malformed checkpoint line {line!r}, expected {fields} fields separated "
                            f"by whitespace", file=file, position=position)
        entries.append((position, entry))
    if count != len(entries):
        raise DataError(f"checkpoint declares {count} entries but has {len(entries)}", file=file,
                        position=count_position)
    return entries


def format_checkpoint(version: int, entries) -> str:
    lines = [str(version), str(len(entries))] + [" ".join(str(f) for f in e) for e in entries]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True, slots=True)
class EpochEntry:
    epoch: int
    start_offset: int


def read_leader_epochs(text: str, file: str) -> list[EpochEntry]:
    """LeaderEpochCheckpointFile: `<epoch int32> <start offset int64>` lines, both >= 0 (docs/format.md §9)."""
    entries = []
    for position, fields in checkpoint_entries(text, file, 0, 2):
        epoch, start = java_parse_int(fields[0]), java_parse_int(fields[1], INT64_RANGE)
        if epoch is None or start is None:
            raise DataError(f"malformed leader epoch entry {' '.join(fields)!r}, expected "
                            f"'<epoch int32> <start offset int64>'", file=file, position=position)
        if epoch < 0 or start < 0:
            raise DataError(f"negative leader epoch entry {epoch} {start}", file=file, position=position)
        entries.append(EpochEntry(epoch, start))
    return entries


def write_leader_epochs(entries) -> str:
    return format_checkpoint(0, [(e.epoch, e.start_offset) for e in entries])


def read_offset_checkpoint(text: str, file: str) -> dict[tuple[str, int], int]:
    """recovery-point / log-start / replication / cleaner offset checkpoints: (topic, partition) -> offset
    (OffsetCheckpointFile: `<topic> <partition int32> <offset int64>` lines, §11.2)."""
    out = {}
    for position, fields in checkpoint_entries(text, file, 0, 3):
        partition, offset = java_parse_int(fields[1]), java_parse_int(fields[2], INT64_RANGE)
        if not fields[0] or partition is None or offset is None:
            raise DataError(f"malformed offset checkpoint entry {' '.join(fields)!r}, expected "
                            f"'<topic> <partition int32> <offset int64>'", file=file, position=position)
        out[(fields[0], partition)] = offset
    return out


def write_offset_checkpoint(offsets: dict[tuple[str, int], int]) -> str:
    return format_checkpoint(0, [(t, p, o) for (t, p), o in sorted(offsets.items())])


def read_partition_metadata(text: str, file: str) -> str:
    r"""The topic id in partition.metadata, read as PartitionMetadataReadBuffer does (docs/format.md §10): line 1
    `version: <int32 >= 0>`, line 2 `topic_id: <Uuid>` (each split once on `:\s+`, key exact; later
    lines are not read); the Uuid is URL-safe base64 of 16 bytes, not all zero. Returns its
    canonical 22-character form."""
    lines = java_lines(text)
    position_of = [p for p, _ in lines] + [len(text.encode("utf-8"))]
    values = []
    for i, key in enumerate(("version", "topic_id")):
        if i >= len(lines):  # Kafka's reader gets no line (null) and fails: the log is not loaded
            what = "is empty (0 bytes)" if not text else "ends after its version line"
            raise DataError(f"partition.metadata {what}: expected a line '{key}: <value>'", file=file,
                            position=position_of[i])
        line = lines[i][1]
        parts = re.split(r":\s+", line, maxsplit=1, flags=re.ASCII)
        if len(parts) != 2 or parts[0] != key:
            raise DataError(f"malformed partition.metadata line {line!r}, expected '{key}: <value>'",
                            file=file, position=position_of[i])
        values.append(parts[1])
    version = java_parse_int(values[0])
    if version is None or version < 0:
        raise DataError(f"partition.metadata version {values[0]!r}, expected an integer >= 0",
                        file=file, position=0)
    raw = _uuid_bytes(values[1])
    if raw is None:
        raise DataError(f"partition.metadata topic_id {values[1]!r} is not a base64 (URL-safe) Uuid "
                        f"of 16 bytes", file=file, position=position_of[1])
    if raw == bytes(16):
        raise DataError("partition.metadata topic_id is the all-zero Uuid", file=file,
                        position=position_of[1])
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def parse_topic_id(value: str) -> str | None:
    """A topic id as Uuid.fromString reads it, in its canonical 22-character form; None when it is
    not one (or is the all-zero id, which Kafka refuses)."""
    raw = _uuid_bytes(value)
    if raw is None or raw == bytes(16):
        return None
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


_BASE64_URL = re.compile(r"[A-Za-z0-9_-]*(={0,2})", re.ASCII)


def _uuid_bytes(value: str) -> bytes | None:
    """Uuid.fromString: at most 24 characters of URL-safe base64 (padding optional) decoding to 16 bytes."""
    m = _BASE64_URL.fullmatch(value)
    if len(value) > 24 or not m or (m[1] and len(value) % 4) or len(value.rstrip("=")) % 4 == 1:
        return None
    raw = base64.urlsafe_b64decode(value.rstrip("=") + "=" * (-len(value.rstrip("=")) % 4))
    return raw if len(raw) == 16 else None


def write_partition_metadata(topic_id: str) -> str:
    return f"version: 0\ntopic_id: {topic_id}"
