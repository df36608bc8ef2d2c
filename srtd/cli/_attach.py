"""`srtd ps`, `attach`, `stop`, `restart`, `signal`, `tail`: thin clients of a job's socket."""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from srtd.cli._main import cli
from srtd.errors import AttachError

if TYPE_CHECKING:
    from srtd.attach import Connection, ListedJob
    from srtd.events import Event

REFRESH = 0.1  # seconds between redraws of the live view
PIPE_WIDTH = 140  # columns when the output is not a terminal


def console() -> Any:
    """Rich output on stdout: the terminal's width, or `PIPE_WIDTH` into a pipe or file."""
    from rich.console import Console

    return Console(highlight=False, width=None if sys.stdout.isatty() else PIPE_WIDTH)


def _choose(job: str | None) -> str:
    """JOB as given, or the only running job of this user: on this node, else on the cluster."""
    from srtd.attach import DEAD, list_jobs

    if job is not None:
        return job
    jobs = [j for j in list_jobs(cluster=False) if j.state == "running"]  # this node's first: on a batch host
    if not jobs:
        jobs = [j for j in list_jobs() if j.state == "running" and j.stage != DEAD]
    if len(jobs) == 1:
        return jobs[0].socket if jobs[0].batch_host is None and jobs[0].socket else jobs[0].job_id
    if not jobs:
        raise AttachError("no running job of yours (srtd ps lists them)")
    listing = "; ".join(f"{j.job_id} ({j.name}, {j.stage or j.state})" for j in jobs)
    raise AttachError(f"{len(jobs)} running jobs, name one: {listing}")


def _stage_text(job: ListedJob) -> str:
    if job.stage is None:
        return "-"
    from srtd.events import FINAL_JOB_STATES

    if not job.units or job.stage in FINAL_JOB_STATES:
        return job.stage
    return f"{job.stage} ({job.ready}/{job.units} ready)"


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line per job.")
@click.option("--local", is_flag=True, help="Only the jobs running on this node (their sockets); do not ask Slurm.")
def ps(as_json: bool, local: bool) -> None:
    """This user's jobs: those srtd submitted to Slurm (pending, running, recently ended), and this node's."""
    from srtd.attach import list_jobs
    from srtd.errors import LaunchError

    unreached: LaunchError | None = None
    try:
        jobs = list_jobs(cluster=not local)
    except LaunchError as e:  # squeue failed (no controller): this node's jobs are still worth listing
        jobs, unreached = list_jobs(cluster=False), LaunchError(f"{e}; listed this node's jobs only")
    _print_jobs(jobs, as_json)
    if unreached is not None:
        raise unreached


def _print_jobs(jobs: list[ListedJob], as_json: bool) -> None:
    if as_json:
        for job in jobs:
            click.echo(json.dumps(job.as_json()))
        return
    if not jobs:
        click.echo("no jobs")
        return
    from rich.table import Table  # the table's view only: `--json` draws nothing

    from srtd.attach import clock_time

    table = Table(show_edge=False)
    for column in ("job", "name", "variant", "state", "stage", "nodes", "started", "log dir"):
        table.add_column(column)
    for job in jobs:
        state = f"{job.state} ({job.reason})" if job.reason else job.state
        started = clock_time(job.started) if job.started else "-"
        nodes = job.nodes or "-"
        table.add_row(job.job_id, job.name, job.variant or "-", state, _stage_text(job), nodes, started, job.log_dir)
    console().print(table)


@cli.command(name="relay", hidden=True)
@click.argument("job")
@click.option("--log-dir", type=click.Path(path_type=Path), help="The job's log directory (its attach.json).")
def relay_cmd(job: str, log_dir: Path | None) -> int:
    """The relay step's task: connects JOB's socket on this node to stdin/stdout (see docs/attach.md)."""
    from srtd.attach import run_relay

    return run_relay(job, log_dir)


