"""The srun line of a unit: the one place that turns a `Unit` into `srun ... bash -c '...'`.

`srtd plan` prints exactly this line and `SlurmLauncher` executes exactly this argv, so
a user can copy a unit's line out of the plan and run it by hand inside the allocation.

Shape (flags in this order, each value one argv token, never shell-interpreted):

    srun --jobid=<job> --overlap [--mpi=..] [--oversubscribe] [--cpu-bind=..]
         --nodes=<n> --ntasks=<n> [--cpus-per-task=..] --nodelist=<a,b> [--het-group=..]
         [--chdir=<cwd>] --output=<log> --open-mode=append
         [--container-image=.. --container-name=.. --no-container-entrypoint
          --no-container-mount-home [--container-mounts=..] [--container-remap-root]]
         [srun_options as --key=value / --key] --job-name=<step> [--export=ALL,K=V,..]
         bash -c '<step-id record>; exports; unset; preamble; exec argv'

An `srun_options` entry naming a flag srtd wrote replaces it, so no flag appears twice
(the flags srtd derives from the plan, `SRUN_OWNED_FLAGS`, no option may set).

The wrapper is the only shell.  Every value that reaches it is `shlex.quote`d: env
values, argv words, paths.  Its first line records `$SLURM_JOB_ID.$SLURM_STEP_ID` in the
step file, so the launcher knows which step to `scancel` without asking `squeue` by name.
A unit with `srun.shell = False` (shell-less images) runs its argv bare; its env then
travels in srun's own environment, rendered as an `env K=V srun ...` prefix.
"""

from __future__ import annotations

import hashlib
import re
import shlex
from dataclasses import replace
from pathlib import Path

from srtd.errors import LaunchError
from srtd.unit import SRUN_OWNED_FLAGS, Plan, Unit

STEP_DIR = ".srtd-steps"  # under the log dir: where each step's wrapper records its id
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def step_name(unit: str, attempt: int) -> str:
    """The Slurm step name of an attempt: the unit's name, `<name>_r<n>` for restart n."""
    return unit if attempt == 0 else f"{unit}_r{attempt}"


def step_file(log_dir: Path | str, step: str) -> Path:
    return Path(log_dir) / STEP_DIR / f"{step}.id"


def _env_name(unit: Unit, name: str) -> str:
    if not _ENV_NAME.fullmatch(name):
        raise LaunchError(f"{unit.name}: {name!r} is not a valid environment variable name")
    return name


def unit_environment(unit: Unit, attempt: int) -> dict[str, str]:
    """What the unit's task gets on top of srun's environment."""
    env = {_env_name(unit, k): v for k, v in unit.env.items()}
    env["SRTD_UNIT"] = unit.name
    env["SRTD_ATTEMPT"] = str(attempt)
    return env


def wrapper_script(unit: Unit, *, attempt: int, record: Path | None) -> str:
    """The `bash -c` text: record the step id, export, unset, preamble, exec argv."""
    q = shlex.quote
    lines: list[str] = []
    if record is not None:
        # `$SLURM_PROCID` stays outside the quotes so each task writes its own temp file.
        tmp_word = q(str(record.with_name(record.name + ".tmp-"))) + '"$SLURM_PROCID"'
        lines.append(f'echo "$SLURM_JOB_ID.$SLURM_STEP_ID" > {tmp_word} && mv -f {tmp_word} {q(str(record))}')
    for name, value in unit_environment(unit, attempt).items():
        lines.append(f"export {name}={q(value)}")
    if unit.unset_env:
        lines.append("unset -- " + " ".join(q(_env_name(unit, n)) for n in unit.unset_env))
    if unit.preamble:
        lines.append(unit.preamble)
    lines.append("exec " + shlex.join(unit.argv))
    return "\n".join(lines)


def container_name(image: str, job_id: str, *, remap_root: bool) -> str:
    """One name per image per job, so every step of that image on a node shares one unpacked rootfs."""
    digest = hashlib.sha256(image.encode()).hexdigest()[:12]
    return f"srtd_{digest}_{job_id}" + ("_root" if remap_root else "")


