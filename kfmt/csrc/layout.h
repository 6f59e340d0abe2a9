/* Kafka's on-disk layouts as the kernels use them: where each field starts (_AT), the size of each
 * structure (_BYTES, or _MIN_BYTES), the attribute bits and the named sizes and magics.
 * Generated from kfmt/format/layout.py by `python -m kfmt.format.layout_c`: do not edit (a test
 * compares the two, tests/format/test_layout.py). */
#ifndef KFMT_LAYOUT_H
#define KFMT_LAYOUT_H

/* the start of every entry (docs/format.md §2) */
#define LOG_ENTRY_OFFSET_AT 0
#define LOG_ENTRY_SIZE_AT 8
#define LOG_ENTRY_CRC_OR_LEADER_EPOCH_AT 12
#define LOG_ENTRY_MAGIC_AT 16
#define LOG_ENTRY_BYTES 17

/* a v0 message (docs/format.md §3.1) */
#define V0_MESSAGE_OFFSET_AT 0
#define V0_MESSAGE_MESSAGE_SIZE_AT 8
#define V0_MESSAGE_CRC_AT 12
#define V0_MESSAGE_MAGIC_AT 16
#define V0_MESSAGE_ATTRIBUTES_AT 17
#define V0_MESSAGE_KEY_AT 18
#define V0_MESSAGE_MIN_BYTES 26

/* a v1 message (docs/format.md §3.1) */
#define V1_MESSAGE_OFFSET_AT 0
#define V1_MESSAGE_MESSAGE_SIZE_AT 8
#define V1_MESSAGE_CRC_AT 12
#define V1_MESSAGE_MAGIC_AT 16
#define V1_MESSAGE_ATTRIBUTES_AT 17
#define V1_MESSAGE_TIMESTAMP_AT 18
#define V1_MESSAGE_KEY_AT 26
#define V1_MESSAGE_MIN_BYTES 34

/* the v2 record batch header (docs/format.md §4.1) */
#define V2_BATCH_BASE_OFFSET_AT 0
#define V2_BATCH_BATCH_LENGTH_AT 8
#define V2_BATCH_PARTITION_LEADER_EPOCH_AT 12
#define V2_BATCH_MAGIC_AT 16
#define V2_BATCH_CRC_AT 17
#define V2_BATCH_ATTRIBUTES_AT 21
#define V2_BATCH_LAST_OFFSET_DELTA_AT 23
#define V2_BATCH_BASE_TIMESTAMP_AT 27
#define V2_BATCH_MAX_TIMESTAMP_AT 35
#define V2_BATCH_PRODUCER_ID_AT 43
#define V2_BATCH_PRODUCER_EPOCH_AT 51
#define V2_BATCH_BASE_SEQUENCE_AT 53
#define V2_BATCH_RECORDS_COUNT_AT 57
#define V2_BATCH_RECORDS_AT 61
#define V2_BATCH_MIN_BYTES 61

/* a v2 record (docs/format.md §4.4) */
#define V2_RECORD_LENGTH_AT 0
#define V2_RECORD_MIN_BYTES 7

/* a header of a v2 record (docs/format.md §4.4) */
#define V2_RECORD_HEADER_HEADER_KEY_AT 0
#define V2_RECORD_HEADER_MIN_BYTES 2

/* the key of a control record (docs/format.md §4.6) */
#define CONTROL_KEY_VERSION_AT 0
#define CONTROL_KEY_TYPE_AT 2
#define CONTROL_KEY_BYTES 4

/* the value of an ABORT or COMMIT control record (docs/format.md §4.6) */
#define END_TXN_MARKER_VERSION_AT 0
#define END_TXN_MARKER_COORDINATOR_EPOCH_AT 2
#define END_TXN_MARKER_BYTES 6

/* an .index entry (docs/format.md §6.1) */
#define OFFSET_INDEX_ENTRY_RELATIVE_OFFSET_AT 0
#define OFFSET_INDEX_ENTRY_POSITION_AT 4
#define OFFSET_INDEX_ENTRY_BYTES 8

