"""The report page's detailed sections: internal topics, verify's findings and one block per partition
(kfmt.inspect.report.html puts them on the page)."""
from __future__ import annotations

import re
from html import escape

from kfmt.inspect.report.charts import (
    GAP_COLOUR,
    STATE_COLOURS,
    human_bytes,
    legend,
    offset_strip,
    segment_state,
    time_axis,
    when,
)
from kfmt.inspect.report.markup import number, table

SEGMENT_FILE = re.compile(r"(\d{20})\.(log|index|timeindex|txnindex|snapshot)(\.\w+)?$")


def partition_id(name: str) -> str:
    return "p-" + re.sub(r"\s", "_", name)


def segment_id(partition: str, base_offset: int) -> str:
    return f"{partition_id(partition)}-{base_offset}"


def internal_section(internal: dict) -> str:
    parts = [_part("Consumer groups (__consumer_offsets)", internal.get("groups"), _groups),
             _part("Transactional ids (__transaction_state)", internal.get("transactions"), _transactions),
             _part("KRaft metadata (__cluster_metadata)", internal.get("cluster"), _cluster)]
    shown = [p for p in parts if p]
    if not shown:
        return ('<h2 id="internal">Internal topics</h2><p class="muted">No __consumer_offsets, __transaction_state '
                "or __cluster_metadata here.</p>")
    return '<h2 id="internal">Internal topics</h2>' + "".join(shown)


def _part(title: str, section: dict | None, body) -> str:
    """An internal topic's part: nothing when the topic is not there, its one-line error when it
    could not be read, else what `body` makes of it."""
    if section is None:
        return ""
    head = f"<h3>{escape(title)}</h3>"
    if "error" in section:
        return head + f'<p class="bad">Could not be read: {escape(section["error"])}</p>'
    return head + body(section)


def _groups(g: dict) -> str:
    rows = [[escape(x["group"]), escape(x["kind"]), f"{x['partitions']:,}", escape(", ".join(x["topics"]))]
            for x in g["groups"]]
    commits = [[escape(c["group"]), escape(c["topic"]), str(c["partition"]), f"{c['offset']:,}",
                escape(when(c["commitTimestamp"])), escape(c["groupType"])] for c in g["offsets"]]
    pending = (f'<p>{g["open_transactions"]:,} offset commit(s) wait for a transaction that has not ended '
               "(not counted).</p>") if g["open_transactions"] else ""
    return (f"<p>{len(rows):,} group(s), {len(commits):,} committed offset(s), as "
            "<code>kfmt offsets</code> lists them.</p>"
            + table(["group", "kind", "partitions committed", "topics"], rows, table_id="groups-table",
                    numeric=(2,)) + pending
            + "<details><summary>Every committed offset</summary>"
            + table(["group", "topic", "partition", "offset", "committed at", "kind"], commits,
                    table_id="offsets-table", numeric=(2, 3))
            + "</details>")


def _transactions(t: dict) -> str:
    rows = [[escape(x["transactional_id"]), str(x["producer_id"]), str(x["producer_epoch"]), escape(x["state"]),
             escape(", ".join(x["partitions"])), escape(when(x["last_update_ms"]))] for x in t["transactional_ids"]]
    return (f"<p>{len(rows):,} transactional id(s), each in the last state the coordinator wrote.</p>"
            + table(["transactional id", "producer id", "epoch", "state", "partitions", "last update"], rows,
                    table_id="transactions-table", numeric=(1, 2)))


def _cluster(c: dict) -> str:
    features = ", ".join(f"{escape(k)}={v}" for k, v in sorted(c["features"].items())) or "none recorded"
    rows = [[escape(x["name"]), f"<code>{escape(x['id'])}</code>", str(x["partitions"])] for x in c["topics"]]
    return (f'<p>metadata.version <b id="metadata-version">{number(c["metadata_version"])}</b>'
            f" &middot; features: {features} &middot; cluster id <code>{escape(str(c['cluster_id']))}</code>, "
            f"node {escape(str(c['node_id']))}</p>"
            + table(["topic", "topic id", "partitions"], rows, table_id="topics-table", numeric=(2,)))


ARCHIVE_NOTE = ("<p>This is an archive: it keeps no .index, .timeindex, .txnindex or producer snapshot, which "
                "<code>kfmt restore</code> regenerates from the segments (docs/archive.md), so what verify says "
                "of those files missing here is about files an archive never holds.</p>")


def _depth_note(depth: str | None) -> str:
    """Which of verify's two depths the findings come from, and how to get the other (docs/report.md)."""
    if depth == "deep":
        return ('<p id="verify-depth">Depth: deep (<code>--deep</code>): every compressed batch inflated '
                "and every record checked. Without <code>--deep</code> the report checks what a broker's "
                "log recovery checks, in about the time of <code>kfmt info</code>.</p>")
    return ('<p id="verify-depth">Depth: log recovery\'s checks (framing, each batch\'s CRC over its stored, '
            "still-compressed bytes, offsets, indexes and the other files); compressed batches are not "
            "inflated. <code>kfmt report --deep</code> (or <code>kfmt verify --deep</code>) checks every "
            "record too.</p>")


