"""What every job (a transform, an export, an archive or a restore) is told besides its own settings:
where it reads and writes, what it selects, the engine it runs on, and whether it only plans. One
frozen object instead of the same nine keywords on every entry point; kfmt.api builds it from the
public keywords (kfmt.api.arguments.job_options)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kfmt.partition.topic_identity import TargetTopics
    from kfmt.pipelines.engine import Engine


@dataclass(frozen=True)
class JobOptions:
    src_options: dict | None = None  # SRC's storage options (kfmt.storage.store)
    dst_options: dict | None = None  # DST's; None: SRC's
    topic: str | None = None  # a topic glob (kfmt.partition.layout.find_partitions)
    partition: int | None = None
    master: "str | Engine | None" = None  # the engine (kfmt.pipelines.engine); None: by the input's size
    dry_run: bool = False  # plan and say what would be done; write nothing
    progress: bool = True  # a progress bar for the tasks (kfmt.pipelines.runner)
    include_deleted: bool = False  # also carry what lies below each log start offset (kfmt.partition.log_start)
    target: "TargetTopics | None" = None  # the topic ids the output is for (kfmt.partition.topic_identity)

    @property
    def dst_storage_options(self) -> dict | None:
        """DST's storage options: its own, else SRC's."""
        return self.dst_options if self.dst_options is not None else self.src_options

    def selection(self) -> dict:
        """The selection as the report records it."""
        return {"topic": self.topic, "partition": self.partition}
