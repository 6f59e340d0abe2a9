"""What a typed export (kfmt.rows.typed) adds up and reports: per partition, the keys and values that
did not decode and the dead letters written (docs/typed-export.md)."""
from __future__ import annotations

from kfmt.rows.typed import DecodeTally

DEAD_LETTER_DIR = "_errors"  # beside the table: Spark's, Arrow's and Hadoop's listings skip names with `_`


def merge_decode(total: DecodeTally | None, more: DecodeTally) -> DecodeTally:
    total = total or DecodeTally()
    for side, n in more.failed.items():
        total.failed[side] = total.failed.get(side, 0) + n
    total.dead_letters += more.dead_letters
    return total


def decode_report(plan, decode: dict) -> tuple[list, list[str]]:
    """(the report's `decoding` entries, one note per partition with records that did not decode)."""
    entries, notes = [], []
    for (topic, partition), tally in sorted(decode.items()):
        typing = plan.typing[topic]
        entries.append({"topic": topic, "partition": partition, "formats": typing.formats,
                        "not_decoded": dict(sorted(tally.failed.items())),
                        "dead_letters": tally.dead_letters})
        if tally.failed:
            where = {"dead-letter": f"sent to {DEAD_LETTER_DIR}/", "skip": "skipped (null in the table)",
                     "fail": ""}[typing.on_decode_error]
            counts = ", ".join(f"{n} {side}s" for side, n in sorted(tally.failed.items()))
            notes.append(f"{topic}-{partition}: {counts} did not decode: null in the table, {where}")
    return entries, notes
