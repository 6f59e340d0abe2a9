/* kfmt._speedups: compiled kernels for kfmt's hot paths. Python code never imports this module
 * directly: kfmt.format.kernels selects it (or the pure-Python reference when it is missing or when
 * KFMT_PURE_PYTHON=1) and wraps its results in kfmt's types. */
#include "native.h"
#include "xxh3.h"

PyObject *DecodeError = NULL;

static PyObject *py_configure(PyObject *self, PyObject *args) {
    PyObject *importer, *schema;
    if (!PyArg_ParseTuple(args, "OO", &importer, &schema)) return NULL;
    Py_XSETREF(import_record_batch, Py_NewRef(importer));
    Py_XSETREF(record_schema, Py_NewRef(schema));
    Py_RETURN_NONE;
}

static PyObject *py_crc32c(PyObject *self, PyObject *args) {
    Py_buffer buf;
    if (!PyArg_ParseTuple(args, "y*", &buf)) return NULL;
    uint32_t crc;
    Py_BEGIN_ALLOW_THREADS
    crc = crc32c_update(0, buf.buf, (size_t)buf.len);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&buf);
    return PyLong_FromUnsignedLong(crc);
}

static PyObject *py_crc32(PyObject *self, PyObject *args) {
    Py_buffer buf;
    if (!PyArg_ParseTuple(args, "y*", &buf)) return NULL;
    uint32_t crc;
    Py_BEGIN_ALLOW_THREADS
    crc = crc32_update(0, buf.buf, (size_t)buf.len);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&buf);
    return PyLong_FromUnsignedLong(crc);
}

/* xxh3_128(data) -> int: the record hash of the content digest, exposed so tests can hold it against
 * the xxhash package (xxh3_128_intdigest: high * 2**64 + low) */
static PyObject *py_xxh3_128(PyObject *self, PyObject *args) {
    Py_buffer buf;
    if (!PyArg_ParseTuple(args, "y*", &buf)) return NULL;
    kfmt_hash128 h;
    if (buf.len < (1 << 16)) {
        h = kfmt_xxh3_128(buf.buf, (size_t)buf.len); /* shorter than the GIL round trip is worth */
    } else {
        Py_BEGIN_ALLOW_THREADS
        h = kfmt_xxh3_128(buf.buf, (size_t)buf.len);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&buf);
    uint8_t little_endian[16];
    for (int i = 0; i < 8; i++) {
        little_endian[i] = (uint8_t)(h.lo >> (8 * i));
        little_endian[8 + i] = (uint8_t)(h.hi >> (8 * i));
    }
    return _PyLong_FromByteArray(little_endian, 16, 1, 0);
}

static PyObject *py_xxh3_select(PyObject *self, PyObject *args) {
    const char *name;
    if (!PyArg_ParseTuple(args, "s", &name)) return NULL;
    return PyBool_FromLong(kfmt_xxh3_select(name));
}

static PyObject *py_implementation(PyObject *self, PyObject *args) {
    return Py_BuildValue("{ssssss}", "crc32c", crc32c_implementation(), "crc32", crc32_implementation(), "xxh3",
                         kfmt_xxh3_implementation());
}

