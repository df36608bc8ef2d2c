"""Developer sessions: `nox` runs lint, typecheck and tests; `nox -s dynamo` the real Dynamo
stack; `nox -s slurm` the Slurm tests on a real dev cluster; `nox -s browser` the collector's
dashboard in Debian's chromium.

CI (.ci/run) runs all of them.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import nox

nox.options.sessions = ["lint", "typecheck", "tests"]
nox.options.reuse_existing_virtualenvs = True
nox.options.default_venv_backend = "uv|virtualenv"

PYTHON = "3.11"
ROOT = Path(__file__).resolve().parent

# ---------------------------------------------------------------- the real Dynamo stack
# Where `nox -s dynamo` keeps what it prepares, reused across runs (override with
# SRTD_DYNAMO_STACK).  `stack.env` in it is what a shell sources to `srtd run` the
# recipes/local/dynamo-*.yaml recipes by hand.
STACK = Path(os.environ.get("SRTD_DYNAMO_STACK", ROOT / ".nox" / "dynamo-stack")).resolve()
TINY_MODEL = Path("/tmp/srtd-tiny-model")  # the path recipes/local/dynamo-*.yaml name
DYNAMO = "1.6.1"
# ai-dynamo 1.6.1 requires `aisimulate` on Python >= 3.11, a placeholder on PyPI that
# downloads from NVIDIA's index (unreachable here); the mocker and frontend never import
# it.  So: the two Dynamo wheels without dependencies, then their other dependencies as
# the wheels' METADATA lists them.
DYNAMO_STEPS = (
    ("--no-deps", f"ai-dynamo=={DYNAMO}", f"ai-dynamo-runtime=={DYNAMO}"),
    (
        "aiohttp<4.0,>=3.14.3",
        "certifi>=2026.10.19",
        "kubernetes<33.0.0,>=32.0.1",
        "msgspec>=0.19.0",
        "prometheus-client<1.0,>=0.23.1",
        "pyzmq>=26.0.0",
        "redis<9.0.0,>=6.2.0",
        "tqdm>=4.0.0",
        "transformers>=4.56.0",
        "typing-extensions>=4.10.0",
        "zstandard<1.0,>=0.23.0",
        "pydantic>=2.10.6,<=2.13.5",
        "uvloop>=0.21.0",
    ),
)
AIPERF_STEPS = (("aiperf==0.13.0",),)
# Debian packages by the executable the job runs
APT = {"etcd": "etcd-server", "nats-server": "nats-server"}
APT_DIRS = ("/usr/bin", "/usr/sbin", "/usr/local/bin")


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff check and ruff format --check."""
    session.install("ruff==0.17.6")  # pinned: a new ruff must not turn CI red on its own
    session.run("ruff", "check", "srtd", "tests", "noxfile.py", "perf", "scripts")
    session.run("ruff", "format", "--check", "srtd", "tests", "noxfile.py", "perf", "scripts")


@nox.session(python=PYTHON)
def typecheck(session: nox.Session) -> None:
    """mypy in strict mode on srtd/ and perf/."""
    session.install("-e", ".[dev]")
    session.run("mypy")


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """The test suite (pytest, anyio's plugin, hypothesis); tests/dynamo/ skips here."""
    session.install("-e", ".[dev]")
    session.run("pytest", "-q", *session.posargs)


@nox.session(python=PYTHON)
def fidelity(session: nox.Session) -> None:
    """How closely srtd launches what srtctl launches: agreement per upstream launch snapshot.

    Needs the shared reference material (SRTD_TEST_SHARED); `-- -u` lists unexplained differences.
    """
    session.install("-e", ".[dev]")
    session.run("python", "scripts/fidelity.py", *session.posargs)


@nox.session(python=PYTHON)
def dynamo(session: nox.Session) -> None:
    """The real serving stack end to end: Dynamo's frontend and mocker, etcd, NATS, aiperf (tests/dynamo/).

    Prepares, once, under SRTD_DYNAMO_STACK (default .nox/dynamo-stack): a venv with
    ai-dynamo, a venv with aiperf, Debian's etcd-server and nats-server, and the tiny
    model directory; then runs tests/dynamo/, where a missing piece fails, never skips.
    """
    started = time.monotonic()
    session.install("-e", ".[dev]")
    dynamo_venv = _venv(session, STACK / "ai-dynamo", DYNAMO_STEPS)
    aiperf_venv = _venv(session, STACK / "aiperf", AIPERF_STEPS)
    binaries = _apt(session)
    if not (TINY_MODEL / "config.json").exists():  # the generator writes config.json last
        session.run(str(dynamo_venv / "bin" / "python"), "scripts/make_tiny_model.py", str(TINY_MODEL), external=True)
    env = {
        "SRTD_DYNAMO_E2E": "1",
        "SRTD_DYNAMO_BIN": str(dynamo_venv / "bin"),
        "SRTD_DYNAMO_AIPERF": str(aiperf_venv / "bin" / "aiperf"),
        "SRTD_DYNAMO_MODEL": str(TINY_MODEL),
        "SRTD_DYNAMO_ETCD": binaries["etcd"],
        "SRTD_DYNAMO_NATS": binaries["nats-server"],
    }
    _write_env_file(dynamo_venv, aiperf_venv, binaries)
    # tests/dynamo/test_slurm.py runs the agg recipe on the dev Slurm cluster (docs/slurm.md)
    session.run("scripts/slurm-dev-cluster", "up", "4", external=True)
    session.log(f"dynamo: prepared in {time.monotonic() - started:.0f} s; stack in {STACK}")
    session.run("pytest", "-q", "-p", "no:cacheprovider", "tests/dynamo", *session.posargs, env=env)
    session.log(f"dynamo: session wall time {time.monotonic() - started:.0f} s")


