"""Shared building blocks of the recipe models.

Every model is frozen and forbids unknown keys.  Validation is strict: YAML `"4"`
is not the integer 4 and `1` is not `true`, which is what the reference JSON
Schema says too.  The loader turns YAML sequences into tuples before validation,
so sequence fields are typed as tuples.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict
from pydantic_core import PydanticCustomError


class Section(BaseModel):
    """Base of every recipe section.

    Fields are documented with attribute docstrings; `attribute_docs` reads them
    for `srtd schema` only, so loading a recipe does not parse srtd's source.
    """

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        strict=True,
        populate_by_name=True,
    )


def _as_tuple(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


# Sequences arrive as tuples from the loader; Python callers may pass lists.
StrSeq = Annotated[tuple[str, ...], BeforeValidator(_as_tuple)]
NumSeq = Annotated[tuple[float, ...], BeforeValidator(_as_tuple)]

StrMap = dict[str, str]
AnyMap = dict[str, Any]


RULES_ERROR = "srtd_rules"


class Rules:
    """Collects the broken rules of one model so a file reports all of them at once.

    Paths are relative to the model that checks them; the loader prefixes the
    model's own location and points at the line of the offending key.
    """

    def __init__(self) -> None:
        self.problems: list[tuple[str, str]] = []

    def add(self, path: str, message: str) -> None:
        self.problems.append((path, message))

    def check(self) -> None:
        if self.problems:
            summary = "; ".join(f"{p}: {m}" if p else m for p, m in self.problems)
            raise PydanticCustomError(RULES_ERROR, summary, {"problems": list(self.problems)})


def attribute_docs(cls: type) -> dict[str, str]:
    """The docstrings written under a class's annotated fields."""
    import ast
    import inspect
    import itertools
    import textwrap

    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError, SyntaxError):
        return {}
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    docs: dict[str, str] = {}
    for field, after in itertools.pairwise(body):
        if (
            isinstance(field, ast.AnnAssign)
            and isinstance(field.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            docs[field.target.id] = inspect.cleandoc(after.value.value)
    return docs
