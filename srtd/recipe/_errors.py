"""Turning pydantic's validation errors into one-line problems that point at the line."""

from __future__ import annotations

import difflib
import types
import typing
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from srtd._registry import unknown_name
from srtd._yaml import PathKey, Positions, dotted
from srtd.errors import Problem
from srtd.recipe._base import RULES_ERROR
from srtd.recipe._legacy import legacy_hint


def problems_from(
    error: ValidationError, data: Any, positions: Positions, root: type[BaseModel], variant: str | None
) -> list[Problem]:
    problems: list[Problem] = []
    for detail in error.errors(include_url=False):
        problems.extend(_convert(detail, data, positions, root, variant))
    # A union field reports a mismatch per member; when one member got deeper
    # (the input was a list, and an item is wrong), the shallow "should be a
    # string" of the other member is noise.
    deep = {p.path for p in problems}
    problems = [
        p
        for p in problems
        if not (p.message.startswith("input should be") and any(d.startswith(p.path + ".") for d in deep))
    ]
    # One problem per place and message, in file order.
    unique = {(p.line, p.column, p.path, p.message): p for p in problems}
    return sorted(unique.values(), key=lambda p: (p.line or 0, p.column or 0, p.path))


def data_path(loc: tuple[int | str, ...], data: Any, *, missing: bool = False) -> PathKey:
    """The path in the document of a pydantic `loc`: union tags and validator names dropped."""
    path: list[str | int] = []
    node: Any = data
    for n, part in enumerate(loc):
        last = n == len(loc) - 1
        if isinstance(node, dict) and part in node:
            path.append(part)
            node = node[part]
        elif isinstance(node, list | tuple) and isinstance(part, int) and 0 <= part < len(node):
            path.append(part)
            node = node[part]
        elif missing and last and isinstance(node, dict) and isinstance(part, str) and _looks_like_field(part):
            # A missing key: keep it so the message names it.
            path.append(part)
            node = None
    return tuple(path)


def _looks_like_field(part: str) -> bool:
    # pydantic inserts union member tags such as "function-before[...]" or a
    # model's class name; field names are snake_case (or kebab, via alias).
    return part.replace("_", "").replace("-", "").isalnum() and not part[:1].isupper()


def _show(value: Any) -> str:
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list"
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


def _convert(
    detail: ErrorDetails, data: Any, positions: Positions, root: type[BaseModel], variant: str | None
) -> list[Problem]:
    kind = detail["type"]
    loc = tuple(detail["loc"])
    path = data_path(loc, data, missing=kind == "missing")
    if kind == RULES_ERROR:
        ctx = detail.get("ctx") or {}
        out = []
        for rel, message in ctx.get("problems", []):
            full = (*path, *[p for p in str(rel).split(".") if p]) if rel else path
            full = tuple(int(p) if isinstance(p, str) and p.isascii() and p.isdigit() else p for p in full)
            out.append(positions.problem(message, full, prefer_key=True, variant=variant))
        return out
    if kind == "extra_forbidden":
        return [positions.problem(_unknown_field(path, data, root), path, prefer_key=True, variant=variant)]
    if kind == "missing":
        return [positions.problem("required field is missing", path, prefer_key=True, variant=variant)]
    if kind == "union_tag_invalid":
        ctx = detail.get("ctx") or {}
        tags = str(ctx.get("expected_tags", "")).replace("'", "").split(", ")
        message = unknown_name("type", str(ctx.get("tag")), tags)
        return [positions.problem(message, (*path, "type"), variant=variant)]
    if kind == "union_tag_not_found":
        return [positions.problem("needs a `type`", path, prefer_key=True, variant=variant)]
    message = _lower_first(detail["msg"])
    if kind == "literal_error":
        message = message.replace("input should be", "must be")
    if kind in ("dict_type", "model_type", "model_attributes_type"):
        message = "must be a mapping"
    elif kind in ("tuple_type", "list_type"):
        message = "must be a list"
    message = f"{message}, got {_show(detail.get('input'))}"
    # A mapping's key is wrong (`env: {1BAD: x}`): point at the key, not its value.
    return [positions.problem(message, path, prefer_key=loc[-1:] == ("[key]",), variant=variant)]


def _lower_first(text: str) -> str:
    text = text.split("[", maxsplit=1)[0].strip().rstrip(".")
    return text[:1].lower() + text[1:]


def _unknown_field(path: PathKey, data: Any, root: type[BaseModel]) -> str:
    name = str(path[-1]) if path else "?"
    hint = legacy_hint(dotted(path))
    if hint:
        return f"unknown field {name!r}: {hint}"
    allowed = _allowed_fields(path[:-1], data, root)
    close = difflib.get_close_matches(name, allowed, n=1, cutoff=0.75)
    if close:
        return f"unknown field {name!r}; did you mean {close[0]!r}?"
    return f"unknown field {name!r}"


def _allowed_fields(parent: PathKey, data: Any, root: type[BaseModel]) -> list[str]:
    """Field names (and aliases) of the model that the mapping at `parent` is read as."""
    annotation: Any = root
    node = data
    for part in parent:
        if isinstance(node, dict):
            node = node.get(part)
        elif isinstance(node, list | tuple) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        else:
            node = None
        annotation = _child_annotation(annotation, part, node)
        if annotation is None:
            return []
    model = _pick_model(annotation, node)
    if model is None:
        return []
    names = []
    for field_name, info in model.model_fields.items():
        names.append(info.alias or field_name)
    return names


def _child_annotation(annotation: Any, part: str | int, node: Any) -> Any:
    model = _pick_model(annotation, node if isinstance(node, dict) else None)
    if model is not None and isinstance(part, str):
        for field_name, info in model.model_fields.items():
            if part in (field_name, info.alias):
                return info.annotation
        return None
    for arg in _members(annotation):
        origin = typing.get_origin(arg)
        if origin in (tuple, list) and isinstance(part, int):
            return typing.get_args(arg)[0]
        if origin is dict and isinstance(part, str):
            return typing.get_args(arg)[1]
    return None


def _members(annotation: Any) -> list[Any]:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _members(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        out: list[Any] = []
        for arg in typing.get_args(annotation):
            out.extend(_members(arg))
        return out
    return [annotation]


def _pick_model(annotation: Any, node: Any) -> type[BaseModel] | None:
    models = [m for m in _members(annotation) if isinstance(m, type) and issubclass(m, BaseModel)]
    if not models:
        return None
    if len(models) > 1 and isinstance(node, dict) and "type" in node:
        for model in models:
            field = model.model_fields.get("type")
            if field is not None and field.default == node["type"]:
                return model
    return models[0]
