"""The srun line: its shape, every corpus recipe under --nodes, and quoting of hostile values.

The quoting tests execute the rendered `bash -c` wrapper with the real bash and compare
what the program received, byte for byte, with what the unit said.
"""

from __future__ import annotations

import itertools
import json
import os
import shlex
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from srtd.errors import LaunchError, RecipeError
from srtd.launch import srun_argv, srun_line, srun_nodelist, step_name, with_srun_lines, wrapper_script
from srtd.plan import build_plan, check_recipe
from srtd.recipe import load_recipes
from srtd.topology import expand
from srtd.unit import Container, Srun, Unit, UnitKind
from tests.command import SRTD
from tests.plan.test_corpus_plans import plannable, recipes_of
from tests.reference import CORPUS, need_shared

ROOT = Path(__file__).resolve().parents[2]

HOSTILE = [
    "$(touch {canary})",
    "`touch {canary}`",
    "it's \"quoted\" and 'single'",
    "two  spaces and\ta tab",
    "line one\nline two\n",
    "; touch {canary} #",
    "$HOME ${PATH} $1 $@ \\ \\n",
    "",
    "-",
    "ünïcödé ✓",
    "'; exit 3; '",
]

DUMP = (
    "import json, os, sys; "
    "print(json.dumps({'argv': sys.argv[1:], 'env': {k: v for k, v in os.environ.items() if k.startswith('H_')}}))"
)


def unit(**over: object) -> Unit:
    fields: dict[str, object] = {
        "name": "w0",
        "kind": UnitKind.WORKER,
        "phase": "workers",
        "nodes": ("node1",),
        "argv": ("prog", "--flag", "value"),
        "log": "w0.out",
    }
    fields.update(over)
    return Unit(**fields)  # type: ignore[arg-type]


def test_the_srun_line_has_the_documented_shape() -> None:
    u = unit(
        nodes=("gpu-01", "gpu-02"),
        env={"A": "1"},
        unset_env=("VLLM_PORT",),
        cwd="/work",
        preamble="ulimit -n 4096",
        container=Container(image="/c/img.sqsh", mounts={"/logs": "/logs", "/m": "/model"}),
        srun=Srun(
            ntasks=4, mpi="pmix", oversubscribe=True, cpu_bind="none", cpus_per_task=8, options={"exclusive": ""}
        ),
    )
    argv = srun_argv(u, job_id="42", attempt=2, log_path="/l/w0.out", record=Path("/l/.srtd-steps/w0_r2.id"))
    flags = argv[: argv.index("bash")]
    container_name = next(f for f in flags if f.startswith("--container-name="))
    assert flags == [
        "srun",
        "--jobid=42",
        "--overlap",
        "--mpi=pmix",
        "--oversubscribe",
        "--cpu-bind=none",
        "--nodes=2",
        "--ntasks=4",
        "--cpus-per-task=8",
        "--nodelist=gpu-01,gpu-02",
        "--chdir=/work",
        "--output=/l/w0.out",
        "--open-mode=append",
        "--container-image=/c/img.sqsh",
        container_name,
        "--no-container-entrypoint",
        "--no-container-mount-home",
        "--container-mounts=/logs:/logs,/m:/model",
        "--exclusive",
        "--job-name=w0_r2",
    ]
    assert container_name.startswith("--container-name=srtd_")
    assert container_name.endswith("_42")
    assert argv[-3:-1] == ["bash", "-c"]
    assert argv[-1].splitlines() == [
        'echo "$SLURM_JOB_ID.$SLURM_STEP_ID" > /l/.srtd-steps/w0_r2.id.tmp-"$SLURM_PROCID" '
        '&& mv -f /l/.srtd-steps/w0_r2.id.tmp-"$SLURM_PROCID" /l/.srtd-steps/w0_r2.id',
        "export A=1",
        "export SRTD_UNIT=w0",
        "export SRTD_ATTEMPT=2",
        "unset -- VLLM_PORT",
        "ulimit -n 4096",
        "exec prog --flag value",
    ]


