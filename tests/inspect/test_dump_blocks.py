"""kafka-dump-log's record lines made a batch at a time (kfmt.inspect.dump.text_blocks, the compiled
v2_record_lines) are the lines the per-record path makes: on hypothesis-made segments (headers, null
keys and values, bytes that are not UTF-8), with and without --print-data-log. (tests/test_dump.py
holds both against Kafka's own output on the corpus.)"""
from __future__ import annotations

import io

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.kernels import NATIVE_USERS, SETTINGS, both, record_columns, segments
from support.v2_batches import v2_batch

from kfmt.inspect.dump import DumpOptions, dump_files
from kfmt.inspect.dump.text import TextSink

DUMP_NATIVE = NATIVE_USERS + ["kfmt.inspect.dump.text_blocks"]


def dumped(path, print_data_log: bool) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    options = DumpOptions(deep_iteration=True, print_data_log=print_data_log)
    dump_files([str(path)], options, TextSink(out, err, options))
    return out.getvalue(), err.getvalue()


def same_both_ways(path, print_data_log: bool):
    fast, reference = both(lambda: dumped(path, print_data_log), DUMP_NATIVE)
    assert fast == reference
    return fast


@SETTINGS
@given(segments(), st.booleans())
def test_dump_lines_on_made_up_segments(tmp_path_factory, data, print_data_log):
    log = tmp_path_factory.mktemp("d") / "00000000000000000000.log"
    log.write_bytes(data)
    same_both_ways(log, print_data_log)


@SETTINGS
@given(record_columns(max_size=8), st.integers(-1, 2**31 - 1), st.booleans(), st.booleans())
def test_dump_lines_of_v2_batches(tmp_path_factory, records, base_sequence, lat, print_data_log):
    """Sequences that wrap past INT32_MAX, LogAppendTime, offsets that skip (compacted data)."""
    entry = bytearray(v2_batch(records, 100, lat))
    entry[53:57] = base_sequence.to_bytes(4, "big", signed=True)
    from kfmt.format.wire import crc32c
    entry[17:21] = crc32c(bytes(entry[21:])).to_bytes(4, "big")
    log = tmp_path_factory.mktemp("d") / "00000000000000000100.log"
    log.write_bytes(bytes(entry) + v2_batch(records, 500, lat))
    same_both_ways(log, print_data_log)


@pytest.mark.needs("speedups")
def test_the_block_path_is_taken(tmp_path):
    from kfmt.format.model import make_records
    from kfmt.inspect.dump import text_blocks

    calls = []
    original = text_blocks.record_lines
    text_blocks.record_lines = lambda *a: calls.append(1) or original(*a)
    try:
        log = tmp_path / "00000000000000000000.log"
        log.write_bytes(v2_batch(make_records([0, 1], [5, 6], [b"k", None], [b"v\xc3\xa9", b"w"]), 0, False))
        text, _ = dumped(log, True)
    finally:
        text_blocks.record_lines = original
    assert calls == [1]
    assert "| offset: 1 CreateTime: 6 keySize: -1 valueSize: 1 sequence: -1 headerKeys: [] payload: w\n" in text


@pytest.mark.needs("speedups")
def test_ascii_blocks_written_as_bytes_keep_the_order_of_the_text(tmp_path):
    """A stream with a byte buffer takes the ASCII blocks as bytes: the batch lines written as text
    between them must still come in order."""
    from kfmt.format.model import make_records

    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(v2_batch(make_records([0, 1], [5, 6], [b"k", None], [b"v", b"w"]), 0, False)
                    + v2_batch(make_records([2], [7], [b"k"], [b"x\xc3\xa9"]), 2, False))
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="utf-8", newline="")
    options = DumpOptions(deep_iteration=True, print_data_log=True)
    dump_files([str(log)], options, TextSink(out, io.StringIO(), options))
    out.flush()
    assert raw.getvalue().decode("utf-8") == dumped(log, True)[0]
