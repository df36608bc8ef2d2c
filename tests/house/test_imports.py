"""Each command imports what it uses (issue #36): checked through `sys.modules` of a real
`srtd` process at its exit, never by timing.

`srtd ps`, `--version`, `attach --once --json`, `stop`, `tail`, `logs` and the relay read
no recipe and draw no terminal view: none of them may load the recipe models, rich or
pygments, nor pydantic: the journal and the socket's messages are checked by `srtd._shape`.
`srtd ps` reads journals without the supervisor's anyio; the relay step imports neither.
`srtd run` of a saved plan needs no recipe models and no pydantic, and off a terminal no rich at all: its
console writes its lines and tables itself, and structlog is imported without rich.
`validate` and `plan` read the cluster settings without pydantic-settings.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from srtd.errors import EXIT_JOB_FAILED
from srtd.unit import UnitKind
from tests.attach.helpers import JobProcess
from tests.command import REPO, SRTD, srtd_env
from tests.supervisor.helpers import PlanMaker

# Every Python process of the command writes the names in its sys.modules to
# $SRTD_TEST_MODULES/<pid>.json as it exits.  `srtd run` execs its supervisor
# (srtd/cli/_supervise.py) in the same pid: its file says what the process that runs the job
# imported, the one that stays for the job's whole life (the units' files are others').
SITECUSTOMIZE = """\
import atexit, json, os, sys
out = os.environ.get("SRTD_TEST_MODULES")
if out:
    path = os.path.join(out, f"{os.getpid()}.json")
    atexit.register(lambda: open(path, "w").write(json.dumps(sorted(sys.modules))))
