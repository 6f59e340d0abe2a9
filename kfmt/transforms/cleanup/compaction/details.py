"""The details a partition's compaction report gives of one cleaning
(kfmt.transforms.cleanup.compaction.cleaner): the cleanable range and how far the cleaning got, the
offset map's use, the segment groups and the segments written, the counts, and the notes."""
from __future__ import annotations

from kfmt.transforms.cleanup.compaction.facts import SegmentInfo
from kfmt.transforms.cleanup.compaction.filter import Removed
from kfmt.transforms.cleanup.compaction.plan import segments_between
from kfmt.write.writer import WriteSummary


def cleaning_details(cleaner, written: WriteSummary) -> dict:
    """What a partition's compaction report says of its cleaning (`cleaner`: the cleaner.py _Cleaner
    that ran): the cleanable range, the offset map, the groups and segments written, the counts."""
    rng, m = cleaner.rng, cleaner.map
    after = _ratio_after(written, cleaner.end_offset, rng.first_uncleanable_offset)
    removed = cleaner.filter.removed if cleaner.filter is not None else Removed()
    return {
        "cleanable": rng.cleanable,
        "first_dirty_offset": rng.first_dirty_offset,
        "first_uncleanable_offset": rng.first_uncleanable_offset,
        "first_uncleanable_is": rng.bounded_by,
        "checkpoint_note": rng.checkpoint_note,
        "cleaned_until": cleaner.end_offset if rng.cleanable else None,
        "dirty_ratio_before": rng.dirty_ratio,
        "dirty_ratio_after": after,
        "offset_map": {"bytes": m.memory, "slots": m.slots, "max_keys": m.max_entries,
                       "keys": m.entries, "utilization": m.utilization, "full": cleaner.map_full},
        "groups": [[s.base_offset for s in g] for g in cleaner.groups],
        "output_segments": [{"base_offset": s.base_offset, "bytes": s.size, "batches": s.batches}
                            for s in written.segments],
        **cleaner.stats.to_json(removed),
        "notes": _notes(cleaner, removed),
    }


def _notes(cleaner, removed: Removed) -> list[str]:
    notes = list(cleaner.filter.notes) if cleaner.filter is not None else []
    rng = cleaner.rng
    if not rng.cleanable:
        notes.append(f"nothing to clean: the dirty section starts at {rng.first_dirty_offset} and "
                     f"{rng.bounded_by} is at {rng.first_uncleanable_offset}; copied unchanged")
    if cleaner.map_full:
        notes.append(f"the offset map filled up: cleaned up to offset {cleaner.end_offset} of the dirty "
                     f"range [{rng.first_dirty_offset}, {rng.first_uncleanable_offset}); "
                     f"{rng.first_uncleanable_offset - cleaner.end_offset} offsets stay dirty (a "
                     f"broker, or kfmt compact on the output, cleans on from there)")
    return notes


def _ratio_after(written: WriteSummary, first_dirty: int, first_uncleanable: int) -> float:
    segs = [SegmentInfo(s.base_offset, s.size, 0, 0, 0, 0) for s in written.segments]
    clean = sum(s.size for s in segs if s.base_offset < first_dirty)
    cleanable = segments_between(segs, min(first_dirty, first_uncleanable), first_uncleanable)
    dirty = sum(s.size for s in cleanable)
    return dirty / (clean + dirty) if clean + dirty else 0.0
