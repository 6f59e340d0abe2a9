"""How a kfmt process allocates: buffers of a few MB, freed and allocated again thousands of times
(a kernel's output, a chunk of frames, a write buffer), are kept for reuse instead of being given
back to the kernel.

glibc's malloc serves blocks above its mmap threshold (128 KiB, raised up to 32 MiB as such blocks
are freed) with mmap and unmaps them when freed, and trims the top of its heap beyond 128 KiB free:
each next block is then fresh pages, faulted in one by one, which on the project's VM cost 1.5 to
3 ms of CPU per MB (kfmt/storage/direct_io.py). The upgrade of 537 MB of uncompressed v1 spent 0.25 s
of its 1.45 s of CPU in those faults and unmaps (system time 0.42 -> 0.15 s with the settings below;
peak RSS 221 -> 227 MB). What the process keeps is what it used at its peak, which it already had.

The command line sets this for its process and the pool's workers; a library user's process is left
as its owner set it up. Elsewhere than glibc there is nothing to do.
"""
from __future__ import annotations

# mallopt(3) parameters
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3

MMAP_THRESHOLD = 64 << 20  # blocks up to this come from the heap and are reused once freed
TRIM_THRESHOLD = 256 << 20  # free memory at the top of the heap kept up to this


def keep_freed_memory() -> bool:
    """Tune this process's malloc as the module docstring says; False where it is not glibc's."""
    import ctypes  # already imported by every command that does work (numpy, pyarrow)

    try:
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