/* a .timeindex entry (docs/format.md §6.2) */
#define TIME_INDEX_ENTRY_TIMESTAMP_AT 0
#define TIME_INDEX_ENTRY_RELATIVE_OFFSET_AT 8
#define TIME_INDEX_ENTRY_BYTES 12

/* a .txnindex entry (docs/format.md §7) */
#define TXN_INDEX_ENTRY_VERSION_AT 0
#define TXN_INDEX_ENTRY_PRODUCER_ID_AT 2
#define TXN_INDEX_ENTRY_FIRST_OFFSET_AT 10
#define TXN_INDEX_ENTRY_LAST_OFFSET_AT 18
#define TXN_INDEX_ENTRY_LAST_STABLE_OFFSET_AT 26
#define TXN_INDEX_ENTRY_BYTES 34

/* the header of a .snapshot (docs/format.md §8) */
#define SNAPSHOT_HEADER_VERSION_AT 0
#define SNAPSHOT_HEADER_CRC_AT 2
#define SNAPSHOT_HEADER_PRODUCER_COUNT_AT 6
#define SNAPSHOT_HEADER_BYTES 10

/* a producer entry of a .snapshot (docs/format.md §8) */
#define SNAPSHOT_ENTRY_PRODUCER_ID_AT 0
#define SNAPSHOT_ENTRY_PRODUCER_EPOCH_AT 8
#define SNAPSHOT_ENTRY_LAST_SEQUENCE_AT 10
#define SNAPSHOT_ENTRY_LAST_OFFSET_AT 14
#define SNAPSHOT_ENTRY_OFFSET_DELTA_AT 22
#define SNAPSHOT_ENTRY_TIMESTAMP_AT 26
#define SNAPSHOT_ENTRY_COORDINATOR_EPOCH_AT 34
#define SNAPSHOT_ENTRY_CURRENT_TXN_FIRST_OFFSET_AT 38
#define SNAPSHOT_ENTRY_BYTES 46

/* attribute bits (docs/format.md §3.2) */
#define LEGACY_ATTR_COMPRESSION 0x07 /* the codec id */
#define LEGACY_ATTR_TIMESTAMP_TYPE 0x08 /* LogAppendTime (v1 only) */

/* attribute bits (docs/format.md §4.2) */
#define V2_ATTR_COMPRESSION 0x07 /* the codec id */
#define V2_ATTR_TIMESTAMP_TYPE 0x08 /* LogAppendTime */
#define V2_ATTR_TRANSACTIONAL 0x10 /* transactional */
#define V2_ATTR_CONTROL 0x20 /* a control batch (§4.6) */
#define V2_ATTR_DELETE_HORIZON 0x40 /* baseTimestamp holds a delete horizon (§4.7) */

/* named facts (kfmt.format.layout) */
#define MAGIC_V0 0
#define MAGIC_V1 1
#define MAGIC_V2 2
#define LOG_OVERHEAD 12
#define HEADER_SIZE_UP_TO_MAGIC 17
#define MAGIC_AT 16
#define MIN_ENTRY_SIZE 14
#define RECORD_OVERHEAD_V0 14
#define RECORD_OVERHEAD_V1 22
#define V2_BATCH_OVERHEAD 61
#define V2_CRC_FROM 21
#define V2_MIN_RECORD_SIZE 7
#define CODEC_MASK 0x07
#define ATTR_LOG_APPEND_TIME 0x08
#define ATTR_TRANSACTIONAL 0x10
#define ATTR_CONTROL 0x20
#define ATTR_DELETE_HORIZON 0x40

/* per legacy magic (v0 or v1): where keyLength lies, and the smallest messageSize */
#define LEGACY_KEY_AT(magic) ((magic) == MAGIC_V0 ? V0_MESSAGE_KEY_AT : V1_MESSAGE_KEY_AT)
#define RECORD_OVERHEAD(magic) ((magic) == MAGIC_V0 ? RECORD_OVERHEAD_V0 : RECORD_OVERHEAD_V1)

#endif
