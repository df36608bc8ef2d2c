"""Editing a ruamel round-trip document without losing its comments.

ruamel keeps a key's end-of-line comment, and the blank and comment lines that
follow its last line, in its parent's `ca.items`; the lines before a mapping's
first key in the mapping's `ca.comment`.  Moving a key with plain dict operations
would drop them or leave them in front of the wrong key.  `pop_key` and `put_key`
move a key with its own comment and leave the lines that introduce the next key
where they are.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import CommentMark
from ruamel.yaml.tokens import CommentToken


def round_trip() -> YAML:
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = 4096  # never re-wrap a long string
    yaml.indent(mapping=2, sequence=4, offset=2)
    return yaml


def dump(data: Any) -> str:
    out = io.StringIO()
    round_trip().dump(data, out)
    return out.getvalue()


def comment_lines(node: Any) -> Iterator[str]:
    """Every comment line of a round-trip tree, stripped."""
    ca = getattr(node, "ca", None)
    if ca is not None:
        tokens: list[Any] = [ca.comment, *ca.items.values(), getattr(ca, "end", None)]
        for token in tokens:
            yield from _token_lines(token)
    if isinstance(node, dict):
        for value in node.values():
            yield from comment_lines(value)
    elif isinstance(node, list):
        for value in node:
            yield from comment_lines(value)


def _token_lines(token: Any) -> Iterator[str]:
    if token is None:
        return
    if isinstance(token, list):
        for item in token:
            yield from _token_lines(item)
        return
    value = getattr(token, "value", None)
    if isinstance(value, str):
        for line in value.splitlines():
            if line.strip().startswith("#"):
                yield line.strip()


def pop_key(src: CommentedMap, key: str) -> tuple[Any, Any]:
    """Remove a key; (its value, its comments: the lines before it and its end-of-line one).

    ruamel files the blank lines and comment lines that follow a key's last line
    under that key (or its last nested key).  Those after this key introduce whatever
    comes next, so they stay here, handed to the key before this one; those after the
    key before introduce this one, so they leave with it.
    """
    keys = list(src)
    position = keys.index(key)
    rest = _detach_tail(src, key)
    if position == 0:
        lead = _take_lead(src)
    else:
        # the lines between the key before and this one introduce this one: they go with it
        above = _detach_tail(src, keys[position - 1])
        lead = [CommentToken(above, CommentMark(0), None)] if above.strip() else None
    comment = src.ca.items.pop(key, None)
    value = src.pop(key)
    if rest and position > 0:
        _append_tail(src, keys[position - 1], rest)
    elif rest and src:
        # nothing before it: the lines lead into the key after it, which is first now
        _lead_into_first_key(src, CommentToken(rest, CommentMark(0), None))
    elif rest:
        comment = _append_tail_to(value, comment, rest)
    if lead:
        comment = comment or [None, None, None, None]
        comment[1] = lead
    if comment is not None and not any(comment):
        comment = None
    return value, comment


def _lead_into_first_key(src: CommentedMap, token: CommentToken) -> None:
    """Lines before a mapping's first key.  A nested mapping's parent writes them from a list
    it shares with the mapping (`_take_lead` empties it in place): a new list would not be
    written at all, so the lines go into that one when it is there."""
    start = src.ca.comment
    if start and len(start) > 1 and isinstance(start[1], list):
        start[1].append(token)
    else:
        src.ca.comment = [None, [token]]


def _append_tail_to(value: Any, comment: Any, rest: str) -> Any:
    """Put the lines back where they were cut from (the map is empty: they go with the value)."""
    if isinstance(value, CommentedMap | CommentedSeq) and value:
        _append_tail(value, list(value)[-1] if isinstance(value, CommentedMap) else len(value) - 1, rest)
        return comment
    comment = comment or [None, None, None, None]
    if comment[2] is None:
        comment[2] = CommentToken("\n" + rest, CommentMark(0), None)
    else:
        comment[2].value += rest
    return comment


def _take_lead(src: CommentedMap) -> list[Any] | None:
    """The comment lines before a mapping's first key (shared with the parent's entry)."""
    start = src.ca.comment
    if not start or len(start) < 2 or not start[1]:
        return None
    lead = list(start[1])
    start[1].clear()  # the same list object is the parent's record of them
    return lead


def _detach_tail(node: Any, key: Any) -> str:
    """Cut the lines after the first one from the comment that ends `node[key]`."""
    value = node[key]
    if isinstance(value, CommentedMap) and value:
        return _detach_tail(value, list(value)[-1])
    if isinstance(value, CommentedSeq) and value:
        return _detach_tail(value, len(value) - 1)
    entry = node.ca.items.get(key)
    slot = 0 if isinstance(node, CommentedSeq) else 2
    token = entry[slot] if entry and len(entry) > slot else None
    text = getattr(token, "value", None)
    if token is None or not isinstance(text, str) or "\n" not in text:
        return ""
    line, rest = text.split("\n", 1)
    if not rest:
        return ""
    if line.strip():
        token.value = line + "\n"
    else:
        entry[slot] = None
    return rest


def _append_tail(node: Any, key: Any, text: str) -> None:
    """Add comment lines after the last line written under `node[key]`."""
    value = node[key]
    if isinstance(value, CommentedMap) and value:
        _append_tail(value, list(value)[-1], text)
        return
    if isinstance(value, CommentedSeq) and value:
        _append_tail(value, len(value) - 1, text)
        return
    slot = 0 if isinstance(node, CommentedSeq) else 2
    entry = node.ca.items.setdefault(key, [None, None, None, None])
    token = entry[slot]
    if token is None:
        entry[slot] = CommentToken("\n" + text, CommentMark(0), None)
    elif token.value.endswith("\n\n") and text.startswith("\n"):
        token.value = token.value + text[1:]  # one blank line between sections is enough
    else:
        token.value = token.value + text


def put_key(dst: CommentedMap, key: str, value: Any, comment: Any = None, *, at: int | None = None) -> None:
    if at is None or at >= len(dst):
        # A new last key: the lines that closed the mapping (a blank line before the next
        # section, say) now follow it.
        last = list(dst)[-1] if dst and key not in dst else None
        rest = _detach_tail(dst, last) if last is not None and _filled(value) else ""
        dst[key] = value
        if comment is not None:
            dst.ca.items[key] = comment
        if rest:
            _append_tail(dst, key, rest)
        return
    dst.insert(at, key, value)
    if comment is not None:
        dst.ca.items[key] = comment


def _filled(value: Any) -> bool:
    return not isinstance(value, CommentedMap | CommentedSeq) or bool(value)


def child_map(parent: CommentedMap, key: str, *, at: int | None = None) -> CommentedMap:
    """The mapping at `parent[key]`, created (at position `at`) when missing."""
    node = parent.get(key)
    if not isinstance(node, CommentedMap):
        node = CommentedMap()
        put_key(parent, key, node, at=at)
    return node


def index_of(node: CommentedMap, key: str) -> int:
    return list(node).index(key)


def indent_moved_comments(node: Any, column: int = 0) -> None:
    """Indent the comment lines a moved key took with it to the key's new depth.

    `put_key` files them as the lines before the key (`ca.items[key][1]`), a slot the
    loader never fills, so only moved comments are touched.  ruamel writes such a
    token's first line at its column and the others as they are.
    """
    if isinstance(node, CommentedMap):
        for key, value in node.items():
            entry = node.ca.items.get(key)
            for token in (entry[1] if entry and len(entry) > 1 and entry[1] else ()) or ():
                _indent(token, column)
            indent_moved_comments(value, column + 2)
    elif isinstance(node, CommentedSeq):
        for item in node:
            indent_moved_comments(item, column + 2)  # `- ` at column + 2, the item's keys after it


def _indent(token: Any, column: int) -> None:
    lines = token.value.split("\n")
    token.value = "\n".join(
        [lines[0].lstrip(), *((" " * column + line.lstrip()) if line.strip() else line for line in lines[1:])]
    )
    token.start_mark = CommentMark(column)
