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

SEGMENT_FILE = re.compile(r"(\d{20})\.(log|index|timeindex|txnindex|snapshot)(\.\w+)?$")


def partition_id(name: str) -> str:
    return "p-" + re.sub(r"\s", "_", name)


def segment_id(partition: str, base_offset: int) -> str:
    return f"{partition_id(partition)}-{base_offset}"


def _table(head: list[str], rows: list[list[str]], table_id: str, numeric=()) -> str:
    th = "".join(f'<th{" class=n" if i in numeric else ""}>{escape(h)}</th>' for i, h in enumerate(head))
    body = "".join("<tr>" + "".join(f'<td{" class=n" if i in numeric else ""}>{c}</td>' for i, c in enumerate(r))
                   + "</tr>" for r in rows)
    return f'<table id="{table_id}"><tr>{th}</tr>{body}</table>'


def internal_section(internal: dict) -> str:
    parts = [_groups(internal.get("groups")), _transactions(internal.get("transactions")),
             _cluster(internal.get("cluster"))]
    shown = [p for p in parts if p]
    if not shown:
        return ('<h2 id="internal">Internal topics</h2><p class="muted">No __consumer_offsets, __transaction_state '
                "or __cluster_metadata here.</p>")
    return '<h2 id="internal">Internal topics</h2>' + "".join(shown)


def _unreadable(section: dict) -> str | None:
    return f'<p class="bad">Could not be read: {escape(section["error"])}</p>' if "error" in section else None


def _groups(g: dict | None) -> str:
    if g is None:
        return ""
    head = "<h3>Consumer groups (__consumer_offsets)</h3>"
    if (bad := _unreadable(g)) is not None:
        return head + bad
    rows = [[escape(x["group"]), escape(x["kind"]), f"{x['partitions']:,}", escape(", ".join(x["topics"]))]
            for x in g["groups"]]
    commits = [[escape(c["group"]), escape(c["topic"]), str(c["partition"]), f"{c['offset']:,}",
                escape(when(c["commitTimestamp"])), escape(c["groupType"])] for c in g["offsets"]]
    pending = (f'<p>{g["open_transactions"]:,} offset commit(s) wait for a transaction that has not ended '
               "(not counted).</p>") if g["open_transactions"] else ""
    return (head + f"<p>{len(rows):,} group(s), {len(commits):,} committed offset(s), as "
            "<code>kfmt offsets</code> lists them.</p>"
            + _table(["group", "kind", "partitions committed", "topics"], rows, "groups-table", (2,)) + pending
            + "<details><summary>Every committed offset</summary>"
            + _table(["group", "topic", "partition", "offset", "committed at", "kind"], commits, "offsets-table", (2, 3))
            + "</details>")


def _transactions(t: dict | None) -> str:
    if t is None:
        return ""
    head = "<h3>Transactional ids (__transaction_state)</h3>"
    if (bad := _unreadable(t)) is not None:
        return head + bad
    rows = [[escape(x["transactional_id"]), str(x["producer_id"]), str(x["producer_epoch"]), escape(x["state"]),
             escape(", ".join(x["partitions"])), escape(when(x["last_update_ms"]))] for x in t["transactional_ids"]]
    return (head + f"<p>{len(rows):,} transactional id(s), each in the last state the coordinator wrote.</p>"
            + _table(["transactional id", "producer id", "epoch", "state", "partitions", "last update"], rows,
                     "transactions-table", (1, 2)))


def _cluster(c: dict | None) -> str:
    if c is None:
        return ""
    head = "<h3>KRaft metadata (__cluster_metadata)</h3>"
    if (bad := _unreadable(c)) is not None:
        return head + bad
    features = ", ".join(f"{escape(k)}={v}" for k, v in sorted(c["features"].items())) or "none recorded"
    rows = [[escape(x["name"]), f"<code>{escape(x['id'])}</code>", str(x["partitions"])] for x in c["topics"]]
    return (head + f'<p>metadata.version <b id="metadata-version">{c["metadata_version"] if c["metadata_version"] is not None else "-"}'
            f"</b> &middot; features: {features} &middot; cluster id <code>{escape(str(c['cluster_id']))}</code>, "
            f"node {escape(str(c['node_id']))}</p>"
            + _table(["topic", "topic id", "partitions"], rows, "topics-table", (2,)))


