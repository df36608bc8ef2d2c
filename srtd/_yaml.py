"""Reading YAML with the position of every key and value.

The recipe is parsed with ruamel.yaml's round-trip loader, which remembers
where each node was; we keep those positions in a `Positions` map keyed by the
path of the node, and hand plain Python data (dict, list, str, int, float, bool,
None) to everything else.  Nothing here ever writes a file.
"""

from __future__ import annotations

import datetime
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import field
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.constructor import ConstructorError, DuplicateKeyError, RoundTripConstructor
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.reader import ReaderError

from srtd._value import value_class
from srtd._yaml_depth import deepest
from srtd.errors import Problem, RecipeError

PathKey = tuple[str | int, ...]

# Bounds on the work any file can cause.  A recipe is a page of YAML; aliases let a
# kilobyte name billions of nodes, so the expanded document is counted as it is built.
MAX_FILE_BYTES = 1 << 20  # 1 MiB: the largest real recipe is under 10 KiB
MAX_NODES = 100_000  # scalars, lists and mappings after alias expansion
MAX_TEXT = 8 << 20  # characters of all strings after alias expansion
# Nesting of mappings and lists.  The deepest real recipe is 6 levels (a role's engine
# flags holding a JSON-like mapping); ruamel's scanner takes 13 s on 2000 nested `[`,
# so the depth is measured on the text before ruamel reads it.
MAX_DEPTH = 64
# Digits of an integer.  No count, port or size needs more than 20 (2**64); Python
# refuses to read an integer of more than 4300, and a long one costs quadratic time.
MAX_DIGITS = 100


@value_class(frozen=False)
class Positions:
    """1-based (line, column) of every key and value of one document."""

    file: str | None
    keys: dict[PathKey, tuple[int, int]] = field(default_factory=dict)
    values: dict[PathKey, tuple[int, int]] = field(default_factory=dict)

    def locate(self, path: PathKey, *, prefer_key: bool = False) -> tuple[int, int] | None:
        """Where `path` is written, or its nearest written ancestor."""
        probe = tuple(path)
        while True:
            first, second = (self.keys, self.values) if prefer_key else (self.values, self.keys)
            if probe in first:
                return first[probe]
            if probe in second:
                return second[probe]
            if not probe:
                return None
            probe = probe[:-1]

    def problem(self, message: str, path: PathKey, *, prefer_key: bool = False, variant: str | None = None) -> Problem:
        where = self.locate(path, prefer_key=prefer_key)
        return Problem(
            message,
            path=dotted(path),
            file=self.file,
            line=where[0] if where else None,
            column=where[1] if where else None,
            variant=variant,
        )

    def shifted(self, prefix: PathKey) -> Positions:
        """The positions below `prefix`, re-rooted there (for override `base:` blocks)."""
        n = len(prefix)
        return Positions(
            self.file,
            {k[n:]: v for k, v in self.keys.items() if k[:n] == prefix},
            {k[n:]: v for k, v in self.values.items() if k[:n] == prefix},
        )


def dotted(path: PathKey) -> str:
    return ".".join(str(p) for p in path)


class _BoundedConstructor(RoundTripConstructor):
    """ruamel's round-trip constructor, refusing an integer too long to be a number of anything."""

    def construct_yaml_int(self, node: Any) -> Any:
        digits = sum(c.isdigit() for c in str(node.value))
        if digits > MAX_DIGITS:
            raise ConstructorError(
                problem=f"an integer of {digits} digits, more than {MAX_DIGITS} (quote it if it is text)",
                problem_mark=node.start_mark,
            )
        return super().construct_yaml_int(node)


_BoundedConstructor.add_constructor("tag:yaml.org,2002:int", _BoundedConstructor.construct_yaml_int)


def _yaml() -> YAML:
    yaml = YAML(typ="rt")
    yaml.Constructor = _BoundedConstructor
    yaml.allow_duplicate_keys = False
    return yaml


def _mark_problem(file: str, err: MarkedYAMLError, source: str) -> Problem:
    mark = err.problem_mark or err.context_mark
    line = mark.line + 1 if mark is not None else None
    column = mark.column + 1 if mark is not None else None
    text = (err.problem or err.context or "invalid YAML").strip()
    if "\\t" in text or "'\\t'" in text or "\t" in text:
        text = "tab character; YAML indentation must use spaces"
    elif isinstance(err, DuplicateKeyError):
        text = text.replace("found duplicate key", "duplicate key").split(" with value")[0]
        first = _first_definition(source, err)
        if first is not None:
            text += f" (first defined on line {first})"
    return Problem(f"invalid YAML: {text}", file=file, line=line, column=column)


