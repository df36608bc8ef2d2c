"""The console's text off a terminal, as rich printed it, without rich.

`srtd run` off a terminal (under sbatch stdout is a file) prints a failure's text and the
end-of-run summary table.  rich printed them (width 120, no colour, no highlighting) and
cost the supervisor its import (tens of ms, about 2 MiB) to draw nothing; these functions
write the same bytes with the little of rich such text goes through: control codes
dropped, tabs expanded, the title word-wrapped and centred over the table, the table's
heavy-headed box (ASCII when the stream cannot encode it).

Both return None where rich would do more than that: a character whose width rich looks
up in its Unicode tables, a table wider than 120 columns (rich squeezes and wraps its
cells).  The caller then asks rich (rare, and exact either way).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

WIDTH = 120  # the console's width off a terminal

# rich drops these from any text it prints (rich.control.STRIP_CONTROL_CODES)
_STRIP = dict.fromkeys((7, 8, 11, 12, 13))
# characters rich takes as one cell wide without a table (rich.cells)
_ONE_CELL = re.compile("[\x20-\x7e\xa0-\xac\xae-\u02ff\u0370-\u0482]*")
_ZERO_CELL = re.compile("[\x00-\x1f\x7f-\x9f]")
_WORD = re.compile(r"\s*\S+\s*")  # a word and the spaces around it (rich._wrap)
_TRAILING_SPACE = re.compile(r"\s+$")
# rich's box.HEAVY_HEAD and box.ASCII: (header's column divider, rule under it, crossing, row's divider)
_BOX = ("┃", "━", "╇", "│")
_ASCII_BOX = ("|", "-", "+", "|")


def _simple(text: str) -> bool:
    return _ONE_CELL.fullmatch(text) is not None


def text(value: str) -> str | None:
    """`rich.Text(value)` printed with soft wrap: no wrapping, no markup (None: ask rich)."""
    lines = []
    for line in value.translate(_STRIP).split("\n"):
        if "\t" in line:
            expanded = _expand_tabs(line)
            if expanded is None:
                return None
            line = expanded
        lines.append(line)
    return "\n".join(lines) + "\n"


def _expand_tabs(line: str) -> str | None:
    # to the next multiple of 8 cells, each tab at least one space (rich.Text.expand_tabs)
    out, cells = [], 0
    for part in re.split("(?<=\t)", line):
        visible = _ZERO_CELL.sub("", part.removesuffix("\t"))
        if not _simple(visible):
            return None
        cells += len(visible)
        if part.endswith("\t"):
            spaces = 1 + -(cells + 1) % 8
            part, cells = part[:-1] + " " * spaces, cells + spaces
        out.append(part)
    return "".join(out)


def table(title: str, headers: Sequence[str], rows: Sequence[Sequence[str]], encoding: str | None) -> str | None:
    """rich's `Table(title=..., show_edge=False)` of text cells on a stream of `encoding` (None: ask rich)."""
    cells = [headers, *rows]
    if not all(_simple(cell) for row in cells for cell in row) or not _simple(title):
        return None
    widths = [max(len(row[i]) for row in cells) + 2 for i in range(len(headers))]  # a space either side
    width = sum(widths) + len(widths) - 1
    if width > WIDTH:
        return None
    # rich draws ASCII on a stream whose encoding is not UTF-something
    head, rule, cross, divider = _BOX if (encoding or "utf-8").lower().startswith("utf") else _ASCII_BOX

    def line(row: Sequence[str], between: str) -> str:
        return between.join(f" {cell.ljust(w - 2)} " for cell, w in zip(row, widths, strict=True))

    lines = [*(_centred(title, width) if title else []), line(headers, head), cross.join(rule * w for w in widths)]
    lines += [line(row, divider) for row in rows]
    return "".join(f"{one}\n" for one in lines)


def _centred(title: str, width: int) -> list[str]:
    """The title word-wrapped to `width`, a word longer than that folded, each line centred."""
    breaks, offset = [], 0
    for found in _WORD.finditer(title):  # rich._wrap.divide_line
        start, word = found.start(), found.group()
        if width - offset >= len(word.rstrip()):
            offset += len(word)
        elif len(word.rstrip()) > width:
            chunks = [word[i : i + width] for i in range(0, len(word), width)]
            for chunk in chunks[:-1]:
                if start:
                    breaks.append(start)
                start += len(chunk)
            if start:
                breaks.append(start)
            offset = len(chunks[-1])
        elif offset and start:
            breaks.append(start)
            offset = len(word)
    lines = []
    for a, b in zip([0, *breaks], [*breaks, len(title)], strict=True):
        piece = title[a:b]
        if len(piece) > width and (spaces := _TRAILING_SPACE.search(piece)):
            piece = piece[: len(piece) - min(len(spaces.group()), len(piece) - width)]
        piece = piece.rstrip()[:width]
        left = (width - len(piece)) // 2
        lines.append(" " * left + piece + " " * (width - left - len(piece)))
    return lines
