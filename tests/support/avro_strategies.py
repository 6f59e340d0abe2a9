"""Hypothesis pieces shared by the Avro tests (tests/rows/test_avro_kernel.py, test_avro_resolution.py):
unique names for named types, and enums and fixed of random shapes with their values."""
from __future__ import annotations

from hypothesis import strategies as st


class Names:
    """Unique names for a generated schema's named types (Avro refuses a name defined twice)."""

    def __init__(self):
        self.n = 0

    def next(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"


@st.composite
def enums(draw, names: Names):
    """(an enum schema, a strategy of its symbols)."""
    symbols = [f"S{i}" for i in range(draw(st.integers(1, 4)))]
    return {"type": "enum", "name": names.next("E"), "symbols": symbols}, st.sampled_from(symbols)


@st.composite
def fixeds(draw, names: Names, max_size: int = 5):
    """(a fixed schema, a strategy of its values), sizes from 0."""
    size = draw(st.integers(0, max_size))
    return {"type": "fixed", "name": names.next("F"), "size": size}, st.binary(min_size=size, max_size=size)