def test_restarts_are_steps_named_r_n() -> None:
    assert [step_name("agg_0_n1", n) for n in (0, 1, 2)] == ["agg_0_n1", "agg_0_n1_r1", "agg_0_n1_r2"]


def test_a_shell_less_unit_runs_bare_with_its_env_on_sruns() -> None:
    u = unit(env={"K": "v w"}, unset_env=("X",), srun=Srun(shell=False, export_env={"ENROOT_REMAP_ROOT": "yes"}))
    line = shlex.split(srun_line(u, job_id="7", log_dir="/l"))
    assert line[:6] == ["env", "-u", "X", "K=v w", "SRTD_UNIT=w0", "SRTD_ATTEMPT=0"]
    assert line[-4:] == ["--export=ALL,ENROOT_REMAP_ROOT=yes", "prog", "--flag", "value"]
    assert "bash" not in line


def test_an_env_name_that_is_not_one_is_refused() -> None:
    with pytest.raises(LaunchError, match=r"w0: 'A;touch x' is not a valid environment variable name"):
        srun_argv(unit(env={"A;touch x": "1"}), job_id="1", attempt=0, log_path="/l", record=None)


def run_wrapper(u: Unit, tmp_path: Path) -> dict[str, object]:
    """Execute the wrapper exactly as srun would hand it to bash on the node."""
    record = tmp_path / "steps" / "w0.id"
    record.parent.mkdir(exist_ok=True)
    script = wrapper_script(u, attempt=0, record=record)
    env = {"PATH": os.environ["PATH"], "SLURM_JOB_ID": "99", "SLURM_STEP_ID": "3", "SLURM_PROCID": "0"}
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, check=False, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert record.read_text() == "99.3\n"
    return json.loads(done.stdout)  # type: ignore[no-any-return]


@pytest.mark.parametrize("template", HOSTILE)
def test_hostile_values_reach_the_program_exactly_and_run_nothing(template: str, tmp_path: Path) -> None:
    canary = tmp_path / "pwned"
    value = template.replace("{canary}", str(canary))
    u = unit(
        argv=(sys.executable, "-c", DUMP, value, f"--opt={value}", value),
        env={"H_VALUE": value, "H_PLAIN": "ok"},
        preamble="export H_FROM_PREAMBLE=1",
    )
    got = run_wrapper(u, tmp_path)
    assert got == {
        "argv": [value, f"--opt={value}", value],
        "env": {"H_VALUE": value, "H_PLAIN": "ok", "H_FROM_PREAMBLE": "1"},
    }
    assert not canary.exists()


def test_the_whole_srun_line_survives_a_shell_round_trip(tmp_path: Path) -> None:
    value = "$(touch x) 'q' \"d\"\nnext line"
    u = unit(argv=("prog", value), env={"H": value}, cwd=str(tmp_path / "a dir"))
    line = srun_line(u, job_id="5", log_dir=tmp_path / "logs with space")
    argv = srun_argv(
        u,
        job_id="5",
        attempt=0,
        log_path=tmp_path / "logs with space" / "w0.out",
        record=tmp_path / "logs with space" / ".srtd-steps" / "w0.id",
    )
    assert shlex.split(line) == argv


@pytest.mark.parametrize("key", plannable())
def test_every_recipe_under_nodes_has_an_srun_line_per_unit(key: str) -> None:
    if key.startswith("corpus:"):
        need_shared()
    for loaded in recipes_of(key):
        plan = build_plan(loaded, nodes=expand("gpu-[001-064]"), job_id="4242", log_dir="/out/4242/logs")
        lined = with_srun_lines(plan)
        assert set(lined.srun_lines) == {u.name for u in plan.units}
        for u in plan.units:
            words = shlex.split(lined.srun_lines[u.name])
            if words[0] == "env":
                words = words[words.index("srun") :]
            assert words[:3] == ["srun", "--jobid=4242", "--overlap"]
            assert f"--job-name={u.name}" in words
            assert f"--nodelist={','.join(srun_nodelist(u))}" in words
            assert repeated_flags(words) == [], u.name


