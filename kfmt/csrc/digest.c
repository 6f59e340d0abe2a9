/* The content digest's per-record part (kfmt/report.py, digest version 2): the sum modulo 2**128 of
 * the XXH3-128 hashes of each record's canonical form. Reference: kfmt.report.record_hashes_sum. */
#include "native.h"

#define XXH_INLINE_ALL
#include "xxhash.h"

static uint8_t *put_sized(uint8_t *p, const uint8_t *data, int64_t len, int is_null) {
    if (is_null) {
        put32(p, -1);
        return p + 4;
    }
    put32(p, (int32_t)len);
    memcpy(p + 4, data, (size_t)len);
    return p + 4 + len;
}

/* record_hashes_sum(records) -> int, or NotImplemented where the Python reference decides. */
PyObject *py_record_hashes_sum(PyObject *self, PyObject *args) {
    PyObject *records;
    if (!PyArg_ParseTuple(args, "O", &records)) return NULL;
    record_view v;
    int r = record_view_open(&v, records);
    if (r != 1) {
        if (r < 0) return NULL;
        Py_RETURN_NOTIMPLEMENTED;
    }
    uint64_t lo = 0, hi = 0;
    gbuf scratch = {0};
    int nomem = 0;
    Py_BEGIN_ALLOW_THREADS
    for (int64_t i = 0; i < v.n && !nomem; i++) {
        int64_t k = v.key0 + i, val = v.value0 + i, hl = v.hlist0 + i;
        int key_null = !bit_set(v.key_valid, k), value_null = !bit_set(v.value_valid, val);
        int64_t klen = key_null ? 0 : v.key_offsets[k + 1] - v.key_offsets[k];
        int64_t vlen = value_null ? 0 : v.value_offsets[val + 1] - v.value_offsets[val];
        int64_t h0 = v.header_list_offsets[hl], h1 = v.header_list_offsets[hl + 1];
        size_t size = 16 + 4 + (size_t)klen + 4 + (size_t)vlen + 4;
        for (int64_t j = h0; j < h1; j++) {
            int64_t hk = v.hkey0 + j, hv = v.hvalue0 + j;
            size += 8 + (size_t)(v.hkey_offsets[hk + 1] - v.hkey_offsets[hk]);
            if (bit_set(v.hvalue_valid, hv)) size += (size_t)(v.hvalue_offsets[hv + 1] - v.hvalue_offsets[hv]);
        }
        scratch.len = 0;
        if (gbuf_reserve(&scratch, size)) {
            nomem = 1;
            break;
        }
        uint8_t *p = scratch.data;
        put64(p, v.offsets[v.off0 + i]);
        put64(p + 8, v.timestamps[v.ts0 + i]);
        p = put_sized(p + 16, v.key_data + (key_null ? 0 : v.key_offsets[k]), klen, key_null);
        p = put_sized(p, v.value_data + (value_null ? 0 : v.value_offsets[val]), vlen, value_null);
        put32(p, (int32_t)(h1 - h0));
        p += 4;
        for (int64_t j = h0; j < h1; j++) {
            int64_t hk = v.hkey0 + j, hv = v.hvalue0 + j;
            p = put_sized(p, v.hkey_data + v.hkey_offsets[hk], v.hkey_offsets[hk + 1] - v.hkey_offsets[hk], 0);
            int hv_null = !bit_set(v.hvalue_valid, hv);
            p = put_sized(p, v.hvalue_data + (hv_null ? 0 : v.hvalue_offsets[hv]),
                          hv_null ? 0 : v.hvalue_offsets[hv + 1] - v.hvalue_offsets[hv], hv_null);
        }
        XXH128_hash_t h = XXH3_128bits(scratch.data, (size_t)(p - scratch.data));
        uint64_t before = lo;
        lo += h.low64;
        hi += h.high64 + (lo < before); /* mod 2**128: the carry out of `hi` is dropped */
    }
    Py_END_ALLOW_THREADS
    gbuf_free(&scratch);
    record_view_release(&v);
    if (nomem) return PyErr_NoMemory();
    return Py_BuildValue("KK", (unsigned long long)hi, (unsigned long long)lo);
}