def _first_definition(source: str, err: DuplicateKeyError) -> int | None:
    """The line where a duplicated key was first written: same column, same key, earlier."""
    match = re.search(r'duplicate key "([^"]*)"', err.problem or "")
    start, again = err.context_mark, err.problem_mark
    if match is None or start is None or again is None:
        return None
    key = match.group(1)
    lines = source.splitlines()
    for number in range(start.line, again.line):
        rest = lines[number][again.column :] if number < len(lines) else ""
        if re.match(rf"""(['"]?){re.escape(key)}\1\s*:""", rest) and lines[number][: again.column].strip(" -") == "":
            return number + 1
    return None


def parse_text(text: str, file: str) -> tuple[Any, Positions]:
    """Parse one YAML document into plain data and its positions.

    Raises `RecipeError` with one problem for anything YAML itself refuses.
    """
    too_deep = nested_too_deep(text, file)  # before ruamel, whose scanner is slow on deep nesting
    if too_deep is not None:
        raise RecipeError([too_deep])
    try:
        node = _yaml().load(text)
    except MarkedYAMLError as err:
        raise RecipeError([_mark_problem(file, err, text)]) from None
    except ReaderError as err:
        line = text[: err.position].count("\n") + 1
        char = f"U+{ord(err.character):04X}" if isinstance(err.character, str) else repr(err.character)
        raise RecipeError([Problem(f"invalid YAML: unprintable character {char}", file=file, line=line)]) from None
    except RecursionError:
        raise RecipeError([_too_deep(text, file)]) from None
    except YAMLError as err:  # pragma: no cover - ruamel marks nearly everything
        raise RecipeError([Problem(f"invalid YAML: {err}", file=file)]) from None
    positions = Positions(file)
    try:
        data = _plain(node, (), positions, _Budget())
    except RecursionError:
        raise RecipeError([_too_deep(text, file)]) from None
    except _OverBudget as over:
        raise RecipeError([positions.problem(str(over), over.path, prefer_key=over.key)]) from None
    return data, positions


class _OverBudget(Exception):
    def __init__(self, message: str, path: PathKey, key: bool = False) -> None:
        super().__init__(message)
        self.path = path
        self.key = key


@value_class(frozen=False)
class _Budget:
    """What the document has cost so far: aliases are expanded, so each copy counts."""

    nodes: int = 0
    text: int = 0

    def spend(self, node: Any, path: PathKey, *, key: bool = False) -> None:
        self.nodes += 1
        if isinstance(node, str):
            self.text += len(node)
            if "\x00" in node:
                raise _OverBudget("a NUL character; no argument, environment value or path can hold one", path, key)
            if not node.isascii():
                _check_encodable(node, path, key)
        if self.nodes > MAX_NODES:
            raise _OverBudget(
                f"the document expands to more than {MAX_NODES} values (YAML aliases copy what they name)", path
            )
        if self.text > MAX_TEXT:
            raise _OverBudget(f"the document's strings expand to more than {MAX_TEXT} characters", path)


def nested_too_deep(text: str, file: str) -> Problem | None:
    """A problem at the first place the text nests deeper than `MAX_DEPTH`, else None."""
    found = deepest(text, MAX_DEPTH)
    if found is None:
        return None
    depth, line, column = found
    message = f"invalid YAML: nested {depth} levels deep here, more than {MAX_DEPTH}"
    return Problem(message, file=file, line=line, column=column)


def _check_encodable(text: str, path: PathKey, key: bool) -> None:
    # A YAML escape can write half of a UTF-16 pair ("\\ud800"), which no file, argv or
    # journal can hold: refused here, where the line is known.
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        char = f"U+{ord(text[err.start]):04X}"
        message = f"holds {char}, half of a UTF-16 surrogate pair, which is not a character"
        raise _OverBudget(message, path, key) from None


