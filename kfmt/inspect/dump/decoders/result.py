"""What a decoder makes of one record."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Decoded:
    key: str | None  # the text kafka-dump-log prints after "key: " (None: no key printed)
    payload: str | None  # the text it prints after "payload: " (None: no payload printed)
    content: dict | None = None  # the same facts, structured (kfmt dump --format json)
