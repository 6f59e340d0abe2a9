"""The report's charts as inline SVG text, drawn here from numbers: no script, no library, nothing
fetched. Every mark carries a <title> (the browser's tooltip) with the exact numbers behind it."""
from __future__ import annotations

from html import escape

MAGIC_HUES = {0: 4, 1: 32, 2: 212}  # old formats in warm colours (they need `upgrade`), v2 in blue
CODEC_LIGHTNESS = {"none": 38, "gzip": 48, "snappy": 56, "lz4": 64, "zstd": 72}
WIDTH = 720
STATE_COLOURS = {"below log start": "#b5b5b5", "cleaned": "#4f8fc9", "dirty": "#59a65c",
                 "active": "#e08a1e", "unreadable": "#c8322b"}
GAP_COLOUR = "#8e3fb5"


def format_colour(magic: int, codec: str) -> str:
    return f"hsl({MAGIC_HUES.get(magic, 280)},62%,{CODEC_LIGHTNESS.get(codec, 50)}%)"


def human_bytes(n: int | float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def stacked_bars(rows: list[tuple[str, list[tuple[str, int, str]]]], unit: str) -> str:
    """One horizontal bar per row (label, [(part label, value, colour)]), parts side by side, all bars on
    one scale; `unit` names the values in the tooltips ("bytes", "records")."""
    label_w, bar_h, gap = 190, 16, 6
    biggest = max((sum(v for _, v, _ in parts) for _, parts in rows), default=0) or 1
    scale = (WIDTH - label_w - 110) / biggest
    out = []
    for i, (label, parts) in enumerate(rows):
        y = i * (bar_h + gap)
        out.append(f'<text x="{label_w - 6}" y="{y + bar_h - 4}" text-anchor="end">'
                   f"{escape(_clip(label, 28))}</text>")
        x = label_w
        for name, value, colour in parts:
            w = value * scale
            out.append(f'<rect x="{x:.1f}" y="{y}" width="{max(w, 0.5):.1f}" height="{bar_h}" fill="{colour}">'
                       f'<title>{escape(label)}: {escape(name)}: {value:,} {unit}</title></rect>')
            x += w
        total = sum(v for _, v, _ in parts)
        shown = human_bytes(total) if unit == "bytes" else f"{total:,}"
        out.append(f'<text x="{x + 5:.1f}" y="{y + bar_h - 4}">{shown}</text>')
    height = max(1, len(rows)) * (bar_h + gap)
    return _svg(height, "".join(out), f"{unit} per topic by message format and codec")


def legend(items: list[tuple[str, str]]) -> str:
    return "".join(f'<span class="key"><i style="background:{c}"></i>{escape(label)}</span>' for label, c in items)


def segment_state(seg: dict) -> str:
    if seg["unreadable_at"] is not None:
        return "unreadable"
    if seg["below_log_start"]:
        return "below log start"
    if seg["active"]:
        return "active"
    return "cleaned" if seg["cleaned"] else "dirty"


def offset_strip(p: dict) -> str:
    """The partition's offsets from its first segment's base to its log end: one block per segment
    (its base offset to the next one's), the gaps between segments in red, the log start a line."""
    segs = p["segment_list"]
    if not segs:
        return ""
    low = segs[0]["base_offset"]
    high = max(p.get("log_end_offset") or 0, segs[-1]["last_offset"] or 0, segs[-1]["base_offset"]) + 1
    scale = (WIDTH - 20) / max(high - low, 1)
    out = []
    for i, s in enumerate(segs):
        end = segs[i + 1]["base_offset"] if i + 1 < len(segs) else high
        state = segment_state(s)
        out.append(f'<rect class="seg" x="{10 + (s["base_offset"] - low) * scale:.1f}" y="8" '
                   f'width="{max((end - s["base_offset"]) * scale - 1, 1):.1f}" height="18" '
                   f'fill="{STATE_COLOURS[state]}"><title>{escape(_segment_title(s, state))}</title></rect>')
    for g in p["segment_gaps"]:
        out.append(f'<rect x="{10 + (g["after"] + 1 - low) * scale:.1f}" y="4" '
                   f'width="{max(g["missing"] * scale, 1.5):.1f}" height="26" fill="{GAP_COLOUR}">'
                   f'<title>offsets {g["after"] + 1}..{g["before"] - 1} in no segment ({g["missing"]:,})'
                   "</title></rect>")
    if p.get("log_start_offset") is not None:
        x = 10 + (p["log_start_offset"] - low) * scale
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="0" y2="34" stroke="#222" stroke-width="2">'
                   f'<title>log start offset {p["log_start_offset"]:,}</title></line>')
    end = p.get("log_end_offset") if p.get("log_end_offset") is not None else high
    out.append(f'<text x="10" y="46">{low:,}</text><text x="{WIDTH - 10}" y="46" text-anchor="end">{end:,}</text>')
    return _svg(50, "".join(out), f"{p['name']}: segments by offset")


def time_axis(p: dict) -> str:
    """One row per segment from its first timestamp to its largest (what time retention compares),
    coloured by its state; segments without timestamps (message format v0) are left out."""
    segs = [s for s in p["segment_list"] if s["largest_timestamp"] is not None]
    if not segs:
        return '<p class="muted">No timestamps in the headers (message format v0): no time axis.</p>'
    low = min(s["first_timestamp"] if s["first_timestamp"] is not None else s["largest_timestamp"] for s in segs)
    high = max(s["largest_timestamp"] for s in segs)
    scale = (WIDTH - 20) / max(high - low, 1)
    row = max(2.0, min(12.0, 300 / len(segs)))
    out = []
    for i, s in enumerate(segs):
        first = s["first_timestamp"] if s["first_timestamp"] is not None else s["largest_timestamp"]
        state = segment_state(s)
        out.append(f'<rect x="{10 + (first - low) * scale:.1f}" y="{i * row:.1f}" '
                   f'width="{max((s["largest_timestamp"] - first) * scale, 2):.1f}" height="{max(row - 1, 1):.1f}" '
                   f'fill="{STATE_COLOURS[state]}"><title>{escape(_segment_title(s, state))}</title></rect>')
    top = len(segs) * row
    out.append(f'<text x="10" y="{top + 14:.0f}">{escape(when(low))}</text>'
               f'<text x="{WIDTH - 10}" y="{top + 14:.0f}" text-anchor="end">{escape(when(high))}</text>')
    return _svg(top + 18, "".join(out), f"{p['name']}: segments by time")


def when(ms: int | None) -> str:
    import datetime

    if ms is None:
        return "-"
    try:
        return datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (ValueError, OverflowError, OSError):
        return str(ms)


def _segment_title(s: dict, state: str) -> str:
    return (f"segment {s['base_offset']:020d}.log ({state}): offsets {s['first_offset']}..{s['last_offset']}, "
            f"{s['size']:,} bytes, {s['entries']:,} entries, time {when(s['first_timestamp'])} .. "
            f"{when(s['largest_timestamp'])}")


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[:n - 1] + "\u2026"


def _svg(height: float, body: str, label: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{escape(label)}" width="{WIDTH}" '
            f'height="{height:.0f}" viewBox="0 0 {WIDTH} {height:.0f}">{body}</svg>')
