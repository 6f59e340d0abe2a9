"""kfmt.format.compress_runs: uncompressed v2 batches given a codec without decoding their records
give the very bytes the v2 format plugin's encode writes for the same batch and codec (what the
one-by-one path of kfmt recompress wrote), and a reader decodes them to the same records."""
from __future__ import annotations

import pytest
from support.corpus import REALKAFKA

from kfmt.format import compress_runs, legacy_runs, segment
from kfmt.format.frames import header_of
from kfmt.plugin import registry

CODECS = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def upgraded(name: str):
    """Kafka 4.0's uncompressed v2 batches of a legacy corpus partition's one-message entries."""
    log = sorted((REALKAFKA / name).glob("*.log"))[0]
    data = log.read_bytes()
    rows = next(segment.FrameScanner(data, str(log)).chunks())
    assert (rows["compression"] == 0).all() and (rows["magic"] < 2).all()
    return legacy_runs.upgrade_run(data, rows, str(log), out_position=100)


# every codec at its default level, and each that has levels at level 3 (snappy has none)
CODEC_LEVELS = [(codec, None) for codec in sorted(CODECS)] + [(c, 3) for c in sorted(CODECS) if c != "snappy"]


@pytest.mark.parametrize(("codec", "level"), CODEC_LEVELS)
@pytest.mark.parametrize("name", ["v0-none-0", "v1-none-0"])
def test_the_encoders_bytes_and_a_readers_records(name, codec, level):
    piece = upgraded(name)
    entries, rows = compress_runs.compressed(piece.entries, piece.rows, CODECS[codec], level)
    fmt = registry.get().format_for(2)
    expected, at = [], 0
    for row in piece.rows.tolist():
        plain = segment.decode(piece.entries, header_of(row), "upgraded", base=100)
        expected.append(fmt.encode(plain.header.replace(compression=CODECS[codec]), plain.records,
                                   level=level))
        out_header = header_of(rows[at].item())
        assert (out_header.position, out_header.size) == (100 + sum(map(len, expected[:-1])),
                                                          len(expected[-1]))
        again = segment.decode(entries, out_header, "compressed", base=100)
        assert again.header.compression == CODECS[codec] and again.crc_valid is not False
        assert again.records.equals(plain.records)
        at += 1
    assert entries == b"".join(expected)
    scanned = next(segment.FrameScanner(entries, "compressed").chunks()).copy()
    scanned["position"] += 100
    assert scanned.tolist() == rows.tolist()  # the rows given are the frames a reader finds
