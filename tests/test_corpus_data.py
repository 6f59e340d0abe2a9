"""The corpus in this checkout is what the broker wrote: every partition directory holds exactly the
files, of exactly the sizes, that the `files.txt` beside it listed when the data was copied off the
broker's disk. A damaged checkout (a line-end conversion, a large-file filter, a lost empty file)
fails here by name instead of as a puzzling difference in some reader's test."""
from __future__ import annotations

import json

import pytest
from support.corpus import REALKAFKA

LISTINGS = sorted(REALKAFKA.rglob("*.truth/files.txt"))


def listing(path) -> dict[str, int]:
    sizes = {}
    for line in path.read_text().splitlines():
        size, name = line.split(" ", 1)
        sizes[name] = int(size)
    return sizes


def test_every_partition_directory_has_its_listing():
    listed = {p.parent.parent / p.parent.name.removesuffix(".truth") for p in LISTINGS}
    partitions = {p.parent for p in REALKAFKA.rglob("partition.metadata")
                  if "_retention" not in p.parts}  # retention cases list their files in truth.json
    assert partitions <= listed, sorted(str(p.relative_to(REALKAFKA)) for p in partitions - listed)
    assert len(listed) >= 18


@pytest.mark.parametrize("files_txt", LISTINGS, ids=lambda p: str(p.parent.relative_to(REALKAFKA)).removesuffix(".truth"))
def test_partition_directory_is_as_the_broker_left_it(files_txt):
    directory = files_txt.parent.parent / files_txt.parent.name.removesuffix(".truth")
    on_disk = {p.name: p.stat().st_size for p in directory.iterdir() if p.is_file()}
    assert on_disk == listing(files_txt)


@pytest.mark.parametrize("case", sorted(p.name for p in (REALKAFKA / "_retention").iterdir()))
def test_retention_input_is_as_the_broker_loaded_it(case):
    truth = json.loads((REALKAFKA / "_retention" / case / "truth.json").read_text())
    directory = REALKAFKA / "_retention" / case / "input"
    for segment in truth["input_segments"]:
        log = directory / f"{segment['base']:020d}.log"
        assert log.stat().st_size == segment["log_bytes"], log.name
