"""What verification finds: problems (exit 65) and notes (genuine broker behaviour worth knowing).

Every finding names the file, the byte position in it and the offset involved where they exist, a
stable check name scripts can match on, and a message that says what was found and what was
expected. A note never fails verification: it records something a real broker does (a preallocated
index copied from a running broker, a snapshot Kafka would delete as stray, ...).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field

from kfmt.errors import DataError


class Severity(str, enum.Enum):
    ERROR = "error"
    NOTE = "note"


@dataclass(frozen=True, slots=True)
class Problem:
    check: str
    message: str
    file: str
    position: int | None = None
    offset: int | None = None
    severity: Severity = Severity.ERROR

    @property
    def is_error(self) -> bool:
        return self.severity == Severity.ERROR

    def text(self) -> str:
        where = [self.file]
        if self.position is not None:
            where.append(f"position {self.position}")
        if self.offset is not None:
            where.append(f"offset {self.offset}")
        return f"{self.severity.value} [{self.check}] {', '.join(where)}: {self.message}"

    def to_json(self) -> dict:
        return {"file": self.file, "position": self.position, "offset": self.offset,
                "check": self.check, "message": self.message, "severity": self.severity.value}


@dataclass
class Counts:
    partitions: int = 0
    segments: int = 0
    batches: int = 0
    records: int = 0
    files: int = 0  # every file read (segments, indexes, snapshots, checkpoints)
    #: compressed v0/v1 wrappers the default depth took from their headers: their records are
    #: known only inflated (docs/format.md §3.4), so they are not in `records` (`--deep` counts them)
    uncounted_wrappers: int = 0


#: the two depths (kfmt.inspect.verify.log): what a broker's log recovery checks, and every record too
RECOVERY, DEEP = "recovery", "deep"


@dataclass
class VerifyReport:
    problems: list[Problem] = field(default_factory=list)
    counts: Counts = field(default_factory=Counts)
    #: the record-level checks were made too (kfmt.inspect.verify.log: the two depths)
    deep: bool = False

    def error(self, check: str, message: str, file: str, position: int | None = None,
              offset: int | None = None) -> None:
        self.problems.append(Problem(check, message, file, position, offset, Severity.ERROR))

    def note(self, check: str, message: str, file: str, position: int | None = None,
             offset: int | None = None) -> None:
        self.problems.append(Problem(check, message, file, position, offset, Severity.NOTE))

    def data_error(self, check: str, err: DataError, file: str, position: int | None = None,
                   offset: int | None = None) -> None:
        """A DataError raised by a reader, located with what the caller knows."""
        self.error(check, err.message, err.file or file,
                   err.position if err.position is not None else position,
                   err.offset if err.offset is not None else offset)

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.is_error]

    @property
    def notes(self) -> list[Problem]:
        return [p for p in self.problems if not p.is_error]

    @property
    def ok(self) -> bool:
        return not self.errors

    def summary(self) -> dict:
        c = self.counts
        return {"ok": self.ok, "errors": len(self.errors), "notes": len(self.notes),
                "partitions": c.partitions, "segments": c.segments, "batches": c.batches,
                "records": c.records, "uncounted_wrappers": c.uncounted_wrappers, "files": c.files,
                "depth": DEEP if self.deep else RECOVERY}

    def to_json(self) -> dict:
        return {"problems": [p.to_json() for p in self.problems], "summary": self.summary()}


class RebuiltOnLoad:
    """A report for the checks of files Kafka rebuilds when it loads the partition (an index of a
    segment log recovery recovers: kfmt.partition.load_recovery): what would be a problem is a note
    saying why it does not matter."""

    def __init__(self, report: VerifyReport, why: str):
        self.report, self.why = report, why

    def error(self, check: str, message: str, file: str, position: int | None = None,
              offset: int | None = None) -> None:
        self.report.note(check, f"{message}; {self.why}", file, position, offset)

    def __getattr__(self, name):
        return getattr(self.report, name)
