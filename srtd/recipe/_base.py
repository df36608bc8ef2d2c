"""Shared building blocks of the recipe models.

Every model is frozen and forbids unknown keys.  Validation is strict: YAML `"4"`
is not the integer 4 and `1` is not `true`, which is what the reference JSON
Schema says too.  The loader turns YAML sequences into tuples before validation,
so sequence fields are typed as tuples.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict
from pydantic_core import PydanticCustomError

from srtd.patterns import log_pattern_error
from srtd.unit import SRUN_OWNED_FLAGS, unsafe_name

# Budgets on what a recipe multiplies, checked when it loads (docs/recipe.md#limits).
# Every node and worker becomes units, ports and log files in the plan, built in a
# few milliseconds each: 1024 nodes plan in about 10 s.  The largest recipes in use
# ask for 8 nodes per role and 16 in all, and the largest serving deployments run on
# about a hundred nodes, so 1024 leaves ten times that; 10**12 nodes must not reach
# the planner, which would build their names until memory runs out.
MAX_JOB_NODES = 1024
MAX_WORKERS = 1024  # in all roles together: 128 nodes of 8 one-GPU workers


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
        # YAML's .nan and .inf are never a duration, a count or a ratio srtd can act on.
        allow_inf_nan=False,
    )


def _as_tuple(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


# Sequences arrive as tuples from the loader; Python callers may pass lists.
StrSeq = Annotated[tuple[str, ...], BeforeValidator(_as_tuple)]
NumSeq = Annotated[tuple[float, ...], BeforeValidator(_as_tuple)]

StrMap = dict[str, str]
AnyMap = dict[str, Any]

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _env_name(value: str) -> str:
    if not ENV_NAME.fullmatch(value):
        raise PydanticCustomError(
            "srtd_env_name", "not an environment variable name (letters, digits and _, not starting with a digit)"
        )
    return value


def _path_safe(value: str) -> str:
    if not value:
        raise PydanticCustomError("srtd_name", "must not be empty")
    if unsafe_name(value):
        raise PydanticCustomError("srtd_name", "names a log file, so it may not hold `/`, `..` or control characters")
    return value


# Slurm's time formats (sbatch --time): minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS.
_SLURM_TIME = re.compile(r"\d+(:\d{1,2}){0,2}|\d+-\d{1,2}(:\d{1,2}){0,2}|UNLIMITED|INFINITE", re.IGNORECASE)


def _slurm_time(value: str) -> str:
    if not _SLURM_TIME.fullmatch(value):
        raise PydanticCustomError(
            "srtd_slurm_time",
            "not a Slurm time limit (minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS or UNLIMITED)",
        )
    return value


def _srun_options(value: dict[str, str]) -> dict[str, str]:
    owned = [key for key in value if key in SRUN_OWNED_FLAGS]
    if owned:
        problems = [(key, f"srtd sets --{key} itself (from the plan); leave it out") for key in owned]
        raise PydanticCustomError(RULES_ERROR, "; ".join(m for _, m in problems), {"problems": problems})
    return value


SlurmTime = Annotated[str, AfterValidator(_slurm_time)]
"""A time limit as sbatch --time reads it."""
EnvName = Annotated[str, AfterValidator(_env_name)]
EnvMap = dict[EnvName, str]
"""An environment: names as the shell and `env` accept them; NUL is refused by the YAML reader."""
SrunOptions = Annotated[dict[str, str], AfterValidator(_srun_options)]
"""srun options (`key: value` -> `--key=value`): any flag but the ones srtd derives from the plan."""
Name = Annotated[str, AfterValidator(_path_safe)]
"""A name that becomes a unit's name, a log file and a Slurm step name."""


RULES_ERROR = "srtd_rules"


LOG_PATTERN_RULE = "is not a log pattern srtd can use (RE2 syntax: no backreferences, no lookaround)"


class Rules:
    """Collects the broken rules of one model so a file reports all of them at once.

    Paths are relative to the model that checks them; the loader prefixes the
    model's own location and points at the line of the offending key.
    """

    def __init__(self) -> None:
        self.problems: list[tuple[str, str]] = []

    def add(self, path: str, message: str) -> None:
        self.problems.append((path, message))

    def argv(self, path: str, argv: tuple[str, ...]) -> None:
        """An argv the recipe writes: not empty, no blank word."""
        if not argv:
            self.add(path, "must not be empty")
        for i, arg in enumerate(argv):
            if not arg.strip():
                self.add(f"{path}.{i}", "must not be blank")

    def log_patterns(self, path: str, patterns: tuple[str, ...]) -> None:
        """Patterns searched in a unit's log lines: each one RE2 can match in linear time (srtd/patterns.py)."""
        for i, pattern in enumerate(patterns):
            if (why := log_pattern_error(pattern)) is not None:
                self.add(f"{path}.{i}" if path else str(i), f"{LOG_PATTERN_RULE}: {why}")

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