"""

RECIPE_MODELS = ("srtd.recipe", "srtd.cluster", "pydantic_settings")
TERMINAL = ("rich", "pygments")
PYDANTIC = ("pydantic", "pydantic_core")
DEMO = REPO / "recipes" / "local" / "demo.yaml"


def loaded(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None, program: tuple[str, ...] = SRTD
) -> tuple[int, set[str]]:
    out = tmp_path / "modules"
    out.mkdir(exist_ok=True)
    (out / "sitecustomize.py").write_text(SITECUSTOMIZE)
    path = os.pathsep.join(p for p in (str(out), os.environ.get("PYTHONPATH")) if p)
    with subprocess.Popen(
        [*program, *args],
        cwd=REPO,
        env=srtd_env({**(env or {}), "SRTD_TEST_MODULES": str(out), "PYTHONPATH": path}),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        proc.communicate(timeout=120)
    return proc.returncode, set(json.loads((out / f"{proc.pid}.json").read_text()))


def heavy(modules: set[str], *packages: str) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in packages or m.startswith(packages))


def test_version_imports_neither_pydantic_nor_the_commands(tmp_path: Path) -> None:
    code, modules = loaded(tmp_path, "--version")
    assert code == 0
    assert heavy(modules, "pydantic", "pydantic_core", *RECIPE_MODELS, *TERMINAL, "srtd.cli._attach") == []


@pytest.mark.parametrize(
    "args",
    [
        ("ps", "--local", "--json"),
        ("ps", "--local"),  # no job on this node: "no jobs", no table drawn
        ("stop", "no-such-job"),
        ("tail", "no-such-job", "u"),
        ("logs", "no-such-job", "u"),
        ("restart", "no-such-job", "u"),
    ],
)
def test_the_job_verbs_import_no_recipe_models_and_no_rich(tmp_path: Path, args: tuple[str, ...]) -> None:
    rt = tmp_path / "rt"
    code, modules = loaded(tmp_path, *args, env={"SRTD_RUNTIME_DIR": str(rt)})
    assert code in (0, 4)  # 4: no such job (attach failed), after the command's imports
    assert heavy(modules, *RECIPE_MODELS, *TERMINAL, *PYDANTIC) == []
    if args[0] == "ps":
        assert heavy(modules, "anyio", "srtd.supervisor") == []


def test_a_live_job_s_verbs_import_no_recipe_models_and_no_rich(tmp_path: Path) -> None:
    maker = PlanMaker(root=tmp_path / "job", token="srtdtest-imports")
    maker.unit("sleeper", argv=("sleep", "60"), marker=False)
    runtime = {"SRTD_RUNTIME_DIR": str(tmp_path / "rt")}
    job = JobProcess.of_plan(maker.plan(), maker.root, **runtime)
    try:
        socket = str(job.socket())
        job.running()
        for args in (("attach", socket, "--once", "--json"), ("tail", socket, "sleeper"), ("stop", socket, "--wait")):
            code, modules = loaded(tmp_path, *args, env=runtime)
            assert (args, code, heavy(modules, *RECIPE_MODELS, *TERMINAL, *PYDANTIC)) == (args, 0, [])
        assert job.finish()[0] == 143  # stopped as SIGTERM would stop it
    finally:
        job.kill()


def test_run_of_a_saved_plan_imports_no_recipe_models_and_no_pydantic(tmp_path: Path) -> None:
    """The plan's types are records checked by srtd/_record.py; the results' models (pydantic)
    load only once a benchmark with a results spec has measured something."""
    maker = PlanMaker(root=tmp_path / "job", token="srtdtest-imports")
    maker.unit("once", argv=("true",), marker=False, kind=UnitKind.BENCHMARK)
    plan = tmp_path / "plan.json"
    plan.write_text(maker.plan().dumps())
    code, modules = loaded(tmp_path, "run", str(plan), "--plain", env={"SRTD_RUNTIME_DIR": str(tmp_path / "rt")})
    assert code == 0
    assert heavy(modules, *RECIPE_MODELS, *PYDANTIC) == []
    # structlog's console without rich's traceback renderer (srtd/_structlog.py)
    assert heavy(modules, "pygments", "rich.traceback", "rich.pretty") == []
    assert "structlog" in modules
    # nor colorama (structlog writes ANSI codes itself off Windows), greenlet (its deprecated
    # thread-local context), RE2 (no unit has a log pattern) or the topology (no node was replaced)
    assert heavy(modules, "colorama", "greenlet", "re2", "srtd.topology") == []
    # inotify without ctypes.util (tempfile, random: srtd/supervisor/_inotify.py); no power
    # sampler (csv) for a plan without power telemetry
    assert "inotify_simple" in modules
    assert heavy(modules, "ctypes.util", "tempfile", "srtd.reporting._power", "csv") == []
    # the job runs in the process `srtd run` execs (srtd/cli/_supervise.py): no click there
    assert "srtd.cli._supervise" not in modules  # it ran as __main__
    assert heavy(modules, "click", "srtd.cli._main", "srtd.cli._run") == []


def test_run_of_a_saved_plan_alone_supervises_in_srtds_own_process_without_click(tmp_path: Path) -> None:
    """`srtd run PLAN.json` and nothing else: no choice is left to the command line, so the job
    is supervised in the process `srtd` started as, without click and without the exec."""
    maker = PlanMaker(root=tmp_path / "job", token="srtdtest-imports")
    maker.unit("once", argv=("true",), marker=False, kind=UnitKind.BENCHMARK)
    plan = tmp_path / "plan.json"
    plan.write_text(maker.plan().dumps())
    code, modules = loaded(tmp_path, "run", str(plan), env={"SRTD_RUNTIME_DIR": str(tmp_path / "rt")})
    assert code == 0
    assert "srtd.cli._supervise" in modules  # imported here: it was not exec'd as __main__
    assert heavy(modules, "click", "srtd.cli._main", "srtd.cli._run", *RECIPE_MODELS, *PYDANTIC) == []


def test_a_program_of_its_own_ends_through_run_program_without_click(tmp_path: Path) -> None:
    """`srtd.cli.run_program` gives srtd's other programs the command line's exit codes and words
    (srtd/cli/_outcome.py) without loading the command line."""
    maker = PlanMaker(root=tmp_path / "job", token="srtdtest-imports")
    maker.unit("fails", argv=("sh", "-c", "exit 3"), marker=False, kind=UnitKind.BENCHMARK)
    plan = tmp_path / "plan.json"
    plan.write_text(maker.plan().dumps())
    program = (sys.executable, str(REPO / "tests" / "programs" / "run_plan.py"))
    code, modules = loaded(tmp_path, str(plan), program=program)
    assert heavy(modules, "click", "srtd.cli._main") == []
    maker.root = tmp_path / "again"  # a log directory of its own
    plan.write_text(maker.plan().dumps())
    rt = {"SRTD_RUNTIME_DIR": str(tmp_path / "rt")}
    assert code == loaded(tmp_path, "run", str(plan), "--plain", env=rt)[0] == EXIT_JOB_FAILED


def test_the_process_that_runs_a_recipe_s_job_holds_no_recipe_models_and_no_pydantic(tmp_path: Path) -> None:
    """`srtd run recipe.yaml` plans with the recipe models (pydantic, the engines' table), then
    execs the supervisor on the plan it wrote: the job's own process never loaded them."""
    log_dir = tmp_path / "logs"
    code, modules = loaded(tmp_path, "run", str(DEMO), "--log-dir", str(log_dir), "--plain")
    assert code == 0
    assert json.loads((log_dir / "events.jsonl").read_text().splitlines()[-1])["state"] == "succeeded"
    assert heavy(modules, *RECIPE_MODELS, "srtd.engines", "srtd.topology", "click") == []
    assert {"srtd.supervisor", "srtd.launch._local", "srtd.attach._server"} <= modules
    # its HTTP probes' httpx came without httpx's command line (srtd/_httpx.py): click, pygments
    assert "httpx" in modules
    assert heavy(modules, "httpx._main", "pygments") == []
    # pydantic only for the benchmark's results, once it has measured (srtd.results)
    assert "srtd.results._readers" in modules


def test_run_off_a_terminal_imports_no_rich(tmp_path: Path) -> None:
    """`srtd run PLAN.json` as under sbatch (its output not a terminal) draws nothing: its lines, a
    unit's mirrored output, the failure and the summary table are written without rich."""
    maker = PlanMaker(root=tmp_path / "job", token="srtdtest-imports")
    says = "echo '[bold]not markup[/]'; exit 3"
    maker.unit("says", argv=("sh", "-c", says), marker=False, kind=UnitKind.BENCHMARK, echo=True)
    plan = tmp_path / "plan.json"
    plan.write_text(maker.plan().dumps())
    code, modules = loaded(tmp_path, "run", str(plan), env={"SRTD_RUNTIME_DIR": str(tmp_path / "rt")})
    assert code == 1  # the job failed: the failure, the summary and postmortem.txt's table were written
    assert (Path(maker.plan().log_dir) / "postmortem.txt").exists()
    assert heavy(modules, *TERMINAL) == []


def test_the_relay_step_imports_nothing_heavy(tmp_path: Path) -> None:
    """`srtd relay` runs in a step for every verb sent from the login node: it passes frames on."""
    code, modules = loaded(tmp_path, "relay", "no-such-job", env={"SRTD_RUNTIME_DIR": str(tmp_path / "rt")})
    assert code == 4
    assert heavy(modules, *PYDANTIC, "anyio", "structlog", *RECIPE_MODELS, *TERMINAL) == []


def test_validate_and_plan_still_load_the_recipe(tmp_path: Path) -> None:
    # ... and the cluster settings, which srtd reads itself: pydantic-settings, its asyncio and its
    # dotenv machinery, is not imported at all
    code, modules = loaded(tmp_path, "validate", str(DEMO))
    assert code == 0
    assert {"srtd.recipe", "srtd.cluster"} <= modules
    assert heavy(modules, "pydantic_settings") == []
    code, modules = loaded(tmp_path, "plan", str(DEMO), "--json", "--local")
    assert code == 0
    assert {"srtd.recipe", "srtd.cluster"} <= modules
    assert heavy(modules, "pydantic_settings") == []


def test_every_command_is_in_the_lazy_table() -> None:
    """`srtd.cli._commands` imports every command module: each name it registers is in `COMMANDS`,
    with the module that registers it (a command missing from the table would vanish from the CLI)."""
    import srtd.cli._commands  # noqa: F401
    from srtd.cli._main import COMMANDS, cli

    assert {name: command.callback.__module__ for name, command in cli.commands.items() if command.callback} == COMMANDS


def test_an_unknown_command_is_still_answered_with_the_closest_names(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "srtd", "valdate"]
    done = subprocess.run(argv, cwd=tmp_path, env=srtd_env(), capture_output=True, text=True, check=False)
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == "Error: No such command 'valdate'. Did you mean 'validate'?"
