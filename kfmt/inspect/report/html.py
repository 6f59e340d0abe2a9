"""The report as one self-contained HTML page: styles, charts (inline SVG, kfmt.inspect.report.charts)
and a few lines of script written here, nothing loaded from anywhere. Its Content-Security-Policy
allows no request at all, so even a link added by hand to the file fetches nothing.

At a glance first (totals, the census charts, the estimate, the findings' count), then in detail on
demand: each partition in a <details> block, opened by a link from a finding or the census."""
from __future__ import annotations

from html import escape

from kfmt import __version__
from kfmt.inspect.report.charts import format_colour, human_bytes, legend, stacked_bars
from kfmt.inspect.report.markup import table
from kfmt.inspect.report.sections import findings_section, internal_section, partitions_section

POLICY = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1100px;padding:0 16px 40px;color:#1d1d1d}
h1{font-size:22px;margin:18px 0 2px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ddd}
.muted{color:#666}.cards{display:flex;flex-wrap:wrap;gap:10px}
.card{border:1px solid #ddd;border-radius:6px;padding:8px 14px;min-width:110px}
.card b{display:block;font-size:20px}.bad{color:#b3261e}.ok{color:#2e7d32}
table{border-collapse:collapse;margin:6px 0 12px}td,th{border-bottom:1px solid #eee;padding:3px 8px;
text-align:left;vertical-align:top}td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
details{border:1px solid #e3e3e3;border-radius:6px;margin:6px 0;padding:4px 10px}
summary{cursor:pointer}.key{margin-right:14px;white-space:nowrap}.key i{display:inline-block;width:11px;
height:11px;margin-right:4px;vertical-align:-1px}svg text{font:11px system-ui,sans-serif}
.tag{border-radius:4px;padding:0 5px;margin-left:6px;font-size:12px;background:#eee}
.tag.bad{background:#fbe3e1}:target{outline:2px solid #e08a1e}code{font-size:12px}
"""

# Opens the partition a link points to (a <details> is closed by default) -- the page's only script.
SCRIPT = """
function openTarget(){var t=document.getElementById(decodeURIComponent(location.hash.slice(1)));
for(;t;t=t.parentElement){if(t.tagName==='DETAILS'){t.open=true;}}}
window.addEventListener('hashchange',openTarget);openTarget();
"""


def render(facts: dict) -> str:
    """The page of a report's facts (kfmt.inspect.report.collect plus the estimate)."""
    source = facts["source"]
    title = f"kfmt report: {source['path']}"
    body = [f"<h1>{escape(title)}</h1>",
            f'<p class="muted">{escape(source["kind"])}'
            + (f", generation {source['generation']}" if source.get("generation") else "")
            + f" &middot; generated {escape(facts['generated'])} by kfmt {escape(__version__)}</p>",
            glance_section(facts), census_section(facts), estimate_section(facts.get("estimate")),
            internal_section(facts["internal"]), findings_section(facts["verify"], source["kind"]),
            partitions_section(facts["partitions"])]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{POLICY}">'
            f"<title>{escape(title)}</title><style>{STYLE}</style></head>\n<body>\n"
            + "\n".join(body) + f"\n<script>{SCRIPT}</script>\n</body></html>\n")


def glance_section(facts: dict) -> str:
    t = facts["totals"]
    cards = [("topics", f"{t['topics']:,}"), ("partitions", f"{t['partitions']:,}"),
             ("segments", f"{t['segments']:,}"), ("bytes of .log", human_bytes(t["bytes"])),
             ("batches", f"{t['batches']:,}"), ("records", f"{t['records']:,}")]
    html = "".join(f'<div class="card" id="total-{escape(k.split()[0])}">{escape(k)}<b>{v}</b></div>'
                   for k, v in cards)
    if facts["verify"] is None:
        html += '<div class="card" id="total-verify">verify<b class="muted">not run</b>--no-verify</div>'
    else:
        status = '<b class="ok">OK</b>' if facts["verify"]["summary"]["ok"] else '<b class="bad">FAILED</b>'
        html += (f'<div class="card" id="total-verify">verify{status}<a href="#findings">{t["errors"]:,} '
                 f'problem(s), {t["notes"]:,} note(s)</a></div>')
    return f'<h2 id="glance">At a glance</h2><div class="cards">{html}</div>'


def census_section(facts: dict) -> str:
    rows = facts["census"]
    keys = sorted({(r["magic"], r["compression"]) for r in rows})
    topics = sorted({r["topic"] for r in rows})

    def bars(what: str) -> str:
        return stacked_bars([(t, [(f"v{r['magic']} {r['compression']}", r[what],
                                   format_colour(r["magic"], r["compression"])) for r in rows if r["topic"] == t])
                             for t in topics], what)

    numbers = table(["topic", "magic", "compression", "batches", "records", "bytes"],
                    [[escape(r["topic"]), str(r["magic"]), escape(r["compression"]), f'{r["batches"]:,}',
                      f'{r["records"]:,}', f'{r["bytes"]:,}'] for r in rows],
                    table_id="census-table", numeric=(1, 3, 4, 5))
    old = sum(r["bytes"] for r in rows if r["magic"] < 2)
    return (f'<h2 id="census">Message formats and codecs</h2><p>{human_bytes(old)} in message formats v0/v1 '
            f"(what <code>kfmt upgrade</code> converts), of {human_bytes(sum(r['bytes'] for r in rows))}; "
            "counted as a consumer sees each partition, from its log start offset (<code>kfmt info</code>).</p>"
            f'<p>{legend([(f"v{m} {c}", format_colour(m, c)) for m, c in keys])}</p>'
            f"<h3>Bytes</h3>{bars('bytes')}<h3>Records</h3>{bars('records')}"
            "<details><summary>The census as numbers</summary>" + numbers + "</details>")


def estimate_section(estimate: dict | None) -> str:
    head = '<h2 id="estimate">What the transforms would take here</h2>'
    if estimate is None:
        return head + '<p class="muted">Not measured (<code>--no-estimate</code>).</p>'
    sample, engine = estimate["sample"], estimate["engine"]
    if not sample["bytes"]:
        return head + '<p class="muted">Nothing to measure: no segment holds a byte.</p>'
    rows = []
    for name, c in estimate["commands"].items():
        cells = [f"kfmt {name}"]
        if "error" in c:
            cells += [f'<span class="bad">could not be measured: {escape(c["error"])}</span>', "", "", ""]
        else:
            spread, one_core = _duration(c["estimated_seconds"]), _duration(c["estimated_seconds_one_core"])
            cells += [spread if spread == one_core else f"{spread} to {one_core}",
                      human_bytes(c["estimated_bytes_written"]),
                      f'{c["sample_cpu_seconds"]:.2f} s', human_bytes(c["sample_bytes_written"])]
        rows.append((f' id="estimate-{name}"', cells))
    return (head + f"<p>Measured on a sample of {human_bytes(sample['bytes'])} of the "
            f"{human_bytes(estimate['input_bytes'])} of segments: {escape(sample['method'])}. Scaled by bytes "
            f"to the whole input: the shorter time with the work spread evenly over the {engine['workers']} "
            f"worker(s) of the engine kfmt would pick ({escape(engine['engine'])}: {escape(engine['why'])}), the longer on "
            "one core (one partition doing most of the work). Writing to object storage adds its upload "
            "time, not measured here.</p>"
            + table(["command", "estimated time", "would write", "sample CPU time", "sample wrote"], rows,
                    table_id="estimate-table", numeric=(1, 2, 3, 4)))


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 90:
        return f"{seconds:.1f} s"
    return f"{seconds / 60:.1f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"