def findings_section(verify: dict | None, kind: str = "") -> str:
    if verify is None:
        return ('<h2 id="findings">What verify found</h2><p class="muted">Not verified (<code>--no-verify</code>): '
                "run <code>kfmt verify</code> or a report without that flag for the checks.</p>")
    s, findings = verify["summary"], verify["findings"]
    head = (f'<h2 id="findings">What verify found</h2><p>{s["errors"]:,} problem(s) and {s["notes"]:,} note(s) in '
            f'{s["partitions"]:,} partition(s), {s["segments"]:,} segment(s), {s["files"]:,} files read '
            "(<code>kfmt verify</code>; notes are genuine broker behaviour, never a problem).</p>"
            + _depth_note(s.get("depth")) + (ARCHIVE_NOTE if kind == "archive" else ""))
    if not findings:
        return head
    rows = [(f' id="{f["anchor"]}" class="finding {f["severity"]}"',
             [f'<span class="bad">{f["severity"]}</span>' if f["severity"] == "error" else f["severity"],
              escape(f["check"]), _finding_link(f), f'<code>{escape(f["file"])}</code>', number(f["position"], ""),
              number(f["offset"], ""), escape(f["message"])]) for f in findings]
    return head + table(["severity", "check", "partition", "file", "position", "offset", "message"], rows,
                        table_id="findings-table", numeric=(4, 5))


def _finding_link(f: dict) -> str:
    if not f["partition"]:
        return '<span class="muted">log directory</span>'
    m = SEGMENT_FILE.search(f["file"])
    target = segment_id(f["partition"], int(m[1])) if m else partition_id(f["partition"])
    return f'<a href="#{escape(target)}">{escape(f["partition"])}</a>'


def partitions_section(partitions: list[dict]) -> str:
    keys = legend(list(STATE_COLOURS.items()) + [("offsets in no segment", GAP_COLOUR)])
    return (f'<h2 id="partitions">Partitions</h2><p>Each partition\'s segments by offset and by time. {keys}</p>'
            + "".join(_partition(p) for p in partitions))


def _tags(p: dict) -> str:
    tags = []
    old = [f"v{f['magic']} {f['compression']}" for f in p.get("formats", ()) if f["magic"] < 2]
    tags += [escape(t) for t in old]
    if p["cleaner_offset"] is not None:
        tags.append("compacted")
    if p["transactional_batches"]:
        tags.append("transactional")
    if not p.get("records") and "info_error" not in p:
        tags.append("empty")
    out = "".join(f'<span class="tag">{t}</span>' for t in tags)
    if p.get("errors"):
        out += f'<span class="tag bad">{p["errors"]} problem(s)</span>'
    return out


def _partition(p: dict) -> str:
    name = p["name"]
    below = sum(1 for s in p["segment_list"] if s["below_log_start"])
    state = (f"<p>retention: {below} segment(s) wholly below the log start offset (deleted, not yet removed) "
             f"&middot; compaction: {_cleaner(p['cleaner_offset'])} &middot; {len(p['segment_gaps'])} gap(s) "
             f"between segments, {sum(s['gaps'] for s in p['segment_list']):,} inside them</p>")
    return (f'<details class="partition" id="{escape(partition_id(name))}" data-segments="{p["segments"]}">'
            f'<summary><b>{escape(name)}</b> &middot; <span class="segments">{p["segments"]:,} segments</span>, '
            f'{human_bytes(p["bytes"])}, {number(p.get("records"))} records{_tags(p)}</summary>'
            f"{_offsets(p)}{state}{offset_strip(p)}{time_axis(p)}{_segments_table(p)}{_own_findings(p)}</details>")


def _offsets(p: dict) -> str:
    if "info_error" in p:
        return f'<p class="bad">kfmt info stopped: {escape(p["info_error"])}</p>'
    control = f" (+{p['control_records']:,} control)" if p["control_records"] else ""
    return (f"<p>offsets: log start {number(p['log_start_offset'])}, log end {number(p['log_end_offset'])}; "
            "records "
            f"{number(p['first_offset'])}..{number(p['last_offset'])} &middot; {p['records']:,} records in "
            f"{p['batches']:,} batches{control} &middot; time {escape(when(p['min_timestamp']))} .. "
            f"{escape(when(p['max_timestamp']))}</p>")


def _cleaner(offset: int | None) -> str:
    # the checkpoint is the only on-disk sign of compaction: the topic's cleanup.policy is in its config
    return "no cleaner checkpoint" if offset is None else f"cleaned up to offset {offset:,} (cleaner checkpoint)"


def _segments_table(p: dict) -> str:
    rows = [(f' id="{escape(segment_id(p["name"], s["base_offset"]))}"',
             [f'<code>{s["base_offset"]:020d}.log</code>', escape(segment_state(s)),
              f'{number(s["first_offset"])}..{number(s["last_offset"])}', number(s["size"]), number(s["entries"]),
              escape(when(s["first_timestamp"])), escape(when(s["largest_timestamp"])), number(s["gaps"]),
              number(s["transactional_batches"]), number(s["control_batches"])]) for s in p["segment_list"]]
    head = ["segment", "state", "offsets", "bytes", "entries", "first timestamp", "largest timestamp",
            "gaps inside", "txn batches", "control batches"]
    return (f'<details><summary>{len(rows):,} segment(s)</summary>'
            + table(head, rows, css_class="segments-table", numeric=(2, 3, 4, 7, 8, 9)) + "</details>")


def _own_findings(p: dict) -> str:
    if not p.get("errors") and not p.get("notes"):
        return ""
    return (f'<p>verify: <a href="#findings">{p["errors"]} problem(s), {p["notes"]} note(s)</a> in this partition '
            "(listed under What verify found).</p>")
