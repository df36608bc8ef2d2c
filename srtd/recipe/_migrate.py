"""Rewriting a schema 1 recipe as schema 2, keeping its comments and key order.

The document is loaded with ruamel's round-trip loader and changed in place:
a key that moves takes its comment with it (ruamel keeps a key's comment in its
parent's `ca.items`), new keys are inserted where the key they replace stood.
The folding rules are srt-slurm's own (`srtctl migrate`):

- `resources.<role>_nodes / _workers / _critical`, `gpus_per_<role>` -> `roles.<role>.*`
  (`decode_nodes: 0` -> `colocate`)
- `backend` -> `engine` (type and engine-wide knobs) and `roles.<role>.env / args /
  extra_args / kv_events`; `backend.mooncake_kv_store` -> a `mooncake-master` service
  whose env is copied into every role's env
- `infra` (and `resources.etcd_nats_dedicated_node`) -> etcd / nats services
- `dynamo.hash / version / wheel / cargo_patches` -> `dynamo.source`; `dynamo.sidecar`
  -> `roles.<role>.sidecar`
- placement fields -> `placement.node` (dedicated wins); `frontend.type: sglang` ->
  `sglang-router`; `auxiliary_services` -> `services`
- `schema: 2` is set.

In a file marked `schema: 2` only the schema 1 keys are folded and values keep their
2.0 meaning, except that a block with `backend:` and no `engine:` is pre-2.0 in all
but its `schema:` line: its `frontend.type: sglang` becomes `sglang-router` (a note).

Whatever has no schema 2 field is taken out of the live document and kept, as
YAML comments, in a block at the end of the file, each one named in a note.
Nothing is dropped in silence: every comment of the original is in the output.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from ruamel.yaml.comments import CommentedMap
from ruamel.yaml.error import YAMLError

from srtd._value import value_class
from srtd._yaml import parse_text
from srtd.errors import Problem, RecipeError
from srtd.recipe._errors import data_path
from srtd.recipe._migrate_folds import FoldContext, fold
from srtd.recipe._recipe import Recipe
from srtd.recipe._variants import OVERRIDE_KEY
from srtd.recipe._yaml_edit import child_map, comment_lines, dump, indent_moved_comments, pop_key, put_key, round_trip

KEPT_HEADER = "srtd migrate: schema 1 content with no schema 2 equivalent, kept as comments"


@value_class
class Migration:
    """The outcome of migrating one file."""

    text: str
    """The schema 2 text; the input itself when nothing had to change."""
    changed: bool
    notes: tuple[str, ...] = ()
    """One line per decision the user should look at (kept content, dropped knobs)."""


# --------------------------------------------------------------------------- what stays untranslated


def _unknown_keys(doc: CommentedMap) -> list[tuple[str | int, ...]]:
    """Paths of keys no schema 2 field reads (the recipe model's `extra_forbidden`)."""
    data, _ = parse_text(dump(doc), "<migrated>")
    try:
        Recipe.model_validate(data)
    except ValidationError as err:
        errors = err.errors(include_url=False)
    else:
        errors = []
    paths: list[tuple[str | int, ...]] = []
    for detail in errors:
        path = data_path(tuple(detail["loc"]), data)
        if detail["type"] == "literal_error" and path == ("profiling", "type"):
            path = ("profiling",)  # a profiler schema 2 does not have: the whole section goes
        elif detail["type"] != "extra_forbidden":
            continue
        if path and path not in paths:
            paths.append(path)
    # Schema 1 recipes spelled out the model path; schema 2 workers get it from `model.path`.
    for role, entry in (data.get("roles") or {}).items():
        if isinstance(entry, dict) and isinstance(entry.get("args"), dict) and "model-path" in entry["args"]:
            paths.append(("roles", role, "args", "model-path"))
    return paths


def _take_out(doc: CommentedMap, path: tuple[str | int, ...], kept: CommentedMap) -> bool:
    """Move the key at `path` from the document into `kept` (same nesting)."""
    node: Any = doc
    target = kept
    for part in path[:-1]:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return False
        target = child_map(target, str(part))
    last = path[-1]
    if not isinstance(node, CommentedMap) or last not in node:
        return False
    value, comment = pop_key(node, str(last))
    put_key(target, str(last), value, comment)
    return True


# --------------------------------------------------------------------------- entry point


def _schema(doc: Any) -> Any:
    if not isinstance(doc, dict):
        return None
    if "schema" in doc:
        return doc["schema"]
    base = doc.get("base")
    return base.get("schema") if isinstance(base, dict) else None


def migrate_text(text: str, file: str = "<recipe>") -> Migration:
    """Schema 1 -> schema 2.  A file that needs no change comes back as it is."""
    parse_text(text, file)  # every YAML mistake as the loader reports it, with its line
    try:
        doc = round_trip().load(text)
    except YAMLError as err:  # pragma: no cover - parse_text refused it already
        raise RecipeError([Problem(f"invalid YAML: {err}", file=file)]) from None
    if not isinstance(doc, CommentedMap):
        raise RecipeError([Problem("the top level is not a mapping; a recipe is a YAML mapping", file=file, line=1)])
    before = dump(doc)
    original_comments = list(dict.fromkeys(comment_lines(doc)))
    ctx = FoldContext()
    blocks: list[tuple[str, CommentedMap]] = []
    leftovers_only = _schema(doc) == 2
    if isinstance(doc.get("base"), CommentedMap):
        fold(doc["base"], ctx, partial=False, leftovers_only=leftovers_only)
        blocks.append(("base", doc["base"]))
        ctx.roles = tuple(doc["base"].get("roles") or ())
        for key in list(doc):
            if OVERRIDE_KEY.match(str(key)) and isinstance(doc[key], CommentedMap):
                fold(doc[key], ctx, partial=True, leftovers_only=leftovers_only)
                blocks.append((str(key), doc[key]))
    else:
        fold(doc, ctx, partial=False, leftovers_only=leftovers_only)
        blocks.append(("", doc))
    notes = list(ctx.notes)
    kept = CommentedMap()
    for name, block in [] if leftovers_only else blocks:
        target = child_map(kept, name) if name else kept
        for path in _unknown_keys(block):
            if _take_out(block, path, target):
                where = ".".join(str(p) for p in (name, *path) if p != "")
                why = "srtd sets it itself" if path[-1] == "model-path" else "no schema 2 field reads it"
                notes.append(f"{where}: {why}; kept as a comment at the end of the file")
    if _schema(doc) != 2:
        base = doc.get("base")
        if "schema" in doc:
            doc["schema"] = 2
        elif isinstance(base, CommentedMap) and "schema" in base:
            base["schema"] = 2
        else:
            doc.insert(0, "schema", 2)
    indent_moved_comments(doc)
    after = dump(doc)
    if after == before:
        return Migration(text, False, ())
    after += _kept_block(kept)
    missing = [c for c in original_comments if _bare(c) not in after]
    if missing:
        after += "".join(f"{line}\n" for line in ["# srtd migrate: comments whose key was removed", *missing])
    return Migration(after, True, tuple(notes))


def _bare(comment: str) -> str:
    return comment.lstrip("# ").strip()


def _kept_block(kept: CommentedMap) -> str:
    def prune(node: Any) -> Any:
        if isinstance(node, CommentedMap):
            for key in list(node):
                if isinstance(node[key], CommentedMap) and not prune(node[key]):
                    del node[key]
            return node
        return node

    prune(kept)
    if not kept:
        return ""
    lines = dump(kept).splitlines()
    return "\n# " + KEPT_HEADER + "\n" + "".join(f"# {line}\n" if line.strip() else "#\n" for line in lines)