def repeated_flags(words: list[str]) -> list[str]:
    """srun's own flags (the words before the program) that appear more than once."""
    flags = list(itertools.takewhile(lambda w: w.startswith("--"), words[1:]))
    return sorted({f for f in (w.split("=")[0] for w in flags) if [w.split("=")[0] for w in flags].count(f) > 1})


def every_corpus_file() -> list[str]:
    """Every YAML file of the shared corpus (srt-slurm's examples, its v1 recipes, the forks)."""
    return sorted(p.relative_to(CORPUS).as_posix() for p in CORPUS.rglob("*.yaml"))


@pytest.mark.parametrize("path", every_corpus_file())
def test_no_srun_line_of_a_corpus_recipe_repeats_a_flag(path: str) -> None:
    """Every recipe the loader takes, in every corner of the corpus: one srun flag, said once.

    (The nginx in front of several frontends said --container-remap-root twice.)
    """
    try:
        loaded = load_recipes(CORPUS / path)
    except RecipeError:
        pytest.skip("not a recipe srtd loads (schema 1, or an override fragment)")
    for recipe in loaded:
        if check_recipe(recipe):
            continue
        lined = with_srun_lines(build_plan(recipe, nodes=expand("gpu-[001-064]"), job_id="7", log_dir="/out"))
        for name, line in lined.srun_lines.items():
            words = shlex.split(line)
            words = words[words.index("srun") :]
            assert repeated_flags(words) == [], f"{recipe.variant or ''} {name}"


def test_an_srun_option_replaces_the_flag_srtd_wrote_of_its_name() -> None:
    u = unit(srun=Srun(mpi="pmi2", cpu_bind="none", options={"mpi": "pmix", "cpu-bind": "cores", "mem": "0"}))
    u = replace(u, container=Container(image="img", remap_root=True))
    u = replace(u, srun=replace(u.srun, options={**u.srun.options, "container-remap-root": ""}))
    argv = srun_argv(u, job_id="5", attempt=0, log_path="/l/w0.out", record=None)
    flags = list(itertools.takewhile(lambda w: w.startswith("--"), argv[1:]))
    assert [w for w in flags if w.startswith(("--mpi", "--cpu-bind", "--container-remap-root", "--mem"))] == [
        "--mpi=pmix",
        "--cpu-bind=cores",
        "--container-remap-root",
        "--mem=0",
    ]


@pytest.mark.parametrize("flag", ["jobid", "nodelist", "output", "job-name", "export", "container-name"])
def test_an_srun_option_may_not_set_a_flag_srtd_derives_from_the_plan(flag: str) -> None:
    with pytest.raises(LaunchError, match=f"w0: srun option --{flag} is srtd's own"):
        srun_argv(unit(srun=Srun(options={flag: "x"})), job_id="5", attempt=0, log_path="/l", record=None)


def test_srtd_plan_prints_srun_lines_in_text_and_json(tmp_path: Path) -> None:
    recipe = ROOT / "recipes" / "slurm-dev" / "demo.yaml"
    config = ROOT / "scripts" / "slurm-dev.srtslurm.yaml"
    base = [*SRTD, "plan", str(recipe), "--nodes", "node[1-4]", "--cluster-config", str(config)]
    base += ["--job-id", "77", "--log-dir", "/out/77"]
    text = subprocess.run(base, capture_output=True, text=True, check=True, env={**os.environ, "NO_COLOR": "1"}).stdout
    data = json.loads(subprocess.run([*base, "--json"], capture_output=True, text=True, check=True).stdout)
    lines = data["srun_lines"]
    assert set(lines) == {u["name"] for u in data["units"]}
    assert lines["prefill_0_node1"].startswith(
        "srun --jobid=77 --overlap --nodes=1 --ntasks=1 --nodelist=node1 --output=/out/77/workers/node1_prefill_w0.out"
    )
    first_line_of_each = [line.splitlines()[0] for line in lines.values()]
    for first in first_line_of_each:
        assert f"    $ {first}" in text.splitlines()
    local = subprocess.run(
        [*SRTD, "plan", str(recipe), "--local", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "srun_lines" not in json.loads(local.stdout)
