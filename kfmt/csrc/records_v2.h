/* One record of a v2 batch (docs/format.md §4.4), parsed and checked as DefaultRecord.readFrom does.
 * Reference: kfmt/format/v2_records.py decode_records_reference: the same checks in the same
 * order, with the same messages and positions. Shared by the decode into columns (records_v2.c)
 * and the content-digest walk over a batch's bytes (digest.c), so both accept exactly the same
 * records. */
#ifndef KFMT_RECORDS_V2_H
#define KFMT_RECORDS_V2_H
#include "native.h"

typedef struct {
    int64_t ts_delta, off_delta;
    int64_t klen, vlen; /* < 0: null */
    const uint8_t *key, *value;
    int64_t hcount;
    int64_t headers_at, end; /* the record's headers lie in [headers_at, end) */
} v2_record;

/* Record i at d[*pos..end): 0 and *pos after it, or -1 with the error in e. The headers are checked
 * here; v2_next_header walks them again for whoever needs them. */
static inline int parse_v2_record(const uint8_t *d, int64_t *pos_io, int64_t end, int64_t i, v2_record *r,
                                  kerr *e) {
    int64_t pos = *pos_io, start = pos, length;
    if (read_varint(d, &pos, end, &length, e)) return -1;
    int64_t body = pos;
    if (length < 0 || body + length > end) {
        kerr_set(e, start, "record %lld declares %lld bytes but %lld remain in the batch", (long long)i,
                 (long long)length, (long long)(end - body));
        return -1;
    }
    int64_t rec_end = body + length;
    pos += 1; /* attributes (unused) */
    if (read_varlong(d, &pos, rec_end, &r->ts_delta, e) || read_varint(d, &pos, rec_end, &r->off_delta, e) ||
        read_varint(d, &pos, rec_end, &r->klen, e))
        return -1;
    if (r->klen >= 0) {
        if (pos + r->klen > rec_end) {
            kerr_set(e, start, "record %lld key of %lld bytes overruns its record", (long long)i,
                     (long long)r->klen);
            return -1;
        }
        r->key = d + pos;
        pos += r->klen;
    } else {
        r->key = NULL;
    }
    if (read_varint(d, &pos, rec_end, &r->vlen, e)) return -1;
    if (r->vlen >= 0) {
        if (pos + r->vlen > rec_end) {
            kerr_set(e, start, "record %lld value of %lld bytes overruns its record", (long long)i,
                     (long long)r->vlen);
            return -1;
        }
        r->value = d + pos;
        pos += r->vlen;
    } else {
        r->value = NULL;
    }
    if (read_varint(d, &pos, rec_end, &r->hcount, e)) return -1;
    if (r->hcount < 0 || r->hcount > rec_end - pos) {
        kerr_set(e, start, "record %lld has an invalid header count %lld", (long long)i, (long long)r->hcount);
        return -1;
    }
    r->headers_at = pos;
    for (int64_t h = 0; h < r->hcount; h++) {
        int64_t hklen, hvlen;
        if (read_varint(d, &pos, rec_end, &hklen, e)) return -1;
        if (hklen < 0 || pos + hklen > rec_end) {
            kerr_set(e, start, "record %lld has an invalid header key length %lld", (long long)i,
                     (long long)hklen);
            return -1;
        }
        pos += hklen;
        if (read_varint(d, &pos, rec_end, &hvlen, e)) return -1;
        if (hvlen >= 0) {
            if (pos + hvlen > rec_end) {
                kerr_set(e, start, "record %lld header value of %lld bytes overruns its record", (long long)i,
                         (long long)hvlen);
                return -1;
            }
            pos += hvlen;
        }
    }
    if (pos != rec_end) {
        kerr_set(e, start, "record %lld declares %lld bytes but its fields use %lld", (long long)i,
                 (long long)length, (long long)(pos - body));
        return -1;
    }
    r->end = rec_end;
    *pos_io = pos;
    return 0;
}

/* The next header of a record parse_v2_record accepted (*pos starts at r->headers_at); vlen < 0: a
 * null value. */
static inline void v2_next_header(const uint8_t *d, int64_t *pos, const v2_record *r, const uint8_t **key,
                                  int64_t *klen, const uint8_t **value, int64_t *vlen) {
    kerr unused;
    read_varint(d, pos, r->end, klen, &unused);
    *key = d + *pos;
    *pos += *klen;
    read_varint(d, pos, r->end, vlen, &unused);
    *value = d + *pos;
    if (*vlen > 0) *pos += *vlen;
}

#endif
