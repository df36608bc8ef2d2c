"""How deeply a YAML text nests, measured on the text before any YAML parser reads it.

ruamel's scanner spends seconds on a few thousand nested flow brackets (`[[[[...`) and
recurses once per level, so a file nested deeper than the limit is refused from one
linear pass over its characters.  The pass knows just enough YAML to be right on real
files: comments, quoted scalars (which may span lines and hold brackets), flow
brackets, block indentation and compact `- - x` entries.  Where it guesses (a bracket
inside a block scalar's text), it can only count too deep, never hide real nesting:
inside a flow collection every bracket outside quotes is counted.
"""

from __future__ import annotations

import re

_INTERESTING = re.compile(r"""[\[\]{}'"#]""")
_COMPACT = re.compile(r"[-?](?= |$) *")  # `- ` / `? ` entries opening a nested level on one line
_CLOSE = {'"': re.compile(r'(?:[^"\\]|\\.)*"'), "'": re.compile(r"(?:[^']|'')*'(?!')")}
_VALUE_START = ("", "-", ":", "?", ",", "[", "{")  # what may precede a quote or bracket that opens


def deepest(text: str, limit: int) -> tuple[int, int, int] | None:
    """(depth, line, column) of the first place nested deeper than `limit`, else None."""
    flow = 0
    indents: list[int] = []  # block levels open at the current line
    quote: str | None = None
    for number, line in enumerate(text.split("\n"), start=1):
        start = 0
        if quote is not None:
            closed = _CLOSE[quote].match(line)
            if closed is None:
                continue  # the quoted scalar goes on to the next line
            quote, start = None, closed.end()
        elif flow == 0:
            body = line.lstrip(" ")
            if not body or body.startswith("#"):
                continue
            indent = len(line) - len(body)
            while indents and indents[-1] >= indent:
                indents.pop()
            indents.append(indent)
            if len(indents) > limit:
                return len(indents), number, indent + 1
            for entry in _COMPACT.finditer(body):
                if entry.start() != indents[-1] - indent:
                    break
                indents.append(indent + entry.end())
                if len(indents) > limit:
                    return len(indents), number, indent + entry.start() + 1
        scanned = _scan_line(line, start, flow, len(indents), limit)
        if isinstance(scanned[0], tuple):
            depth, column = scanned[0]
            return depth, number, column
        flow, quote = scanned
    return None


def _scan_line(
    line: str, start: int, flow: int, block: int, limit: int
) -> tuple[tuple[int, int], None] | tuple[int, str | None]:
    """The flow depth and open quote at the end of `line`, or ((depth, column), None) past `limit`."""
    position = start
    while True:
        found = _INTERESTING.search(line, position)
        if found is None:
            return flow, None
        char, at = found.group(), found.start()
        position = at + 1
        before = line[:at].rstrip(" ")[-1:]
        if char == "#":
            if at == 0 or line[at - 1] in " \t":
                return flow, None
        elif char in "'\"":
            if before in _VALUE_START:
                closed = _CLOSE[char].match(line, position)
                if closed is None:
                    return flow, char
                position = closed.end()
        elif char in "[{":
            if flow > 0 or before in _VALUE_START:
                flow += 1
                if flow + block > limit:
                    return (flow + block, at + 1), None
        elif flow > 0:
            flow -= 1