def _venv(session: nox.Session, where: Path, steps: tuple[tuple[str, ...], ...]) -> Path:
    """A venv with `steps` installed, reused while its recorded steps are the same."""
    stamp = where / "srtd-installed.json"
    wanted = json.dumps([list(s) for s in steps])
    if stamp.exists() and stamp.read_text() == wanted and (where / "bin" / "python").exists():
        session.log(f"reusing {where}")
        return where
    uv = shutil.which("uv")
    if uv is None:
        session.error("the dynamo session needs `uv` on PATH (pip install uv)")
    session.run(uv, "venv", "-q", "--clear", "-p", PYTHON, str(where), external=True)
    for step in steps:
        session.run(uv, "pip", "install", "-q", "-p", str(where), *step, external=True)
    stamp.write_text(wanted)
    return where


def _apt(session: nox.Session) -> dict[str, str]:
    """etcd and nats-server from Debian when missing; their paths."""

    def find(exe: str) -> str | None:
        path = os.pathsep.join([os.environ.get("PATH", ""), *APT_DIRS])
        return shutil.which(exe, path=path)

    _apt_get(session, [pkg for exe, pkg in APT.items() if find(exe) is None])
    found = {exe: find(exe) for exe in APT}
    absent = [f"{exe} ({APT[exe]})" for exe, path in found.items() if path is None]
    if absent:
        session.error(f"still missing after apt-get: {', '.join(absent)}")
    return {exe: str(path) for exe, path in found.items()}


def _apt_get(session: nox.Session, missing: list[str]) -> None:
    """Install Debian packages (after `apt-get update`); nothing when none is missing."""
    if not missing:
        return
    if shutil.which("apt-get") is None:
        session.error(f"{', '.join(missing)} missing and there is no apt-get: install them first")
    sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
    env = {"DEBIAN_FRONTEND": "noninteractive"}
    session.run(*sudo, "apt-get", "update", "-q", external=True, env=env)
    session.run(*sudo, "apt-get", "install", "-y", "-q", *missing, external=True, env=env)


def _write_env_file(dynamo_venv: Path, aiperf_venv: Path, binaries: dict[str, str]) -> None:
    """`. <stack>/stack.env` puts the Dynamo venv first on PATH and points srtd at aiperf, etcd, nats."""
    aiperf = str(aiperf_venv / "bin" / "aiperf")
    settings = {"aiperf": aiperf, "etcd": binaries["etcd"], "nats": binaries["nats-server"]}
    (STACK / "stack.env").write_text(
        "# written by `nox -s dynamo`: source it, then `srtd run recipes/local/dynamo-agg.yaml`\n"
        f"export PATH={dynamo_venv / 'bin'}:$PATH\n"
        f"export SRTD_BINARIES='{json.dumps(settings)}'\n"
    )


@nox.session(python=PYTHON)
def slurm(session: nox.Session) -> None:
    """The Slurm tests (tests/slurm) on a real 4-node dev cluster, brought up first (needs root).

    Fails, never skips, when the cluster cannot start: the script says why.
    """
    session.install("-e", ".[dev]")
    session.run("scripts/slurm-dev-cluster", "up", "4", external=True)
    session.run("pytest", "-q", "tests/slurm", *session.posargs, env={"SRTD_TEST_SLURM": "1"})


CHROMIUM = Path("/usr/bin/chromium")  # Debian's; Playwright drives it, never a browser of its own


@nox.session(python=PYTHON)
def browser(session: nox.Session) -> None:
    """The collector's dashboard in a real browser (tests/browser): Debian's chromium, headless, via Playwright.

    Installs chromium with apt-get when it is missing and the playwright package (no browser
    download: the tests launch /usr/bin/chromium); screenshots go to docs/img.
    """
    _apt_get(session, [] if CHROMIUM.exists() else ["chromium"])
    session.install("-e", ".[dev,browser]")
    env = {"SRTD_TEST_BROWSER": "1", "SRTD_SCREENSHOTS": str(ROOT / "docs" / "img")}
    session.run("pytest", "-q", "-p", "no:cacheprovider", "tests/browser", *session.posargs, env=env)


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Benchmarks (never in the default sessions or CI): results/*.json and docs/performance.md.

    `nox -s bench` runs every scenario; `nox -s bench -- readiness peers` a few; `-- --quick`
    a smoke run.  supervisord, circus and matplotlib are installed here only.
    """
    # node_loss reuses the Slurm tests' helpers (tests/slurm/conftest.py), which import pytest
    session.install("-e", ".[collector]", "supervisor", "circus", "matplotlib", "pytest")
    session.run("python", "-m", "perf", *session.posargs)
