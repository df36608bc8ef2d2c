"""Developer sessions: `nox` runs lint, typecheck and tests (what CI runs)."""

from __future__ import annotations

import nox

nox.options.sessions = ["lint", "typecheck", "tests"]
nox.options.reuse_existing_virtualenvs = True
nox.options.default_venv_backend = "uv|virtualenv"

PYTHON = "3.11"


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff check and ruff format --check."""
    session.install("ruff==0.17.6")  # pinned: a new ruff must not turn CI red on its own
    session.run("ruff", "check", "srtd", "tests", "noxfile.py", "benchmarks", "scripts")
    session.run("ruff", "format", "--check", "srtd", "tests", "noxfile.py", "benchmarks", "scripts")


@nox.session(python=PYTHON)
def typecheck(session: nox.Session) -> None:
    """mypy in strict mode on srtd/."""
    session.install("-e", ".[dev]")
    session.run("mypy")


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """The test suite (pytest, anyio's plugin, hypothesis)."""
    session.install("-e", ".[dev]")
    session.run("pytest", "-q", *session.posargs)


@nox.session(python=PYTHON)
def fidelity(session: nox.Session) -> None:
    """How closely srtd launches what srtctl launches: agreement per upstream launch snapshot.

    Needs the shared reference material (SRTD_TEST_SHARED); `-- -u` lists unexplained differences.
    """
    session.install("-e", ".[dev]")
    session.run("python", "scripts/fidelity.py", *session.posargs)
