"""Dead letters of a table export (`kfmt export --format iceberg` with a value format; docs/typed-export.md):
published with the table's commit, nothing visible when the commit fails.

A table's commit is the catalog's, not a rename kfmt controls, so the dead letters are staged beside it
and published in two steps. While the run reads, they are written under
`DST/_errors/_pending-<run id>/` (a name readers skip, as every `_` name); the run's commit records the
run id in the export options of its snapshot summary (`dead_letters_run`); after the commit each file
is renamed into `DST/_errors/topic=T/partition=P/`. A run that fails before its commit removes its
pending files. One killed between the commit and the renames leaves them: the next run into the table
moves them into place if its run id is the one the table's last kfmt commit names, and removes any
other (a run that never committed).
"""
from __future__ import annotations

import pyarrow as pa

from kfmt.rows.typed import DecodeTally
from kfmt.storage.runs import new_run_id
from kfmt.storage.store import Storage
from kfmt.transforms.export_decode import DEAD_LETTER_DIR
from kfmt.transforms.export_job import hive_value

PENDING_PREFIX = "_pending-"
RUN_KEY = "dead_letters_run"  # in the options a table's kfmt commit records


class TableDeadLetters:
    """Dead-letter Parquet files of one table export, staged until its commit."""

    def __init__(self, plan, storage: Storage, root: str):
        self.plan, self.storage = plan, storage
        self.errors = storage.join(root, DEAD_LETTER_DIR)
        self.run_id = new_run_id()
        self.pending = storage.join(self.errors, PENDING_PREFIX + self.run_id)
        self.decode: dict = {}  # (topic, partition) -> DecodeTally
        self.staged: list[str] = []  # paths relative to `pending` (and, once published, to `errors`)
        self.files: list[str] = []  # the published files' URLs

    def split(self, part, rows: pa.RecordBatch) -> pa.RecordBatch:
        """The rows decoded; what did not decode staged as dead letters."""
        typing = self.plan.typing.get(part.topic)
        if typing is None:
            return rows
        tally = self.decode.setdefault((part.topic, part.partition), DecodeTally())
        typed, dead = typing.apply(rows, tally)
        if dead is not None:
            tally.dead_letters += dead.num_rows
            self.stage(part.topic, part.partition, dead)
        return typed

    def stage_rows(self, topic: str, dead: pa.RecordBatch | pa.Table) -> None:
        """Dead-letter rows of several partitions (an upsert's live rows, decoded together)."""
        table = pa.Table.from_batches([dead]) if isinstance(dead, pa.RecordBatch) else dead
        for partition in sorted(set(table.column("partition").to_pylist())):
            rows = table.filter(pa.compute.equal(table.column("partition"), partition))
            self.stage(topic, partition, rows.combine_chunks().to_batches()[0])

    def stage(self, topic: str, partition: int, dead: pa.RecordBatch) -> None:
        import pyarrow.parquet as pq

        first_offset = dead.column("offset")[0].as_py()
        rel = f"topic={hive_value(topic)}/partition={partition}/part-o{first_offset:020d}.parquet"
        path = self.storage.join(self.pending, *rel.split("/"))
        self.storage.makedirs(self.storage.parent(path))
        sink = pa.BufferOutputStream()
        pq.write_table(pa.Table.from_batches([dead]), sink)
        self.storage.write(path, sink.getvalue().to_pybytes())
        self.staged.append(rel)

    def committed_with(self) -> dict:
        """What the table's commit records so that a later run can finish publishing them."""
        return {RUN_KEY: self.run_id} if self.staged else {}

    def publish(self) -> None:
        """After the commit: every staged file into its place."""
        self.files = _move_into_place(self.storage, self.errors, self.pending)

    def discard(self) -> None:
        """The commit failed or never came: nothing of the run's dead letters remains."""
        if self.storage.isdir(self.pending):
            self.storage.remove_tree(self.pending)

    def notes(self) -> list[str]:
        return [f"dead letters written to {f}" for f in self.files]


def finish_earlier_runs(storage: Storage, root: str, committed_run: str | None) -> None:
    """Dead letters an earlier run left staged: published if its commit went through (its run id is
    `committed_run`, from the table's last kfmt commit), else removed."""
    errors = storage.join(root, DEAD_LETTER_DIR)
    if not storage.isdir(errors):
        return
    for entry in storage.listdir(errors):
        if entry.is_dir and entry.name.startswith(PENDING_PREFIX):
            if entry.name[len(PENDING_PREFIX):] == committed_run:
                _move_into_place(storage, errors, entry.path)
            else:
                storage.remove_tree(entry.path)


def _move_into_place(storage: Storage, errors: str, pending: str) -> list[str]:
    if not storage.isdir(pending):
        return []
    moved = []
    prefix = pending.rstrip("/") + "/"
    for info in storage.walk(pending):
        final = storage.join(errors, *info.path[len(prefix):].split("/"))
        storage.makedirs(storage.parent(final))
        storage.rename(info.path, final)
        moved.append(storage.url_of(final))
    storage.remove_tree(pending)
    return moved
