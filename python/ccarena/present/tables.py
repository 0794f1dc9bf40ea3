"""Tables for the terminal and for other programs: one `Listing` (columns and
rows of text) printed as a rich table, as CSV or TSV, or as JSON (``--format``).

In a terminal a table never cuts what must be typed or read whole: columns
marked ``no_wrap`` (names, numbers with their ``±`` interval) keep their
width, and when the table cannot fit the terminal that way it is printed
stacked instead, one block per row with a ``column: value`` line per cell.
Every text is printed as it is: bracketed words such as ``[sweep]`` are text,
never rich markup.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from typing import Any, Sequence

from rich import box as rich_box
from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from ..errors import UsageError

__all__ = ["FORMATS", "Column", "Listing", "check_format", "emit", "fits", "to_rich"]

FORMATS = ("table", "csv", "tsv", "json")


def check_format(value: str, option: str = "--format") -> str:
    """`value` when it is one of FORMATS; else a UsageError naming them."""
    if value not in FORMATS:
        raise UsageError(f"{option}: unknown format {value!r}; allowed: {', '.join(FORMATS)}")
    return value


@dataclass
class Column:
    """A column: its header, alignment, and whether its cells may wrap onto
    several lines (names and numbers may not)."""

    name: str
    justify: str = "left"
    no_wrap: bool = False
    style: str | None = None


@dataclass
class Listing:
    """Rows of text under named columns, with an optional title and caption.
    `data` (one dict per row) is what CSV, TSV and JSON print when the cells
    are formatted for reading (e.g. a mean and its interval as raw numbers)."""

    columns: list[Column]
    rows: list[list[str]]
    title: str = ""
    caption: str = ""
    row_styles: list[str | None] = field(default_factory=list)
    data: list[dict[str, Any]] | None = None
    show_lines: bool = False
    box: Any = rich_box.SIMPLE_HEAVY

    def records(self) -> list[dict[str, Any]]:
        if self.data is not None:
            return self.data
        return [dict(zip((c.name for c in self.columns), row)) for row in self.rows]


def _longest_word(text: str) -> int:
    return max((len(w) for w in text.split()), default=0)


def _needed_width(listing: Listing, compact: bool = False) -> int:
    """The narrowest the table can be drawn without cutting a no-wrap cell or
    a word: each column's widest unbreakable piece, plus padding and rules
    (compact: one space between columns, no rules)."""
    total = 0
    for j, c in enumerate(listing.columns):
        cells = [c.name] + [r[j] for r in listing.rows]
        if c.no_wrap:
            w = max(max(len(line) for line in s.split("\n")) if s else 0 for s in cells)
        else:
            w = max(_longest_word(s) for s in cells)
        total += w if compact else w + 2  # a space either side
    n = len(listing.columns)
    return total + (n - 1 if compact else n + 1)  # column gaps or rules


def fits(listing: Listing, width: int, compact: bool = False) -> bool:
    """Whether the table can be drawn in `width` columns without cutting a
    name or number."""
    return _needed_width(listing, compact) <= width


def to_rich(listing: Listing, compact: bool = False) -> Table:
    """The listing as a rich table; compact: no rules, one space between columns."""
    t = Table(
        caption=Text(listing.caption) if listing.caption else None,
        caption_justify="left",
        box=None if compact else listing.box,
        show_lines=listing.show_lines and not compact,
        pad_edge=not compact,
        collapse_padding=compact,
        padding=(0, 1, 0, 0) if compact else (0, 1),
        show_header=True,
        header_style="bold" if compact else "table.header",
    )
    for c in listing.columns:
        t.add_column(Text(c.name), justify=c.justify, no_wrap=c.no_wrap, style=c.style,
                     min_width=max(len(r[listing.columns.index(c)]) for r in listing.rows) if c.no_wrap and listing.rows else None)
    for i, row in enumerate(listing.rows):
        style = listing.row_styles[i] if i < len(listing.row_styles) else None
        t.add_row(*(Text(v) for v in row), style=style)
    return t


def _stacked(listing: Listing, console: Console) -> None:
    """One block per row: the first cell as its heading, then `column: value`
    lines whose values wrap under themselves."""
    if listing.title:
        console.print(Text(listing.title, style="bold"))
    first = listing.columns[0]
    for i, row in enumerate(listing.rows):
        style = listing.row_styles[i] if i < len(listing.row_styles) else None
        heading = row[0] if first.name == "name" else f"{first.name} {row[0]}"
        console.print(Text(heading, style=style or "bold"), no_wrap=True, overflow="ignore", crop=False)
        grid = Table.grid(padding=(0, 1, 0, 0))
        grid.add_column(no_wrap=True)
        grid.add_column()
        for c, v in zip(listing.columns[1:], row[1:]):
            grid.add_row(Text(c.name + ":", style=style or ""), Text(v.replace("\n", " "), style=style or ""))
        console.print(Padding(grid, (0, 0, 0, 2), expand=False))
    if listing.caption:
        console.print(Text(listing.caption))


def emit(listing: Listing, fmt: str, console: Console) -> None:
    """Prints `listing` as `fmt` (one of FORMATS) to `console`."""
    if fmt == "json":
        console.file.write(json.dumps(listing.records()) + "\n")
        return
    if fmt in ("csv", "tsv"):
        console.file.write(to_delimited(listing.records(), "," if fmt == "csv" else "\t"))
        return
    if fits(listing, console.width) or fits(listing, console.width, compact=True):
        # The title is a line of its own: as a table's title it would wrap at
        # the table's width.
        if listing.title:
            console.print(Text(listing.title, style="italic"))
        console.print(to_rich(listing, compact=not fits(listing, console.width)))
    else:
        _stacked(listing, console)


def to_delimited(records: Sequence[dict[str, Any]], sep: str) -> str:
    """CSV (or TSV) with a header line: every key that occurs, in order of
    first appearance."""
    keys: list[str] = []
    for r in records:
        keys += [k for k in r if k not in keys]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=keys, delimiter=sep, lineterminator="\n", extrasaction="ignore")
    w.writeheader()
    for r in records:
        w.writerow({k: ("" if v is None else v) for k, v in r.items()})
    return buf.getvalue()