def findings_section(verify: dict | None) -> str:
    if verify is None:
        return ('<h2 id="findings">What verify found</h2><p class="muted">Not verified (<code>--no-verify</code>): '
                "run <code>kfmt verify</code> or a report without that flag for the checks.</p>")
    s, findings = verify["summary"], verify["findings"]
    head = (f'<h2 id="findings">What verify found</h2><p>{s["errors"]:,} problem(s) and {s["notes"]:,} note(s) in '
            f'{s["partitions"]:,} partition(s), {s["segments"]:,} segment(s), {s["files"]:,} files read '
            "(<code>kfmt verify</code>; notes are genuine broker behaviour, never a problem).</p>")
    if not findings:
        return head
    rows = []
    for f in findings:
        where = _finding_link(f)
        rows.append(f'<tr id="{f["anchor"]}" class="finding {f["severity"]}"><td class="{"bad" if f["severity"] == "error" else ""}">'
                    f'{f["severity"]}</td><td>{escape(f["check"])}</td><td>{where}</td><td><code>{escape(f["file"])}</code></td>'
                    f'<td class="n">{_n(f["position"], "")}</td><td class="n">{_n(f["offset"], "")}</td>'
                    f'<td>{escape(f["message"])}</td></tr>')
    return (head + '<table id="findings-table"><tr><th>severity</th><th>check</th><th>partition</th><th>file</th>'
            '<th class="n">position</th><th class="n">offset</th><th>message</th></tr>' + "".join(rows) + "</table>")


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
            f'{human_bytes(p["bytes"])}, {_n(p.get("records"))} records{_tags(p)}</summary>'
            f"{_offsets(p)}{state}{offset_strip(p)}{time_axis(p)}{_segments_table(p)}{_own_findings(p)}</details>")


def _offsets(p: dict) -> str:
    if "info_error" in p:
        return f'<p class="bad">kfmt info stopped: {escape(p["info_error"])}</p>'
    control = f" (+{p['control_records']:,} control)" if p["control_records"] else ""
    return (f"<p>offsets: log start {_n(p['log_start_offset'])}, log end {_n(p['log_end_offset'])}; records "
            f"{_n(p['first_offset'])}..{_n(p['last_offset'])} &middot; {p['records']:,} records in "
            f"{p['batches']:,} batches{control} &middot; time {escape(when(p['min_timestamp']))} .. "
            f"{escape(when(p['max_timestamp']))}</p>")


def _cleaner(offset: int | None) -> str:
    # the checkpoint is the only on-disk sign of compaction: the topic's cleanup.policy is in its config
    return "no cleaner checkpoint" if offset is None else f"cleaned up to offset {offset:,} (cleaner checkpoint)"


def _segments_table(p: dict) -> str:
    rows = []
    for s in p["segment_list"]:
        anchor = escape(segment_id(p["name"], s["base_offset"]))
        rows.append(f'<tr id="{anchor}"><td><code>{s["base_offset"]:020d}.log</code></td><td>{escape(segment_state(s))}</td>'
                    f'<td class="n">{_n(s["first_offset"])}..{_n(s["last_offset"])}</td><td class="n">{s["size"]:,}</td>'
                    f'<td class="n">{s["entries"]:,}</td><td>{escape(when(s["first_timestamp"]))}</td>'
                    f'<td>{escape(when(s["largest_timestamp"]))}</td><td class="n">{s["gaps"]:,}</td>'
                    f'<td class="n">{s["transactional_batches"]:,}</td><td class="n">{s["control_batches"]:,}</td></tr>')
    head = ["segment", "state", "offsets", "bytes", "entries", "first timestamp", "largest timestamp",
            "gaps inside", "txn batches", "control batches"]
    th = "".join(f"<th>{h}</th>" for h in head)
    return (f'<details><summary>{len(rows):,} segment(s)</summary><table class="segments-table"><tr>{th}</tr>'
            + "".join(rows) + "</table></details>")


def _own_findings(p: dict) -> str:
    if not p.get("errors") and not p.get("notes"):
        return ""
    return (f'<p>verify: <a href="#findings">{p["errors"]} problem(s), {p["notes"]} note(s)</a> in this partition '
            "(listed under What verify found).</p>")


def _n(value, missing: str = "-") -> str:
    return missing if value is None else f"{value:,}"
