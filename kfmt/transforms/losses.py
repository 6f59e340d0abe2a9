"""Offsets an incremental run can no longer read: ranges that retention (or DeleteRecords) deleted
between two runs of `kfmt archive` or `kfmt export --append`, before any run read them.

Each run compares what the archive or export already holds of a partition (up to the offset after
the last batch it holds, or after the last range already reported lost) with what the source holds
now: offsets in between are gone. A range is reported once, by the run that finds it: in the
summary line, as a warning, in the report (`lost`), and in what the next run reads (the archive
manifest's partitions, the export's state), which also keeps the next run from reporting it again.
No schedule saves records retention deletes before a run comes (docs/operations.md); the user hears
of every range, and `--fail-on-loss` makes it fatal (exit EXIT_LOSS, after publishing).
"""
from __future__ import annotations

from dataclasses import dataclass

from kfmt.errors import EXIT_LOSS


@dataclass(frozen=True)
class Lost:
    """Offsets [start, end) of a partition, deleted before any run read them."""

    topic: str | None
    partition: int | None
    start: int
    end: int

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    def phrase(self) -> str:
        return (f"lost offsets {self.start}..{self.end - 1} of {self.name}: deleted by retention or "
                f"DeleteRecords before any run read them")

    def to_json(self) -> dict:
        return {"topic": self.topic, "partition": self.partition, "from": self.start, "to": self.end,
                "offsets": self.end - self.start}

    @classmethod
    def from_json(cls, doc: dict) -> "Lost":
        return cls(doc["topic"], doc["partition"], int(doc["from"]), int(doc["to"]))


def lost_between(topic, partition, held_end: int | None, available: int | None) -> Lost | None:
    """The range between the end of what is held and the first offset the source still has, if any."""
    if held_end is None or available is None or available <= held_end:
        return None
    return Lost(topic, partition, held_end, available)


def summary_suffix(losses: list[dict]) -> str:
    """What a summary line adds for the report's `lost` entries ('' when nothing was lost)."""
    return "".join(f"; {Lost.from_json(doc).phrase()}" for doc in losses)


def loss_failure(losses: list[dict]) -> tuple[str, int] | None:
    """(the error line, the exit code) of a run with --fail-on-loss that found `losses`."""
    if not losses:
        return None
    offsets = sum(doc["offsets"] for doc in losses)
    return (f"{offsets} offset(s) in {len(losses)} range(s) were deleted before any run read them "
            f"(--fail-on-loss; what the run had was published): {Lost.from_json(losses[0]).phrase()}"
            + (f" (and {len(losses) - 1} more range(s): see the report's 'lost')" if len(losses) > 1 else ""),
            EXIT_LOSS)
