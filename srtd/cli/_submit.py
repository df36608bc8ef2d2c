"""`srtd submit`: one sbatch job per recipe, variant or sweep point, with srtd as the batch shell.

For each job: plan it (offline), submit the wrapper that `srtd plan --sbatch` shows
with `sbatch --hold`, freeze a copy of the recipe (and the cluster settings) into the
job's log directory, then release the job.  Holding first is what lets the frozen copy
live in a directory named after a job id that only sbatch hands out; the wrapper finds
it through `$SLURM_JOB_ID`.  `--wait` follows every job with `scontrol show job` until
it has ended and exits with the worst job exit code (a job's exit code is srtd's).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from srtd._files import write_under
from srtd._value import value_class
from srtd.attach import srtd_command
from srtd.cli._main import cli
from srtd.cli._verdict import located_plan
from srtd.errors import EXIT_OK, FileRefused, LaunchError, PlanError, RecipeError, UsageError

if TYPE_CHECKING:
    from srtd.cluster import Cluster
    from srtd.recipe import LoadedRecipe
    from srtd.unit import Plan

JOB_SLOT = "@SRTD_JOB_ID@"  # stands for the job id in paths until sbatch has given one
FROZEN_RECIPE = "recipe.yaml"
FROZEN_CLUSTER = "srtslurm.yaml"
SCRIPT_NAME = "sbatch.sh"
BATCH_OUTPUT = "srtd.out"
_POLL = 1.0


@value_class(frozen=False)
class Submission:
    loaded: LoadedRecipe
    plan: Plan
    log_dir: str  # with JOB_SLOT where the job id goes
    script: str
    job_id: str | None = None
    state: str | None = None
    exit_code: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def real_log_dir(self) -> str:
        return self.log_dir.replace(JOB_SLOT, self.job_id or "<job_id>")

    def record(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "job_id": self.job_id,
            "name": self.plan.name,
            "variant": self.loaded.variant,
            "log_dir": self.real_log_dir,
        }
        if self.state is not None:
            out["state"] = self.state
            out["exit_code"] = self.exit_code
        return out


def _prepare(loaded: LoadedRecipe, cluster: Cluster, cluster_file: Path | None) -> Submission:
    from srtd.plan import sbatch_script

    plan = located_plan(loaded, cluster, job_id=JOB_SLOT)  # plan's and validate's refusals, located
    log_dir = str(Path(plan.log_dir).resolve())
    in_job_dir = log_dir.replace(JOB_SLOT, "${SLURM_JOB_ID}")
    args = [f"{in_job_dir}/{FROZEN_RECIPE}"]
    if loaded.variant:
        args += ["--variant", loaded.variant]
    if cluster_file is not None:
        args += ["--cluster-config", f"{in_job_dir}/{FROZEN_CLUSTER}"]
    try:
        script = sbatch_script(plan, args, srtd=srtd_command())
    except PlanError as err:
        raise RecipeError([loaded.locate(problem) for problem in err.problems]) from None
    return Submission(loaded, plan, log_dir, script)


def _submit(sub: Submission, recipe_text: str, cluster_file: Path | None, sbatch_args: Sequence[str] = ()) -> None:
    from srtd.launch import cancel_job, mark_comment, release_job, submit_held

    output = sub.log_dir.replace(JOB_SLOT, "%j") + "/" + BATCH_OUTPUT
    if JOB_SLOT in sub.log_dir:
        # sbatch opens --output before the script runs; the directory must exist then.
        Path(sub.log_dir.split(JOB_SLOT)[0]).mkdir(parents=True, exist_ok=True)
    # the mark by which `srtd ps` finds srtd's jobs (docs/slurm.md)
    mark = mark_comment(name=sub.plan.name, variant=sub.loaded.variant, log_dir=sub.log_dir.replace(JOB_SLOT, "%j"))
    sub.job_id = submit_held(
        sub.script, output=output, chdir=Path.cwd(), name=sub.plan.name, comment=mark, extra=sbatch_args
    )
    log_dir = Path(sub.real_log_dir)
    try:
        log_dir.mkdir(parents=True, exist_ok=True)
        write_under(log_dir, log_dir / FROZEN_RECIPE, recipe_text, error=FileRefused)
        if cluster_file is not None:
            write_under(log_dir, log_dir / FROZEN_CLUSTER, cluster_file.read_bytes(), error=FileRefused)
        write_under(log_dir, log_dir / SCRIPT_NAME, sub.script, error=FileRefused)
    except OSError as e:
        cancel_job(sub.job_id)
        why = e.strerror or str(e)
        raise LaunchError(f"cannot freeze the recipe into {log_dir}: {why}; job {sub.job_id} cancelled") from e
    release_job(sub.job_id)


def _report(sub: Submission, extra: dict[str, Any] | None = None) -> None:
    """POST the submitted job to the status collectors (docs/recipe.md, status reporting).

    `extra` metadata goes along (`srtd sweep`'s campaign as `sweep`).  At most a few
    seconds when a collector does not answer; never fails the submission.
    """
    if sub.plan.reporting is None or sub.job_id is None:
        return
    from srtd.reporting import report_submitted

    metadata: dict[str, Any] = {"variant": sub.loaded.variant} if sub.loaded.variant else {}
    metadata.update(extra or {})
    report_submitted(sub.plan.reporting, sub.job_id, job_name=sub.plan.name, recipe=sub.plan.recipe, metadata=metadata)


def _wait(subs: list[Submission]) -> None:
    """Until every job has ended: its state and exit code (Slurm's, else the journal's)."""
    from srtd.attach import journal_end
    from srtd.launch import slurm_exit_code, wait_ended

    ended = wait_ended([s.job_id for s in subs if s.job_id is not None], interval=_POLL)
    for sub in subs:
        if sub.job_id is None:
            continue
        fields = ended.get(sub.job_id)
        journal = journal_end(Path(sub.real_log_dir))
        state = fields.get("JobState") if fields else None
        sub.state = state.lower() if state else (journal[0] if journal else "unknown")
        if fields is not None:
            sub.exit_code = slurm_exit_code(fields)
        else:
            sub.exit_code = journal[1] if journal else 1


def _prepare_all(
    recipes: tuple[Path, ...], variant: str | None, cluster_config: Path | None
) -> tuple[Path | None, list[tuple[Submission, str]]]:
    """Every job the recipes make (one per variant or sweep point), with its recipe's text."""
    from srtd.cluster import load_cluster
    from srtd.recipe import load_recipes

    cluster, cluster_file = load_cluster(cluster_config)
    if cluster_file is not None:
        cluster_file = cluster_file.resolve()
    prepared: list[tuple[Submission, str]] = []
    for recipe in recipes:
        try:
            text = recipe.read_text(encoding="utf-8")
        except OSError as err:
            raise UsageError(f"{recipe}: cannot read: {err.strerror}") from None
        for loaded in load_recipes(recipe, variant=variant):
            prepared.append((_prepare(loaded, cluster, cluster_file), text))
    return cluster_file, prepared


def _print_scripts(prepared: list[tuple[Submission, str]], as_json: bool) -> None:
    for sub, _ in prepared:
        if as_json:
            click.echo(json.dumps({**sub.record(), "script": sub.script}))
        else:
            variant_note = f" (variant {sub.loaded.variant})" if sub.loaded.variant else ""
            click.echo(f"# --- {sub.plan.name}{variant_note}")
            click.echo(sub.script, nl=False)


@cli.command()
@click.argument("recipes", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--variant", help="Override variant or sweep combination to submit (a name or a glob).")
@click.option("--cluster-config", type=click.Path(path_type=Path), help="srtslurm.yaml to read.")
@click.option("--dry-run", is_flag=True, help="Print the batch scripts; submit nothing.")
@click.option("--json", "as_json", is_flag=True, help="One JSON line per job (job_id, name, variant, log_dir).")
@click.option("--wait", "wait", is_flag=True, help="Wait for every job; exit with the worst job exit code.")
@click.option(
    "--attach", "attach", is_flag=True, help="Show the job live (queue, start, run) until it ends; exit with its code."
)
def submit(
    recipes: tuple[Path, ...],
    variant: str | None,
    cluster_config: Path | None,
    dry_run: bool,
    as_json: bool,
    wait: bool,
    attach: bool,
) -> int:
    """Submit RECIPE(s) to Slurm: one job per recipe, override variant or sweep point.

    Each job's batch script is what `srtd plan --sbatch` shows, ending in `exec srtd run
    <frozen recipe>`: srtd is the batch shell, so it receives the early warning
    (`--signal=B:USR1@N`) itself.  The recipe is frozen into the job's log directory.
    """
    if dry_run and (wait or attach):
        raise UsageError(f"--dry-run submits nothing to {'attach to' if attach else 'wait for'}")
    if attach and as_json:
        raise UsageError("--attach shows the live view; for JSON use --wait --json (or srtd attach JOB --json)")
    cluster_file, prepared = _prepare_all(recipes, variant, cluster_config)
    if dry_run:
        _print_scripts(prepared, as_json)
        return EXIT_OK
    if attach and len(prepared) != 1:
        raise UsageError(f"--attach follows one job, and these are {len(prepared)}; choose one with --variant")
    for sub, text in prepared:
        _submit(sub, text, cluster_file)
        _report(sub)
        if as_json:  # at once, also with --wait: a long wait must not hide the job ids
            click.echo(json.dumps(sub.record()))
        elif not as_json:
            variant_note = f" (variant {sub.loaded.variant})" if sub.loaded.variant else ""
            click.echo(f"submitted job {sub.job_id}: {sub.plan.name}{variant_note}; logs in {sub.real_log_dir}")
    if not (wait or attach):
        return EXIT_OK
    subs = [s for s, _ in prepared]
    if attach:
        from srtd.cli._attach import watch_submitted

        assert subs[0].job_id is not None
        watch_submitted(subs[0].job_id, Path(subs[0].real_log_dir))
    _wait(subs)
    worst = 0
    for sub in subs:
        if as_json:
            click.echo(json.dumps(sub.record()))
        else:
            click.echo(f"job {sub.job_id} ({sub.plan.name}): {sub.state}, exit code {sub.exit_code}")
        worst = max(worst, sub.exit_code or 0)
    return worst
