"""`srtd run`'s second half: the supervisor in a process of its own, that never loaded click,
the recipe models or pydantic.

`srtd run` parses its command line (click), plans a recipe (the recipe models, pydantic, the
engines' table) and reads the cluster's settings.  None of that is used again once the job
runs, yet a process keeps what it imported: about 17 MiB on the head node for a recipe, and
click's 1.6 MiB even for a saved plan.  So `srtd run` hands over: it execs this program
(`python -m srtd.cli._supervise HANDOVER`, the same pid) with what it decided, and the job
is supervised from the plan file, as `srtd plan --json` would have written it.

The handover is one small JSON argument (`Handover`): the plan file (a recipe's plan, already
written to its log directory; or a saved plan, read and checked here as `srtd run PLAN.json`
always did), where it runs, the console's options, the checks' settings, the cluster's node
watch, the local port claim (its open descriptor: the lock lives through the exec) and the
stop signals noted while `srtd run` started.  Stop signals that come during the exec wait,
blocked, and are noted here first thing (`srtd._early_signals`): none is lost, none kills.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from srtd import _early_signals, _gc
from srtd._files import write_under
from srtd._value import value_class
from srtd.cli._outcome import outcome, say
from srtd.errors import EXIT_INPUT, FileRefused, LaunchError, PlanError, UsageError

if TYPE_CHECKING:
    from srtd.launch import EarlyCheck, PortClaim, SlurmLauncher
    from srtd.supervisor import Console, Preflight
    from srtd.unit import Plan

PROGRAM = "srtd.cli._supervise"
LINES_HELD = 1.0  # seconds an event's line may wait on the console (the journal has it at once) ...
LINES_QUIET = 0.1  # ... for a pause of this long in the job's events


@value_class(frozen=False)
class Handover:
    """What `srtd run` decided, for the supervisor's process (JSON: plain values only)."""

    plan: str  # the plan file
    saved: bool  # a saved plan as the user gave it: read, checked and copied to its log dir here
    local: bool
    slurm_job: str | None = None
    as_json: bool = False
    plain: bool = False
    preflight: dict[str, Any] | None = None  # Preflight's fields; None: the defaults
    node_check: tuple[float, float] = (0.0, 0.0)  # the cluster's interval and lost-after (Slurm)
    claim: tuple[str, int] | None = None  # the local port claim: its file and open descriptor
    signals: list[int] = field(default_factory=list)  # stop signals noted before the exec

    def dumps(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def loads(cls, text: str) -> Handover:
        """What `dumps` wrote (JSON's lists back to the tuples); ValueError or TypeError otherwise."""
        handover = cls(**json.loads(text))
        handover.node_check = (float(handover.node_check[0]), float(handover.node_check[1]))
        handover.claim = (str(handover.claim[0]), int(handover.claim[1])) if handover.claim else None
        return handover


def hand_over(handover: Handover, claim: PortClaim | None = None) -> int:
    """Exec the supervisor's process on `handover` (the same pid, stdio and environment).

    Only when the command is the process (`srtd.cli.main`): invoked from a caller's process
    (click's CliRunner, a program calling `cli.main`), the job is supervised right here."""
    from srtd.cli import Process

    if not Process.owned:
        return supervise(handover, claim)
    if claim is not None:
        handover.claim = claim.hand_over()
    handover.signals = _early_signals.hand_over()  # from here a stop signal waits, blocked
    # the interpreter's own options too (-X importtime, -W, -O, ...): the stdlib's helper for
    # starting "this Python again", as multiprocessing does
    from subprocess import _args_from_interpreter_flags  # type: ignore[attr-defined]

    argv = [sys.executable, *_args_from_interpreter_flags(), "-m", PROGRAM, handover.dumps()]
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execv(sys.executable, argv)
    except OSError as err:
        _early_signals.take_over(handover.signals)
        if claim is not None:
            claim.release()
        raise LaunchError(f"cannot start the supervisor ({sys.executable}): {err.strerror}") from None


# --------------------------------------------------------------------------- the job's environment


def export_source_dir() -> None:
    """`$SRTCTL_SOURCE_DIR` for every unit (docs/recipe.md).

    srt-slurm's batch script exports it and every step inherits it; recipes name files under
    it (`bash ${SRTCTL_SOURCE_DIR}/configs/...`).  srtd's units inherit srtd's environment."""
    from srtd._source import SOURCE_DIR_VAR, source_dir

    os.environ[SOURCE_DIR_VAR] = source_dir()


def add_own_programs_to_path() -> None:
    """srtd's own programs (srtd-toy-worker, ...) live next to its interpreter: reachable even when
    its venv is not activated, without shadowing the user's python3 (which may be the one with
    Dynamo or vLLM installed): appended, never put first."""
    here = str(Path(sys.executable).parent)
    parts = os.environ.get("PATH", "").split(os.pathsep)
    if here not in parts:
        os.environ["PATH"] = os.pathsep.join([*parts, here])


def run_saved_plan_here(path: str) -> NoReturn:
    """`srtd run PLAN.json` alone, on this machine (`srtd.cli.main` saw it before loading click):
    what the command would decide is fixed (a saved plan, local, the console's defaults, the
    checks' defaults, no port claim), so the job is supervised in this process, with no
    command line parsed and no exec (about 50 ms and one interpreter's start sooner)."""
    _early_signals.catch()
    export_source_dir()
    add_own_programs_to_path()
    _supervise_and_exit(Handover(path, saved=True, local=True))


def _supervise_and_exit(handover: Handover) -> NoReturn:
    """The job's exit code as the process's, an error said as `srtd run` says it."""
    code = outcome(partial(supervise, handover))
    _early_signals.note_interrupts()  # srtd's last steps out are not interrupted halfway
    sys.exit(code)


# --------------------------------------------------------------------------- the plan file


def load_plan_file(path: Path) -> tuple[Plan, str]:
    """The saved plan, and its text (written to the log dir as it is when nothing changes it)."""
    from srtd._files import PLAN_LIMIT, read_text_back
    from srtd.unit import Plan, ShapeError

    try:
        text = read_text_back(path, limit=PLAN_LIMIT, error=UsageError)
    except OSError as err:
        raise UsageError(f"{path}: cannot read: {err.strerror}") from None
    try:
        plan = Plan.loads(text)
    except ShapeError as err:  # "where: why", as pydantic located it before
        raise PlanError(f"{path}: not a plan written by srtd plan --json ({err})") from None
    if escaping := plan.outside_log_dir():
        raise PlanError([f"{path}: {line}" for line in escaping])
    return plan, text


def prepare_log_dir(plan: Plan, text: str | None = None) -> Path:
    """The log directory, made, with the plan in it (`text`: the plan file's own, when it runs as saved).

    Rendering a plan of 1,000 units takes about 0.3 s here, and every unit's start waits for it.
    """
    log_dir = Path(plan.log_dir)
    try:
        log_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise LaunchError(f"cannot create the log directory {log_dir}: {err.strerror}") from None
    if os.path.lexists(log_dir / "events.jsonl"):
        raise LaunchError(f"{log_dir} already holds a job's journal; give another --log-dir or --job-id")
    if not os.access(log_dir, os.W_OK):
        raise LaunchError(f"the log directory {log_dir} is not writable")
    try:
        write_under(log_dir, log_dir / "plan.json", plan.dumps() if text is None else text, error=FileRefused)
    except FileRefused:  # it names the file and why
        raise
    except OSError as err:
        raise LaunchError(f"cannot write {log_dir / 'plan.json'}: {err.strerror}") from None
    return log_dir


def _plan_to_run(handover: Handover) -> Plan:
    """The plan the job runs, its log directory made and holding it."""
    path = Path(handover.plan)
    plan, text = load_plan_file(path)
    if not handover.saved:
        return plan  # srtd run wrote it there, as it runs
    if plan.local and not handover.local:
        raise UsageError(f"{path} was planned for this machine; run it with --local, or plan it for Slurm")
    if handover.local and not plan.local:
        raise UsageError(f"{path} was planned for Slurm; plan it with --local to run it on this machine")
    if handover.local:
        prepare_log_dir(plan, text)  # copied as it is
        return plan
    from srtd.launch import with_srun_lines

    plan = with_srun_lines(plan, handover.slurm_job)  # plan.json shows each unit's exact srun line
    prepare_log_dir(plan)
    return plan


# --------------------------------------------------------------------------- the job


def run_console(*, as_json: bool, plain: bool) -> Console:
    """`--json`: the journal's lines on stdout.  On a terminal: the attach view of the whole run
    (docs/attach.md).  `--plain`, or into a pipe: one line per event on stderr, and nothing drawn
    in place (on a terminal the lines console would draw its startup table in place).  A
    line waits for a pause in the events, and at most `LINES_HELD` s, so that a starting
    job's launches come first (`TerminalConsole`'s `hold`)."""
    from srtd.supervisor import JsonConsole, TerminalConsole

    if as_json:
        return JsonConsole()
    if plain or not sys.stderr.isatty():
        return TerminalConsole(tty=False, hold=LINES_HELD, quiet=LINES_QUIET)
    from srtd.attach import RunView
    from srtd.supervisor import LiveConsole

    return LiveConsole(RunView())


def _slurm_launcher(plan: Plan, handover: Handover) -> SlurmLauncher:
    from srtd.launch import SlurmLauncher, slurm_addresses, slurmd_targets

    assert handover.slurm_job is not None
    addresses = plan.addresses
    if handover.saved:
        # A saved plan may have been made offline (node names as addresses): probes
        # still go to what Slurm says each node's address is.
        addresses = {**addresses, **slurm_addresses(list(plan.allocation))[0]}
    check, lost = handover.node_check
    return SlurmLauncher(
        job_id=handover.slurm_job,
        log_dir=Path(plan.log_dir),
        addresses=addresses,
        early_warning=plan.teardown.early_warning_seconds,
        slurmd=slurmd_targets(list(plan.allocation)) if check > 0 else None,
        node_check_interval=check,
        node_lost_after=lost,
    )


def _preflight(handover: Handover) -> Preflight:
    from srtd.supervisor import Preflight  # light (srtd/supervisor/_preflight_argv.py): before the supervisor loads

    given = dict(handover.preflight or {})
    if "memory_flags" in given:
        given["memory_flags"] = tuple(given["memory_flags"])
    return Preflight(**given)


def supervise(handover: Handover, claim: PortClaim | None = None) -> int:
    """The job, from the handed-over plan to its exit code (`claim`: a local port claim held
    in this process; one handed over through the exec is `handover.claim`).

    Locally, the node's check starts as soon as the plan is read, before the supervisor's
    modules are imported (`early_checks`)."""
    if handover.claim is not None:
        from srtd.launch import PortClaim as Claim  # (with tempfile: only a recipe run here has one)

        claim = Claim.taken_over(*handover.claim)
    early: list[EarlyCheck] = []
    try:
        plan = _plan_to_run(handover)
        preflight = _preflight(handover)
        if handover.local:
            early = early_checks(plan, preflight)
        from srtd.attach import serve
        from srtd.launch import LocalLauncher
        from srtd.reporting import power_telemetry, publish_results, status_service
        from srtd.supervisor import run

        _gc.resume()  # what the start made (modules, the plan) is frozen: never walked again

        # the attach socket (srtd attach, ps, stop, restart, tail); status reporting;
        # power telemetry: sampled while the job runs, checked before the publishers see the results
        power_service, check_power = power_telemetry()
        options: dict[str, Any] = {
            "log_dir": Path(plan.log_dir),
            "console": run_console(as_json=handover.as_json, plain=handover.plain),
            "services": [serve, status_service(), power_service],
            "after_job": [check_power, publish_results],  # reporting.publishers, once the results passed
            "preflight": preflight,
        }
        if handover.local:
            return run(plan, LocalLauncher(early_checks=early), **options)
        launcher = _slurm_launcher(plan, handover)
        return run(plan, launcher, explain=launcher.explain, **options)
    finally:
        for check in early:  # never asked for: the job ended before its preflight
            check.discard()
        if claim is not None:
            claim.release()


def early_checks(plan: Plan, preflight: Preflight) -> list[EarlyCheck]:
    """This machine's node checks, started now, as the job's preflight will ask for them.  One
    that cannot be set up here (no memory file: the process is out of descriptors) is left to
    the preflight, which runs it the usual way and says what went wrong."""
    from srtd.launch import EarlyCheck
    from srtd.supervisor import node_checks

    started = []
    for argv in node_checks(plan, preflight):
        try:
            started.append(EarlyCheck(argv))
        except OSError:
            continue
    return started


def _handover_from(argv: list[str]) -> Handover:
    try:
        (text,) = argv
        return Handover.loads(text)
    except (ValueError, TypeError, IndexError):
        raise UsageError(f"python -m {PROGRAM} is started by `srtd run`, with what it decided") from None


def main(argv: list[str] | None = None) -> NoReturn:
    _gc.pause()  # resumed in `supervise`, once the job's imports and plan are in
    try:
        handover = _handover_from(sys.argv[1:] if argv is None else argv)
    except UsageError as err:
        say(f"srtd: {err}")
        sys.exit(EXIT_INPUT)
    _early_signals.take_over(handover.signals)
    _supervise_and_exit(handover)


if __name__ == "__main__":
    main()