@cli.command()
@click.argument("job", required=False)
@click.option("--json", "as_json", is_flag=True, help="Stream the raw events (with --once: one snapshot object).")
@click.option("--once", is_flag=True, help="Print the current state once and exit.")
@click.option(
    "--replay",
    "replay",
    type=click.Path(path_type=Path, file_okay=False),
    help="Rebuild the view from LOG_DIR/events.jsonl instead of a live socket.",
)
def attach(job: str | None, as_json: bool, once: bool, replay: Path | None) -> None:
    """Watch a running job live: units, their state and the latest events.

    JOB is a job id, a log directory or a socket path; without it, this user's only
    running job.  With --replay LOG_DIR, the same view from a (finished) job's journal.
    """
    if replay is not None:
        if job is not None:
            raise AttachError("give either JOB or --replay LOG_DIR, not both")
        _replay(replay, as_json=as_json, once=once)
        return
    target = _choose(job)
    if once:
        _once(target, as_json=as_json)
    elif as_json:
        _stream_json(target)
    else:
        _live(target)


def journal_of(log_dir: Path) -> list[Event]:
    """The events of LOG_DIR/events.jsonl, or an `AttachError` that says what is wrong.

    A line that is not an event is left out with one warning line on stderr (`events.jsonl:N: why`).
    """
    from srtd._journal_file import JOURNAL_NAME, read_journal

    path = log_dir / JOURNAL_NAME
    skipped: list[str] = []
    try:
        events = read_journal(path, skipped)
    except FileNotFoundError:
        raise AttachError(f"{path}: no journal (is {log_dir} a job's log directory?)") from None
    except OSError as e:
        raise AttachError(f"{path}: cannot read the journal: {e.strerror or e}") from None
    except ValueError as e:  # the file is refused whole (not a regular file, too large): it names itself
        raise AttachError(str(e)) from None
    for line in skipped[:SHOWN_SKIPS]:
        click.echo(f"srtd: warning: {log_dir / line}: line skipped", err=True)
    if len(skipped) > SHOWN_SKIPS:
        click.echo(f"srtd: warning: {path}: {len(skipped) - SHOWN_SKIPS} more lines skipped", err=True)
    return events


SHOWN_SKIPS = 5


def _replay(log_dir: Path, *, as_json: bool, once: bool) -> None:
    from srtd.attach import gone_note, render_view, snapshot_message
    from srtd.events import JobView

    events = journal_of(log_dir)
    order = list((events[0].detail or {}).get("units", [])) if events else []
    view = JobView.fold(events, order)
    if as_json and once:
        click.echo(json.dumps(snapshot_message(view, order)))
    elif as_json:
        for event in events:
            click.echo(event.to_line(), nl=False)
    else:
        console().print(render_view(view, events, order, note=gone_note(log_dir, view)))


def _once(target: str, *, as_json: bool) -> None:
    from srtd.attach import connect

    with connect(target) as conn:
        if as_json:
            reply = conn.request("snapshot")
            reply.pop("type", None)
            click.echo(json.dumps(reply))
            return
        from srtd.attach import EVENT_PANE, event_of, render_view, view_of  # the view (rich): drawn only here

        # The snapshot, then the journal's last events up to it (the pane's), not all of it.
        seq = int(conn.request("snapshot").get("seq") or 0)
        snapshot = conn.request("subscribe", from_seq=max(0, seq - EVENT_PANE))
        view = view_of(snapshot)
        events: deque[Event] = deque(maxlen=EVENT_PANE)
        deadline = time.monotonic() + ONCE_SECONDS  # a peer cannot keep us reading forever
        for message in conn.messages() if view.seq else ():
            if message.get("type") != "event":
                break
            events.append(event_of(message))
            if events[-1].seq >= view.seq:
                break
            if time.monotonic() > deadline:
                raise AttachError(f"{conn.where}: the events up to the snapshot took over {ONCE_SECONDS:g} s")
    console().print(render_view(view, events, [u["name"] for u in snapshot["units"]]))


ONCE_SECONDS = 10.0  # `attach --once`: the pane's events after the snapshot (a handful) within this