def _too_deep(text: str, file: str) -> Problem:
    # The parser recursed too far; the culprit is the line that opens the most brackets.
    lines = text.splitlines() or [""]
    depth = [line.count("[") + line.count("{") for line in lines]
    return Problem("invalid YAML: nested too deeply", file=file, line=depth.index(max(depth)) + 1)


def read_file(path: Path, *, what: str = "recipe file", limit: int = MAX_FILE_BYTES) -> str:
    """The text of a regular file of at most `limit` bytes, or a `RecipeError` saying why not.

    A FIFO, a device or a directory is refused from its `stat`, before anything opens
    it: a read from them could block forever or never end.
    """
    try:
        info = os.stat(path)
    except OSError as err:
        raise RecipeError([Problem(_os_reason(err), file=str(path))]) from None
    if not stat.S_ISREG(info.st_mode):
        raise RecipeError([Problem(f"is {_file_kind(info.st_mode)}, not a {what}", file=str(path))]) from None
    if info.st_size > limit:
        raise RecipeError([Problem(f"is {info.st_size} bytes; a {what} may hold at most {limit}", file=str(path))])
    try:
        # O_NONBLOCK: if the path was swapped for a FIFO since the stat, open still returns.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                raise RecipeError([Problem(f"is not a regular file, not a {what}", file=str(path))])
            raw = fh.read(limit + 1)
    except OSError as err:
        raise RecipeError([Problem(_os_reason(err), file=str(path))]) from None
    if len(raw) > limit:
        raise RecipeError([Problem(f"a {what} may hold at most {limit} bytes", file=str(path))])
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        raise RecipeError([Problem("not UTF-8 text", file=str(path), line=line)]) from None


def _os_reason(err: OSError) -> str:
    if isinstance(err, FileNotFoundError):
        return "no such file"
    if isinstance(err, IsADirectoryError):
        return "is a directory"
    return f"cannot read: {err.strerror or err}"


def _file_kind(mode: int) -> str:
    kinds = (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((name for test, name in kinds if test(mode)), "not a regular file")


def _pos(lc: tuple[int, int] | list[int] | None) -> tuple[int, int] | None:
    if lc is None:
        return None
    return (int(lc[0]) + 1, int(lc[1]) + 1)


def _plain(node: Any, path: PathKey, positions: Positions, budget: _Budget) -> Any:
    budget.spend(node, path)
    if isinstance(node, CommentedMap | CommentedSeq) and path not in positions.values:
        # where the mapping or list itself starts: the place a missing key is reported
        start = _pos((node.lc.line, node.lc.col)) if node.lc.line is not None else None
        if start:
            positions.values[path] = start
    if isinstance(node, CommentedMap):
        out: dict[str, Any] = {}
        for key in node:
            name = _scalar(key)
            if not isinstance(name, str):
                name = str(name)
            child = (*path, name)
            kpos = _pos(_safe(node.lc.key, key))
            vpos = _pos(_safe(node.lc.value, key))
            if kpos:
                positions.keys[child] = kpos
            budget.spend(name, child, key=True)  # a bad key is reported at the key
            # An empty value has no position of its own (ruamel reports the next
            # token's); the key is where the problem is.
            if vpos and node[key] is not None:
                positions.values[child] = vpos
            out[name] = _plain(node[key], child, positions, budget)
        return out
    if isinstance(node, CommentedSeq):
        items: list[Any] = []
        for i, item in enumerate(node):
            child = (*path, i)
            ipos = _pos(_safe(node.lc.item, i))
            if ipos:
                positions.values[child] = ipos
            items.append(_plain(item, child, positions, budget))
        return items
    return _scalar(node)


def _safe(getter: Any, key: Any) -> Any:
    try:
        return getter(key)
    except (KeyError, IndexError, TypeError, AttributeError):
        return None


def _scalar(value: Any) -> Any:
    """ruamel's scalar subclasses (kept for round-tripping) as plain Python values."""
    if value is None or type(value) in (str, int, float, bool):
        return value
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, datetime.date | datetime.datetime):
        return value.isoformat()
    return value


def walk(data: Any, path: PathKey = ()) -> Iterator[tuple[PathKey, Any]]:
    """Every (path, value) of plain data, depth first."""
    yield path, data
    if isinstance(data, dict):
        for key, value in data.items():
            yield from walk(value, (*path, key))
    elif isinstance(data, list | tuple):
        for i, value in enumerate(data):
            yield from walk(value, (*path, i))
