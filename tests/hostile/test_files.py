"""Files srtd writes and reads back, when the file system is hostile (docs/security.md).

A name srtd writes may already be a link, a FIFO or a device; what it reads back may be
a FIFO, a device or garbage.  Each kind: one line, a documented exit code, no traceback,
nothing written outside the log directory, no hang (a bounded subprocess where it could).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from srtd.results import Point, Results, Verdict
from srtd.unit import Plan, Unit, UnitKind
from tests.hostile.helpers import EXAMPLE_JOURNAL, bounded, one_line, srtd

V1 = "name: x\nbackend:\n  type: sglang\n"
DEMO = Path(__file__).resolve().parents[2] / "recipes" / "local" / "demo.yaml"


def _device(path: Path) -> Path:
    """A character device like /dev/null, made where the test can lose it."""
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("making a device node needs root")
    return path


# ---------------------------------------------------------------- migrate -o / --in-place


@pytest.mark.parametrize("kind", ["device", "fifo"])
def test_migrate_onto_a_device_or_fifo_refuses_and_leaves_it_alone(tmp_path: Path, kind: str) -> None:
    (tmp_path / "v1.yaml").write_text(V1)
    target = tmp_path / "target"
    if kind == "device":
        _device(target)
    else:
        os.mkfifo(target)
    before = os.lstat(target)
    result = bounded("migrate", "v1.yaml", "-o", "target", cwd=tmp_path)
    described = "a character device" if kind == "device" else "a FIFO"
    assert (result.code, one_line(result.stderr)) == (
        3,
        f"srtd: target: is {described}; srtd replaces only a regular file",
    )
    after = os.lstat(target)
    assert (after.st_ino, stat.S_IFMT(after.st_mode)) == (before.st_ino, stat.S_IFMT(before.st_mode))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["target", "v1.yaml"]  # no temporary file left


def test_migrate_in_place_through_a_link_refuses_and_keeps_link_and_target(tmp_path: Path) -> None:
    (tmp_path / "real.yaml").write_text(V1)
    (tmp_path / "link.yaml").symlink_to("real.yaml")
    result = srtd("migrate", "-i", str(tmp_path / "link.yaml"))
    assert (result.code, one_line(result.stderr)) == (
        3,
        f"srtd: {tmp_path}/link.yaml: is a symbolic link; srtd replaces only a regular file",
    )
    assert os.readlink(tmp_path / "link.yaml") == "real.yaml"
    assert (tmp_path / "real.yaml").read_text() == V1


# ---------------------------------------------------------------- planted names in a log dir


def _plan(root: Path, log: str) -> Path:
    """A saved plan of one short unit logging to `log`, and its log dir."""
    unit = Unit(
        name="one", kind=UnitKind.BENCHMARK, phase="test", nodes=("node0",), argv=("true",), log=log, terminal=True
    )
    plan = Plan(
        name="files",
        job_id="local-files",
        local=True,
        log_dir=str(root / "logs"),
        nodes={"head": ("node0",)},
        allocation=("node0",),
        phases=("test",),
        units=(unit,),
    )
    (root / "plan-in.json").write_text(plan.dumps())
    (root / "logs").mkdir()
    return root / "logs"


def _launch_failure(log_dir: Path) -> str:
    """Why the journal says the unit could not be launched."""
    events = [json.loads(line) for line in (log_dir / "events.jsonl").read_text().splitlines()]
    [failed] = [e for e in events if e.get("unit") == "one" and e["state"] == "failed"]
    return str(failed["reason"])


LINK = "is a symbolic link; srtd does not follow links here"
REPLACED = "is a symbolic link; srtd replaces only a regular file"


@pytest.mark.parametrize(
    ("planted", "log", "refusal"),
    [
        ("plan.json", "one.out", f"plan.json: {REPLACED}"),
        ("one.out", "one.out", f"one.out: {LINK}"),
        (
            "workers",
            "workers/one.out",
            "workers: is not a directory (a link or a file); refusing to write {}/workers/one.out",
        ),
    ],
)
def test_a_link_planted_in_the_log_dir_is_never_written_through(
    tmp_path: Path, planted: str, log: str, refusal: str
) -> None:
    log_dir = _plan(tmp_path, log)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim").write_text("keep me\n")
    (log_dir / planted).symlink_to(outside if planted == "workers" else outside / "victim")
    result = bounded("run", "plan-in.json", cwd=tmp_path)
    expected = f"{log_dir}/{refusal.format(log_dir)}"
    if planted == "plan.json":  # before anything starts: the command's own error
        assert (result.code, one_line(result.stderr)) == (3, f"srtd: {expected}")
    else:  # the unit cannot be launched: the job fails, and says why
        assert result.code == 1, result
        assert "Traceback" not in result.stderr
        assert _launch_failure(log_dir) == f"launch failed: {expected}"
    assert sorted(p.name for p in outside.iterdir()) == ["victim"]
    assert (outside / "victim").read_text() == "keep me\n"
    assert (log_dir / planted).is_symlink()


def test_a_dangling_link_at_the_journal_name_is_refused(tmp_path: Path) -> None:
    log_dir = _plan(tmp_path, "one.out")
    (log_dir / "events.jsonl").symlink_to(tmp_path / "created-outside")
    result = bounded("run", "plan-in.json", cwd=tmp_path)
    assert (result.code, one_line(result.stderr)) == (
        3,
        f"srtd: {log_dir} already holds a job's journal; give another --log-dir or --job-id",
    )
    assert not (tmp_path / "created-outside").exists()


@pytest.mark.parametrize("planted", ["plan.json", "one.out"])
def test_a_fifo_planted_in_the_log_dir_does_not_block_srtd(tmp_path: Path, planted: str) -> None:
    log_dir = _plan(tmp_path, "one.out")
    os.mkfifo(log_dir / planted)
    result = bounded("run", "plan-in.json", cwd=tmp_path)  # a block would be the subprocess's timeout
    if planted == "plan.json":
        assert (result.code, one_line(result.stderr)) == (
            3,
            f"srtd: {log_dir}/plan.json: is a FIFO; srtd replaces only a regular file",
        )
    else:
        assert result.code == 1, result
        assert "Traceback" not in result.stderr
        assert (
            _launch_failure(log_dir) == f"launch failed: {log_dir}/one.out: is a FIFO, not a regular file; refusing it"
        )
    assert stat.S_ISFIFO(os.lstat(log_dir / planted).st_mode)


def test_a_link_planted_at_timeline_svg_is_refused(tmp_path: Path) -> None:
    (tmp_path / "events.jsonl").write_bytes(EXAMPLE_JOURNAL.read_bytes())
    (tmp_path / "victim").write_text("keep me\n")
    (tmp_path / "timeline.svg").symlink_to(tmp_path / "victim")
    result = srtd("timeline", str(tmp_path))
    assert (result.code, one_line(result.stderr)) == (
        3,
        f"srtd: {tmp_path}/timeline.svg: is a symbolic link; srtd replaces only a regular file",
    )
    assert (tmp_path / "victim").read_text() == "keep me\n"


# ---------------------------------------------------------------- the runtime directory


def test_a_shared_runtime_dir_is_refused_and_never_chmodded(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    env = {"SRTD_RUNTIME_DIR": str(shared)}
    refused = f"{shared} ($SRTD_RUNTIME_DIR) is writable by others (mode 1777); refusing to"
    # a recipe run claims its ports there first: refused before anything starts
    result = bounded("run", str(DEMO), "--log-dir", "logs", cwd=tmp_path, env=env)
    assert (result.code, one_line(result.stderr)) == (
        3,
        f"srtd: {refused} keep port claims there (set SRTD_RUNTIME_DIR to a directory of your own)",
    )
    assert not (tmp_path / "logs").exists()
    # a saved plan needs no port claim: the job runs, without an attach socket, and says why
    _plan(tmp_path, "one.out")
    result = bounded("run", "plan-in.json", cwd=tmp_path, env=env)
    assert result.code == 0, result
    assert f"srtd: attach: {refused} put a socket there" in result.stderr
    assert stat.S_IMODE(shared.stat().st_mode) == 0o1777
    assert list(shared.iterdir()) == []


# ---------------------------------------------------------------- srtd logs


def test_logs_reads_no_file_outside_the_log_dir(tmp_path: Path) -> None:
    journal = EXAMPLE_JOURNAL.read_text().replace('"/logs/etcd.log"', '"/etc/hostname"')
    (tmp_path / "events.jsonl").write_text(journal)
    result = srtd("logs", str(tmp_path), "etcd")
    assert (result.code, result.stdout) == (4, "")
    assert one_line(result.stderr) == (
        f"srtd: {tmp_path}: the journal names /etc/hostname as etcd's log, outside the log directory; refusing it"
    )


def test_logs_refuses_a_fifo_at_the_log_name(tmp_path: Path) -> None:
    journal = EXAMPLE_JOURNAL.read_text().replace('"/logs/etcd.log"', json.dumps(str(tmp_path / "etcd.log")))
    (tmp_path / "events.jsonl").write_text(journal)
    os.mkfifo(tmp_path / "etcd.log")
    result = bounded("logs", str(tmp_path), "etcd", cwd=tmp_path)
    assert (result.code, one_line(result.stderr)) == (
        4,
        f"srtd: {tmp_path}/etcd.log: is a FIFO, not a regular file; refusing it",
    )


# ---------------------------------------------------------------- reading back


@pytest.mark.parametrize(
    ("state", "message"),
    [
        ('"state":"bogus"', "'bogus' is not a unit state"),
        ('"units":5', "units: input should be a valid array"),
    ],
)
def test_a_journal_line_of_unknown_state_or_wrong_type_is_one_warning(tmp_path: Path, state: str, message: str) -> None:
    text = EXAMPLE_JOURNAL.read_text()
    text = (
        text.replace('"state":"waiting"', state, 1)
        if "bogus" in state
        else text.replace('"units":["etcd","w0","bench"]', state)
    )
    (tmp_path / "events.jsonl").write_text(text)
    for args in (("timeline", "--no-svg", str(tmp_path)), ("attach", "--replay", str(tmp_path), "--once")):
        result = srtd(*args)
        assert result.code == 0, result.stderr
        [warning] = result.stderr.splitlines()
        assert warning.startswith(f"srtd: warning: {tmp_path}/events.jsonl:")
        assert message in warning, warning


@pytest.mark.parametrize("kind", ["fifo", "zero", "kmsg"])
def test_a_journal_or_results_that_is_no_regular_file_is_refused_at_once(tmp_path: Path, kind: str) -> None:
    for name in ("events.jsonl", "results.json"):
        path = tmp_path / name
        if kind == "fifo":
            os.mkfifo(path)
        else:
            path.symlink_to("/dev/zero" if kind == "zero" else "/proc/kmsg")
    if kind == "kmsg" and not os.access("/proc/kmsg", os.R_OK):
        pytest.skip("/proc/kmsg is not readable here")
    timeline = bounded("timeline", str(tmp_path), cwd=tmp_path)
    results = bounded("results", str(tmp_path), cwd=tmp_path)
    if kind == "kmsg":  # a regular file of size 0 to stat: read as empty, never drained
        assert (timeline.code, one_line(timeline.stderr)) == (4, f"srtd: {tmp_path}/events.jsonl: the journal is empty")
        assert results.code == 2
        assert one_line(results.stderr).startswith(f"srtd: {tmp_path}/results.json: not a")
        return
    what = "a FIFO" if kind == "fifo" else "a character device"
    assert (timeline.code, one_line(timeline.stderr)) == (
        4,
        f"srtd: {tmp_path}/events.jsonl: is {what}, not a regular file; refusing it",
    )
    assert (results.code, one_line(results.stderr)) == (
        2,
        f"srtd: {tmp_path}/results.json: is {what}, not a regular file; refusing it",
    )


def test_results_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "results.json").write_bytes(b'{"job_id": "\xff"}\n')
    result = srtd("results", str(tmp_path))
    assert (result.code, one_line(result.stderr)) == (2, f"srtd: {tmp_path}/results.json:1: not UTF-8 text (byte 12)")


@pytest.mark.parametrize(
    ("value", "why"),
    [("NaN", "Input should be a finite number"), ("-5", "Input should be greater than or equal to 0")],
)
def test_a_saved_plan_with_a_nan_or_negative_timeout_is_exit_2(tmp_path: Path, value: str, why: str) -> None:
    _plan(tmp_path, "one.out")
    text = (tmp_path / "plan-in.json").read_text()
    (tmp_path / "plan-in.json").write_text(text.replace('"terminate_timeout": 30.0', f'"terminate_timeout": {value}'))
    result = srtd("run", str(tmp_path / "plan-in.json"))
    assert (result.code, one_line(result.stderr)) == (
        2,
        f"srtd: {tmp_path}/plan-in.json: not a plan written by srtd plan --json (units.0.terminate_timeout: {why})",
    )
    assert list((tmp_path / "logs").iterdir()) == []


@pytest.mark.parametrize("kind", ["link", "fifo"])
def test_results_plot_onto_a_link_or_fifo_refuses_and_leaves_it_alone(tmp_path: Path, kind: str) -> None:
    pytest.importorskip("matplotlib")
    point = Point(concurrency=2, requests_sent=4, requests_succeeded=4, output_tok_s=10.0)
    job = Results(
        job="j", job_id="7", unit="b", reader="srtd", path="b.json", points=(point,), verdict=Verdict(ok=True)
    )
    (tmp_path / "results.json").write_text(job.model_dump_json())
    (tmp_path / "victim").write_text("keep me\n")
    target = tmp_path / "plot.svg"
    if kind == "link":
        target.symlink_to(tmp_path / "victim")
    else:
        os.mkfifo(target)
    result = bounded("results", str(tmp_path), "--plot", str(target), cwd=tmp_path)
    what = "a symbolic link" if kind == "link" else "a FIFO"
    assert (result.code, one_line(result.stderr)) == (
        3,
        f"srtd: {target}: is {what}; srtd replaces only a regular file",
    )
    assert (tmp_path / "victim").read_text() == "keep me\n"
    assert target.is_symlink() if kind == "link" else stat.S_ISFIFO(os.lstat(target).st_mode)