def _subscription(target: str, from_seq: int | None, quiet: float | None = None) -> Any:
    """Messages of a subscription; resumes where it left off when the job drops us.

    With `quiet`, also None each time no message has come for `quiet` seconds.
    """
    from srtd.attach import connect

    seq = from_seq
    while True:
        with connect(target, timeout=None) as conn:
            snapshot = conn.request("subscribe", **({"from_seq": seq} if seq is not None else {}))
            yield snapshot
            for message in conn.messages() if quiet is None else conn.messages_or_quiet(quiet):
                if message is None:
                    yield None
                    continue
                if message.get("type") == "overflow":
                    seq = message.get("last_seq") or 0
                    break
                if message.get("type") == "event":
                    seq = message["event"]["seq"]
                yield message
                if message.get("type") == "end":
                    return
            else:
                return


def _stream_json(target: str) -> None:
    for message in _subscription(target, None):
        if message.get("type") == "event":
            sys.stdout.write(json.dumps(message["event"], separators=(",", ":")) + "\n")
            sys.stdout.flush()


def _live(target: str) -> None:
    from srtd.attach import LiveView

    out = console()
    messages = _subscription(target, 0, quiet=REFRESH)
    snapshot = next(messages)  # connection errors surface here, before the screen is taken
    screen = LiveView(out, [u["name"] for u in snapshot["units"]], int(snapshot.get("seq") or 0), REFRESH)
    try:
        for message in messages:
            screen.take(message)
    finally:
        screen.close()
    out.line()  # the live display leaves the cursor at the end of its last line


def watch_submitted(job_id: str, log_dir: Path) -> None:
    """`srtd submit --attach`: the job in the queue, then starting, then the live view until it ends.

    Each phase is one line as it begins; the live view is `srtd attach`'s.  Returns
    when the job's supervisor has ended (or the job ended before it could be seen).
    """
    from srtd.attach import pointer_job_id
    from srtd.launch import find_job

    said = None
    while True:
        job = find_job(job_id)
        if job is None or job.ended:
            return
        phase = f"{job.state.lower()} ({job.reason})" if job.reason else job.state.lower()
        if job.state == "RUNNING":
            phase = f"starting on {job.batch_host}"
            if pointer_job_id(log_dir) is not None or not log_dir.is_dir():
                try:
                    _live(job_id)
                    return
                except AttachError:
                    pass  # the socket is not up yet
        if phase != said:
            console().print(f"job {job_id}: {phase}")
            said = phase
        time.sleep(WATCH_POLL)


WATCH_POLL = 1.0  # seconds between looks at a job that is not running yet


@cli.command()
@click.argument("job")
@click.option("--wait", is_flag=True, help="Wait until the job has ended.")
def stop(job: str, wait: bool) -> None:
    """Stop JOB gracefully: the tiered teardown, as SIGTERM would."""
    from srtd.attach import connect

    # One connection for the request and the wait: through a relay, a second one could
    # only be made while the job still runs, and the teardown may be done by then.
    with connect(job, timeout=None if wait else 10.0) as conn:
        job_id = conn.hello.get("job_id")
        if wait:
            conn.request("subscribe")  # the events from now on, up to the job's `end`
        conn.request("stop")
        click.echo(f"stop requested: job {job_id}")
        if wait:
            click.echo(_until_end(conn))


def _until_end(conn: Connection) -> str:
    """Read a subscription to its `end`: how the job ended.

    A relay step can be ended by Slurm (the job is over) before the `end` message is
    through; the job's final event, when it came, says the same.
    """
    from srtd.events import FINAL_JOB_STATES

    final: str | None = None
    try:
        for message in conn.messages():
            kind = message.get("type")
            if kind == "end":
                return str(message.get("reason"))
            if kind == "event" and message["event"].get("unit") is None:
                state = message["event"].get("state")
                final = f"job {state}" if state in FINAL_JOB_STATES else final
    except AttachError:
        if final is None:
            raise
    if final is None:
        raise AttachError(f"{conn.where}: the job closed the connection before it ended")
    return final


