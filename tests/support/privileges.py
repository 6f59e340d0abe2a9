"""A script that runs kfmt without root's file-access capabilities, so that file modes apply (the
permission tests mean nothing when root can read anything)."""
from __future__ import annotations

import textwrap

AS_UNPRIVILEGED = textwrap.dedent("""
    # Run kfmt without the capabilities that let root read any file (CAP_DAC_OVERRIDE,
    # CAP_DAC_READ_SEARCH): file modes then apply, as for any other user.
    import ctypes, sys
    libc = ctypes.CDLL(None, use_errno=True)
    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]
    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]
    header, data = Header(0x20080522, 0), (Data * 2)()
    if libc.capget(ctypes.byref(header), data) == 0:
        keep = ~((1 << 1) | (1 << 2)) & 0xFFFFFFFF
        data[0].effective &= keep
        data[0].permitted &= keep
        assert libc.capset(ctypes.byref(header), data) == 0, ctypes.get_errno()
    from kfmt.cli import main
    sys.exit(main(sys.argv[1:]))
""")
