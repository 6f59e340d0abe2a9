"""The few pieces of HTML the report's sections share: tables and numbers."""
from __future__ import annotations

from html import escape


def table(head: list[str], rows: list, *, table_id: str | None = None, css_class: str | None = None,
          numeric=()) -> str:
    """A table of `rows`, each a list of cells (HTML) or (attributes of its <tr>, cells); the columns
    whose index is in `numeric` are right-aligned."""
    def cell(tag, i, content):
        return f'<{tag}{" class=n" if i in numeric else ""}>{content}</{tag}>'

    body = []
    for row in rows:
        attributes, cells = row if isinstance(row, tuple) else ("", row)
        body.append(f"<tr{attributes}>" + "".join(cell("td", i, c) for i, c in enumerate(cells)) + "</tr>")
    opening = "<table" + (f' id="{table_id}"' if table_id else "") + (f' class="{css_class}"' if css_class else "")
    return (f"{opening}><tr>" + "".join(cell("th", i, escape(h)) for i, h in enumerate(head)) + "</tr>"
            + "".join(body) + "</table>")


def number(value, missing: str = "-") -> str:
    return missing if value is None else f"{value:,}"