@cli.command()
@click.argument("job")
@click.argument("unit")
def restart(job: str, unit: str) -> None:
    """Restart UNIT of JOB through its restart path (counted as a restart)."""
    from srtd.attach import connect

    with connect(job) as conn:
        conn.request("restart", unit=unit)
    click.echo(f"restart requested: {unit}")


@cli.command(name="signal")
@click.argument("job")
@click.argument("unit")
@click.argument("sig")
def signal_cmd(job: str, unit: str, sig: str) -> None:
    """Send signal SIG (a name like HUP or a number) to UNIT of JOB."""
    from srtd.attach import connect

    with connect(job) as conn:
        reply = conn.request("signal", unit=unit, signal=sig)
    click.echo(f"sent {reply.get('signal')} to {unit}")


@cli.command()
@click.argument("job")
@click.argument("unit")
@click.option("-n", "--lines", default=50, show_default=True, help="How many of the last lines.")
@click.option("-f", "--follow", is_flag=True, help="Keep printing lines as they are written.")
def tail(job: str, unit: str, lines: int, follow: bool) -> None:
    """The last lines of UNIT's log in JOB (and, with -f, what follows)."""
    _tail(job, unit, lines, follow)


def _tail(job: str, unit: str, lines: int, follow: bool) -> None:
    from srtd.attach import connect

    with connect(job, timeout=None if follow else 10.0) as conn:
        reply = conn.request("tail", unit=unit, lines=lines, follow=follow)
        for line in reply.get("lines", []):
            click.echo(line)
        if not follow:
            return
        for message in conn.messages():
            if message.get("type") == "line":
                click.echo(message.get("text", ""))
            elif message.get("type") in ("end", "overflow"):
                if message.get("type") == "overflow":
                    raise AttachError("dropped: the log is written faster than this terminal reads it")
                return


def _log_dir_of(job: str) -> Path | None:
    """JOB's log directory: JOB itself, the one srtd's Slurm mark names, or the one the job's socket says."""
    from srtd.attach import connect

    if Path(job).is_dir():
        return Path(job)
    if job.isdigit():
        from srtd.launch import find_job

        found = find_job(job)
        mark = found.mark if found is not None else None
        if mark is not None and isinstance(mark.get("log_dir"), str):
            return Path(mark["log_dir"])
    with connect(job) as conn:
        where = conn.hello.get("log_dir")
    return Path(where) if isinstance(where, str) else None


@cli.command()
@click.argument("job")
@click.argument("unit", required=False)
@click.option("-f", "--follow", is_flag=True, help="Keep printing, across restarts, until the job ends.")
@click.option("--json", "as_json", is_flag=True, help="Without UNIT: the units and their logs as one JSON object.")
def logs(job: str, unit: str | None, follow: bool, as_json: bool) -> None:
    """UNIT's log (its current attempt's) from JOB's log directory; without UNIT, where each unit logs.

    JOB is a job id or a log directory.  Where the log directory cannot be read from
    here, the log comes from the job itself (as `srtd tail` does it).
    """
    from srtd.attach import follow_log, open_log, unit_log, unit_logs

    log_dir = _log_dir_of(job)
    readable = log_dir is not None and log_dir.is_dir()
    if unit is None:
        if not readable:
            raise AttachError(f"job {job}: its log directory {log_dir} is not readable from here")
        assert log_dir is not None
        listing = unit_logs(log_dir)
        if as_json:
            click.echo(json.dumps({"log_dir": str(log_dir), "units": listing}))
        else:
            for name, log in listing.items():
                click.echo(f"{name}\t{log or '-'}")
        return
    if not readable:
        _tail(job, unit, MAX_LOG_LINES, follow)
        return
    assert log_dir is not None
    path = unit_log(log_dir, unit)
    out = sys.stdout.buffer
    if not follow:
        try:
            with open_log(path) as source:
                shutil.copyfileobj(source, out)
        except OSError as e:
            raise AttachError(f"{path}: cannot read: {e.strerror}") from None
        out.flush()
        return
    for data in follow_log(path, log_dir):
        out.write(data)
        out.flush()


MAX_LOG_LINES = 10_000  # what `srtd logs` asks the job for when it cannot read the log itself
