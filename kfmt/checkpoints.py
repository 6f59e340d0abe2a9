"""Text checkpoint files and partition.metadata (reference §9-§11).

Checkpoint format: a version line, a count line, then `count` entry lines. Kafka is strict: a wrong
version, a count that differs from the lines, or a malformed line is an error (and can take a whole
log directory offline), while a 0-byte file is a valid empty checkpoint.
"""
from __future__ import annotations

import base64
import re
from dataclasses import dataclass

from kfmt.errors import DataError


def parse_checkpoint(text: str, file: str, version: int, fields: int) -> list[list[str]]:
    lines = text.splitlines()
    if not lines:
        return []
    if lines[0].strip() != str(version):
        raise DataError(f"checkpoint version {lines[0]!r}, expected {version}", file=file, position=0)
    if len(lines) < 2 or not re.fullmatch(r"\d+", lines[1].strip()):
        raise DataError("checkpoint has no valid entry count line", file=file)
    count = int(lines[1])
    entries = [line.split() for line in lines[2:] if line.strip()]
    if count != len(entries):
        raise DataError(f"checkpoint declares {count} entries but has {len(entries)}", file=file)
    for i, entry in enumerate(entries):
        if len(entry) != fields:
            raise DataError(f"malformed checkpoint line {i + 3}: {' '.join(entry)!r}", file=file)
    return entries


def format_checkpoint(version: int, entries) -> str:
    lines = [str(version), str(len(entries))] + [" ".join(str(f) for f in e) for e in entries]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True, slots=True)
class EpochEntry:
    epoch: int
    start_offset: int


def read_leader_epochs(text: str, file: str) -> list[EpochEntry]:
    entries = []
    for fields in parse_checkpoint(text, file, 0, 2):
        try:
            epoch, start = int(fields[0]), int(fields[1])
        except ValueError:
            raise DataError(f"malformed leader epoch entry {' '.join(fields)!r}", file=file) from None
        if epoch < 0 or start < 0:
            raise DataError(f"negative leader epoch entry {epoch} {start}", file=file)
        entries.append(EpochEntry(epoch, start))
    return entries


def write_leader_epochs(entries) -> str:
    return format_checkpoint(0, [(e.epoch, e.start_offset) for e in entries])


def read_offset_checkpoint(text: str, file: str) -> dict[tuple[str, int], int]:
    """recovery-point / log-start / replication / cleaner offset checkpoints: (topic, partition) -> offset."""
    out = {}
    for fields in parse_checkpoint(text, file, 0, 3):
        try:
            out[(fields[0], int(fields[1]))] = int(fields[2])
        except ValueError:
            raise DataError(f"malformed offset checkpoint entry {' '.join(fields)!r}", file=file) from None
    return out


def write_offset_checkpoint(offsets: dict[tuple[str, int], int]) -> str:
    return format_checkpoint(0, [(t, p, o) for (t, p), o in sorted(offsets.items())])


def read_partition_metadata(text: str, file: str) -> str:
    """The topic id in partition.metadata (`version: 0` / `topic_id: <22-char URL-safe base64>`)."""
    fields = {}
    for line in text.splitlines():
        parts = re.split(r":\s+", line, maxsplit=1)
        if len(parts) != 2:
            raise DataError(f"malformed partition.metadata line {line!r}", file=file)
        fields[parts[0]] = parts[1]
    if fields.get("version") is None or not fields["version"].isdigit():
        raise DataError("partition.metadata has no valid version", file=file)
    topic_id = fields.get("topic_id")
    if topic_id is None:
        raise DataError("partition.metadata has no topic_id", file=file)
    try:
        raw = base64.urlsafe_b64decode(topic_id + "==")
    except ValueError:
        raw = b""
    if len(raw) != 16 or len(topic_id) != 22:
        raise DataError(f"partition.metadata topic_id {topic_id!r} is not a 16-byte Uuid", file=file)
    if raw == bytes(16):
        raise DataError("partition.metadata topic_id is the all-zero Uuid", file=file)
    return topic_id


def write_partition_metadata(topic_id: str) -> str:
    return f"version: 0\ntopic_id: {topic_id}"