static PyMethodDef methods[] = {
    {"configure", py_configure, METH_VARARGS,
     "configure(import_record_batch, record_schema): how record columns become pyarrow batches"},
    {"crc32c", py_crc32c, METH_VARARGS, "crc32c(data) -> CRC-32C (v2 batches)"},
    {"crc32", py_crc32, METH_VARARGS, "crc32(data) -> CRC-32 (v0/v1 messages)"},
    {"xxh3_128", py_xxh3_128, METH_VARARGS, "xxh3_128(data) -> int: XXH3-128, seed 0 (the record hash)"},
    {"xxh3_select", py_xxh3_select, METH_VARARGS,
     "xxh3_select(name) -> bool: run XXH3's long loop as scalar, sse2, avx2 or avx512f (tests); False: not here"},
    {"implementation", py_implementation, METH_NOARGS, "which code paths this build uses"},
    {"decode_v2_records", py_decode_v2_records, METH_VARARGS,
     "decode_v2_records(data, count, base_offset, base_timestamp, log_append_time) -> RecordBatch"},
    {"encode_v2_bodies", py_encode_v2_bodies, METH_VARARGS,
     "encode_v2_bodies(records, table) -> (bodies, sizes): the records sections of many v2 batches at once"},
    {"frame_v2_batches", py_frame_v2_batches, METH_VARARGS,
     "frame_v2_batches(sections, table) -> (entries, sizes, crcs): v2 batches framed around records sections"},
    {"encode_v2_records", py_encode_v2_records, METH_VARARGS,
     "encode_v2_records(records, base_offset, base_timestamp) -> bytes"},
    {"record_hashes_sum", py_record_hashes_sum, METH_VARARGS,
     "record_hashes_sum(records) -> (high, low): the content digest's sum of record hashes"},
    {"digest_v2_batches", py_digest_v2_batches, METH_VARARGS,
     "digest_v2_batches(data, rows, start, stop, base, check_crc) -> (stopped_at, records, digest_high, "
     "digest_low, first_offset): uncompressed v2 data batches checked and digested in place"},
    {"decode_v2_batches", py_decode_v2_batches, METH_VARARGS,
     "decode_v2_batches(data, rows, start, stop, base, check_crc) -> (stopped_at, batch): the records of "
     "uncompressed v2 data batches as one column block"},
    {"decode_v2_payloads", py_decode_v2_payloads, METH_VARARGS,
     "decode_v2_payloads(payloads, facts) -> (stopped_at, batch): inflated v2 records sections as one column block"},
    {"decode_legacy_payloads", py_decode_legacy_payloads, METH_VARARGS,
     "decode_legacy_payloads(payloads, facts, check_crc) -> (stopped_at, batch, counts): inflated v0/v1 inner "
     "message sets as one column block"},
    {"digest_v2_records", py_digest_v2_records, METH_VARARGS,
     "digest_v2_records(payload, count, base_offset, base_timestamp, log_append_time) -> (records, "
     "digest_high, digest_low, first_offset): a v2 batch's records digested without columns"},
    {"key_md5s", py_key_md5s, METH_VARARGS,
     "key_md5s(records, indices) -> bytes: the MD5 of each named record's key (the offset map's key hash)"},
    {"offset_map_put", py_offset_map_put, METH_VARARGS,
     "offset_map_put(table, hashes, offsets, max_entries, entries) -> (taken, entries)"},
    {"offset_map_get", py_offset_map_get, METH_VARARGS, "offset_map_get(table, hashes) -> bytes of int64"},
    {"scan_frames", py_scan_frames, METH_VARARGS,
     "scan_frames(data, pos, end, base, magics, max_rows) -> (rows, count, next_pos)"},
    {"frame_layout", py_frame_layout, METH_NOARGS, "frame_layout() -> (itemsize, [(field, offset)])"},
    {"index_frames", py_index_frames, METH_VARARGS,
     "index_frames(rows, start, stop, state) -> (stopped_at, state, offset_entries, time_entries)"},
    {"frames_describe", py_frames_describe, METH_VARARGS,
     "frames_describe(data, rows, start, stop, base) -> the first row whose entry does not begin as it says"},
    {"decode_legacy_messages", py_decode_legacy_messages, METH_VARARGS,
     "decode_legacy_messages(data, rows, start, stop, base, check_crc) -> (stopped_at, batch, crc_valid)"},
    {"decode_legacy_set", py_decode_legacy_set, METH_VARARGS,
     "decode_legacy_set(data, wrapper_offset, wrapper_magic, log_append_time, check_crc) -> (batch, infos)"},
    {"legacy_wrapper", py_legacy_wrapper, METH_VARARGS,
     "legacy_wrapper(entry) -> (offset, magic, attributes, crc, crc_valid, timestamp, value_at, value_len)"},
    {"message_info_layout", py_message_info_layout, METH_NOARGS,
     "message_info_layout() -> (itemsize, [(field, offset)])"},
    {"encode_legacy_messages", py_encode_legacy_messages, METH_VARARGS,
     "encode_legacy_messages(records, magic, base_offset, log_append_time) -> bytes"},
    {"decode_avro", py_decode_avro, METH_VARARGS,
     "decode_avro(ops, roots, symbols, defaults, nslots, data, starts, lengths, which) -> ([(count, valid, "
     "offsets, values)], [(row, reason)]) or NotImplemented: Avro datums, each by its writer schema's "
     "program, into the Arrow buffers of the table type (plugins/values/avro_program.py)"},
    {"json_record_lines", py_json_record_lines, METH_VARARGS,
     "json_record_lines(records, skip, timestamp_type_json, leader_epoch_json, where_json) -> bytes: "
     "kfmt cat's JSON lines"},
    {"v2_record_lines", py_v2_record_lines, METH_VARARGS,
     "v2_record_lines(records, base_offset, base_sequence, timestamp_name, print_data_log) -> bytes: "
     "kafka-dump-log's record lines"},
    {"records_keep_rules", py_records_keep_rules, METH_VARARGS,
     "records_keep_rules(records, base_offset, last_offset, wrapper, max_timestamp) -> bool: the record "
     "checks of kfmt verify find nothing"},
    {"clean_entries", py_clean_entries, METH_VARARGS,
     "clean_entries(data, rows, start, stop, base) -> (stopped_at, records): entries verify finds nothing "
     "wrong with"},
    {"digest_legacy_set", py_digest_legacy_set, METH_VARARGS,
     "digest_legacy_set(data, wrapper_offset, wrapper_magic, log_append_time, check_crc) -> (records, "
     "digest_high, digest_low, first_offset): a wrapper's inner set digested without columns"},
    {"digest_legacy_messages", py_digest_legacy_messages, METH_VARARGS,
     "digest_legacy_messages(data, rows, start, stop, base, check_crc) -> (stopped_at, records, digest_high, "
     "digest_low, first_offset): uncompressed v0/v1 messages checked and digested in place"},
    {"upgrade_legacy_messages", py_upgrade_legacy_messages, METH_VARARGS,
     "upgrade_legacy_messages(data, rows, start, stop, base, check_crc, out_position, rebatch, "
     "max_batch_bytes, close_last) -> (stopped_at, refused, batches, rows, (records, digest_high, digest_low))"},
    {"entry_facts", py_entry_facts, METH_VARARGS,
     "entry_facts(data, rows, start, stop, base) -> (stopped_at, (records, first_offset, last_offset, "
     "min_timestamp, max_timestamp, offsets_increasing, inner_magics)): kfmt info's facts of uncompressed "
     "entries, checked in place"},
    {"v2_records_facts", py_v2_records_facts, METH_VARARGS,
     "v2_records_facts(payload, count, base_offset, base_timestamp, log_append_time) -> facts (as "
     "entry_facts'): a v2 batch's records' facts"},
    {"legacy_set_facts", py_legacy_set_facts, METH_VARARGS,
     "legacy_set_facts(data, wrapper_offset, wrapper_magic, log_append_time, check_crc) -> facts (as "
     "entry_facts'): a wrapper's inner set's facts"},
    {"compressed_spans", py_compressed_spans, METH_VARARGS,
     "compressed_spans(data, rows, start, stop, base) -> (stopped_at, spans): compressed data entries checked "
     "before inflating, and where their compressed bytes lie"},
    {"entries_digest", py_entries_digest, METH_VARARGS,
     "entries_digest(data, rows, start, stop, base) -> (stopped_at, digest_high, digest_low): entries checked "
     "as log recovery checks them (CRC over the stored bytes) and their bytes digested, never inflated"},
    {"walk_inflated", py_walk_inflated, METH_VARARGS,
     "walk_inflated(spans, payloads, want_digest) -> (stopped_at, facts, digest_high, digest_low): inflated "
     "entries' records walked without columns"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "kfmt._speedups",
                                    "Compiled kernels for kfmt (selected by kfmt.format.kernels).", -1, methods};

PyMODINIT_FUNC PyInit__speedups(void) {
    crc_init();
    kfmt_xxh3_init();
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    DecodeError = PyErr_NewException("kfmt._speedups.DecodeError", PyExc_ValueError, NULL);
    if (DecodeError == NULL || PyModule_AddObjectRef(m, "DecodeError", DecodeError) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
