/* One row per entry of a segment: the header facts of kfmt.format.model.BatchHeader as plain numbers.
 * The Python side views these rows as a numpy structured array (kfmt.format.frames.FRAME_DTYPE, built from
 * frame_layout()); field order and types match it. Legacy entries: base_offset is the entry's own
 * offset (a compressed wrapper's LAST inner offset), records_count -1 for a compressed wrapper (both
 * None in BatchHeader until decoded), base_timestamp/producer fields/leader epoch -1. */
#ifndef KFMT_FRAMES_H
#define KFMT_FRAMES_H
#include <stddef.h>
#include <stdint.h>

typedef struct {
    int64_t position; /* in the file */
    int64_t base_offset;
    int64_t last_offset;
    int64_t max_timestamp;
    int64_t base_timestamp;
    int64_t producer_id;
    int32_t size; /* the whole entry, log overhead included */
    int32_t partition_leader_epoch;
    int32_t base_sequence;
    int32_t records_count;
    uint32_t crc;
    int16_t attributes;
    int16_t producer_epoch;
    int8_t magic;
    int8_t compression;
    int8_t timestamp_type; /* -1 none (v0), 0 CreateTime, 1 LogAppendTime */
} frame;

/* The check every walk over a run of rows makes of its arguments: [start, stop) lies within the rows
 * array. Otherwise a ValueError naming the kernel, `data` (may be NULL) and `rows` released, -1.
 * (Python.h comes first, through native.h.) */
int frame_run_args(const char *kernel, Py_buffer *data, Py_buffer *rows, Py_ssize_t start, Py_ssize_t stop);

/* Whether a row describes its entry p as the frame scan reads it (the walks over rows trust no row
 * they did not check): an uncompressed legacy message that decode accepts (legacy.c; its CRC-32
 * checked when check_crc), a v2 batch header (digest.c). */
int legacy_message_vouched(const uint8_t *p, const frame *f, int check_crc);
int v2_row_describes(const uint8_t *p, const frame *f);

/* kfmt info's facts of some records (facts.c): their count, first and last offsets, and the range of
 * their timestamps (NO_TIMESTAMP, -1, left out). */
typedef struct {
    int64_t records, first, last, min_ts, max_ts;
    int has_ts;
    int disordered; /* an offset not above the one before it (verify's record-offsets rule) */
    int magics;     /* of a wrapper's inner messages: bit m set for magic m */
} facts_acc;
void facts_note(facts_acc *a, int64_t offset, int64_t timestamp);

/* A v0/v1 message's framing as LegacyMessage parses it (legacy.c), its value not copied: a compressed
 * wrapper's value is the inner message set, inflated straight from the entry. 0 where LegacyMessage
 * refuses the entry. */
typedef struct {
    int64_t offset, timestamp, value_at, value_len; /* value_len -1: a null value */
    uint32_t crc;
    int magic, attributes, crc_valid;
} legacy_wrapper_t;
int legacy_wrapper_parse(const uint8_t *p, int64_t size, legacy_wrapper_t *w);

/* The records of an inflated entry walked once (no columns): facts_note for each, and their record
 * hashes added to (*lo, *hi) when want_digest; 1, or 0 wherever the decode should decide (or on no
 * memory: *nomem). legacy_set_walk (legacy.c): a wrapper's inner message set as digest_legacy_set and
 * legacy_set_facts walk it, strictly (inner CRCs checked); `messages` is its scratch. v2_records_walk
 * (digest.c): a v2 records section as digest_v2_records and v2_records_facts walk it (count > 0). */
int legacy_set_walk(const uint8_t *d, int64_t end, int64_t wrapper_offset, int wrapper_magic, int has_lat,
                    int64_t lat, int want_digest, gbuf *messages, gbuf *scratch, facts_acc *a, uint64_t *lo,
                    uint64_t *hi, int *nomem);
int v2_records_walk(const uint8_t *d, int64_t end, int64_t count, int64_t base_offset, int64_t base_ts, int has_lat,
                    int64_t lat, int want_digest, gbuf *scratch, facts_acc *a, uint64_t *lo, uint64_t *hi,
                    int *nomem);

#endif
