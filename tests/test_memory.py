"""kfmt.memory: with the command line's malloc settings a freed buffer of a few MB is reused, so
allocating the next one costs few page faults (the kernel's own count, getrusage), where glibc's
defaults unmap it and fault the next one in afresh whenever it is larger than any freed before (its
mmap threshold follows the largest block freed): as the upgrade kernel's outputs are, a few MB each,
no two of the same size."""
from __future__ import annotations

import subprocess
import sys

import pytest

FAULTS = '''
import resource, sys
from kfmt.memory import keep_freed_memory
if sys.argv[1] == "tuned":
    assert keep_freed_memory()
SIZE = 3_500_000
def churn(first, times):
    for i in range(first, first + times):
        size = SIZE + i * 3 * 4096  # each a little larger than the last
        buf = bytearray(size)
        buf[::4096] = b"x" * len(range(0, size, 4096))  # every page touched, as a kernel's output is
        del buf
churn(0, 5)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
churn(5, 50)
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
'''


def faults(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", FAULTS, mode], capture_output=True, text=True, check=True)
    return int(out.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc (Linux)")
def test_freed_buffers_are_reused_without_page_faults():
    pages = 50 * 3_500_000 // 4096
    assert faults("default") >= pages // 2  # the defaults fault every page in again
    assert faults("tuned") < pages // 20
