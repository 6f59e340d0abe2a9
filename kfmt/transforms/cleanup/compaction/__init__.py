"""compact: Kafka's compact cleanup policy applied offline (docs/format.md §14).

The cleaning of one partition, in the parts Kafka's log cleaner has:
* `facts` — what the cleaner knows before it starts (segments, log end, producer state);
* `plan` — the cleanable range, the dirty ratio and the groups of segments rewritten;
* `offset_map` — the fixed-size key-hash -> latest offset map (SkimpyOffsetMap);
* `transactions` — aborted data and removable markers (CleanedTransactionMetadata);
* `filter` — which batches and records stay (cleanInto, shouldRetainRecord, filterTo);
* `rewrite` — batches rebuilt from what they keep (buildRetainedRecordsInto, writeEmptyHeader);
* `cleaner` — one partition's cleaning into DST (doClean), the unit of work of `kfmt compact`;
* `outcome` — its options, statistics and result, and the sink of a dry run.
"""
from kfmt.transforms.cleanup.compaction.cleaner import compact_partition
from kfmt.transforms.cleanup.compaction.outcome import (
    CompactOptions,
    CompactResult,
    OffsetMapFull,
)

__all__ = ["CompactOptions", "CompactResult", "OffsetMapFull", "compact_partition"]