def srun_nodelist(unit: Unit) -> list[str]:
    """The hosts of `--nodelist`: the unit's nodes, or under `distribution=arbitrary` one host per task.

    Arbitrary distribution places task i on the i-th host listed, so an MPI step's rank 0 lands on
    the unit's first node (its MASTER_ADDR) whatever order Slurm keeps the allocation's nodes in.
    """
    if unit.srun.options.get("distribution") != "arbitrary":
        return list(unit.nodes)
    per_node = max(unit.srun.ntasks // len(unit.nodes), 1)
    return [node for node in unit.nodes for _ in range(per_node)]


def _set_flag(unit: Unit, argv: list[str], key: str, value: str) -> None:
    """An `srun_options` entry: replaces the flag of that name srtd wrote, else comes after them.

    srun reads a repeated flag's last value, so a repeat would only hide which one holds.
    """
    if key in SRUN_OWNED_FLAGS:
        raise LaunchError(f"{unit.name}: srun option --{key} is srtd's own (it sets it from the plan); leave it out")
    word = f"--{key}={value}" if value != "" else f"--{key}"
    for i, old in enumerate(argv):
        if old == f"--{key}" or old.startswith(f"--{key}="):
            argv[i] = word
            return
    argv.append(word)


def srun_argv(
    unit: Unit,
    *,
    job_id: str,
    attempt: int,
    log_path: Path | str,
    record: Path | None,
    srun: str = "srun",
) -> list[str]:
    """The full argv that launches `unit` (attempt `attempt`) as a step of job `job_id`."""
    if not unit.argv:
        raise LaunchError(f"{unit.name}: empty argv")
    if not unit.nodes:
        raise LaunchError(f"{unit.name}: no node to run on")
    opts = unit.srun
    argv = [srun, f"--jobid={job_id}", "--overlap"]
    if opts.mpi:
        argv.append(f"--mpi={opts.mpi}")
    if opts.oversubscribe:
        argv.append("--oversubscribe")
    if opts.cpu_bind:
        argv.append(f"--cpu-bind={opts.cpu_bind}")
    argv += [f"--nodes={len(unit.nodes)}", f"--ntasks={max(opts.ntasks, len(unit.nodes))}"]
    if opts.cpus_per_task:
        argv.append(f"--cpus-per-task={opts.cpus_per_task}")
    argv.append(f"--nodelist={','.join(srun_nodelist(unit))}")
    if opts.het_group is not None:
        argv.append(f"--het-group={opts.het_group}")
    if unit.cwd:
        argv.append(f"--chdir={unit.cwd}")
    # srtd creates the file fresh before each attempt; append keeps srun from truncating
    # lines the task wrote on another node in between.
    argv += [f"--output={log_path}", "--open-mode=append"]
    if unit.container is not None:
        c = unit.container
        argv += [
            f"--container-image={c.image}",
            f"--container-name={container_name(c.image, job_id, remap_root=c.remap_root)}",
            "--no-container-entrypoint",
            "--no-container-mount-home",
        ]
        if c.mounts:
            argv.append("--container-mounts=" + ",".join(f"{host}:{inside}" for host, inside in c.mounts.items()))
        if c.remap_root:
            argv.append("--container-remap-root")
    for key, value in opts.options.items():
        _set_flag(unit, argv, key, value)
    argv.append(f"--job-name={step_name(unit.name, attempt)}")
    if opts.export_env:
        argv.append("--export=ALL," + ",".join(f"{_env_name(unit, k)}={v}" for k, v in opts.export_env.items()))
    if opts.shell:
        argv += ["bash", "-c", wrapper_script(unit, attempt=attempt, record=record)]
    else:
        argv += list(unit.argv)
    return argv


def shell_less_prefix(unit: Unit, attempt: int) -> list[str]:
    """`env [-u K].. K=V..` for a unit without the bash wrapper (its env rides on srun's)."""
    if unit.srun.shell:
        return []
    prefix = ["env"]
    for name in unit.unset_env:
        prefix += ["-u", _env_name(unit, name)]
    prefix += [f"{k}={v}" for k, v in unit_environment(unit, attempt).items()]
    return prefix


def srun_line(unit: Unit, *, job_id: str, log_dir: Path | str, attempt: int = 0) -> str:
    """The copy-pasteable command line (what `srtd plan` shows for a unit under Slurm)."""
    log_path = Path(log_dir) / unit.log
    record = step_file(log_dir, step_name(unit.name, attempt)) if unit.srun.shell else None
    argv = srun_argv(unit, job_id=job_id, attempt=attempt, log_path=log_path, record=record)
    return shlex.join(shell_less_prefix(unit, attempt) + argv)


def with_srun_lines(plan: Plan, job_id: str | None = None) -> Plan:
    """The plan with each unit's srun line (`Plan.srun_lines`); a local plan as it is."""
    if plan.local:
        return plan
    job = job_id or plan.job_id
    lines = {u.name: srun_line(u, job_id=job, log_dir=plan.log_dir) for u in plan.units}
    return replace(plan, srun_lines=lines)
