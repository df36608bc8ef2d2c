"""Power telemetry's sampler: reading exporters, judging windows, the manifest and the job's verdict."""

from __future__ import annotations

import csv
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from srtd.errors import EXIT_POWER
from srtd.events import Event
from srtd.reporting._power import Device, PowerSampler, check_window, power_readings
from srtd.reporting._telemetry import power_telemetry
from srtd.supervisor import AfterJob
from srtd.unit import PowerEndpoint, PowerSampling, UnitKind

DCGM = """\
# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).
# TYPE DCGM_FI_DEV_POWER_USAGE gauge
DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-aaa",Hostname="n1",modelName="H100 \\"SXM\\""} 100.5
DCGM_FI_DEV_POWER_USAGE{gpu="1",UUID="GPU-bbb",Hostname="n1"} 200 1700000000000
DCGM_FI_DEV_POWER_USAGE_AVG{gpu="0",UUID="GPU-aaa"} 999
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-aaa"} 42
DCGM_FI_DEV_POWER_USAGE{UUID="GPU-nolabel"} 50
DCGM_FI_DEV_POWER_USAGE{gpu="2",UUID="GPU-ccc"} NaN
"""


def test_power_readings_take_the_named_metric_by_its_labels() -> None:
    assert power_readings(DCGM, "DCGM_FI_DEV_POWER_USAGE", "gpu", "UUID") == [
        ("0", "GPU-aaa", 100.5),
        ("1", "GPU-bbb", 200.0),  # a sample with a timestamp
    ]  # not the _AVG metric, not a sample without the index label, not NaN
    amd = 'amd_device_metrics_exporter_gpu_power_usage{gpu_id="3",serial_number="S\\\\1"} 350\n'
    assert power_readings(amd, "amd_device_metrics_exporter_gpu_power_usage", "gpu_id", "serial_number") == [
        ("3", "S\\1", 350.0)
    ]
    assert power_readings("garbage {{{\n", "garbage", "gpu", None) == []


def device(*points: tuple[float, float], identity: str = "GPU-aaa") -> Device:
    d = Device()
    for t, w in points:
        d.times.append(t)
        d.watts.append(w)
    d.identities.add(identity)
    return d


def window(start: float = 10.0, end: float = 20.0, **extra: Any) -> dict[str, Any]:
    doc = {
        "benchmark_type": "aiperf",
        "concurrency": 4,
        "status": "completed",
        "benchmark_start_time_unix": start,
        "benchmark_end_time_unix": end,
        "_file": "aiperf_c4.json",
    }
    return {**doc, **extra}


def test_a_covered_window_gets_its_energy_and_mean_power() -> None:
    # GPU 0 at a steady 100 W, GPU 1 ramping from 100 W to 300 W across the window
    devices = {
        ("n1", "0"): device(*((t, 100.0) for t in range(8, 23))),
        ("n1", "1"): device(*((t, 100.0 + (t - 9) * 200 / 12) for t in range(9, 22)), identity="GPU-bbb"),
    }
    checked = check_window(window(), devices)
    assert checked.valid, checked
    # GPU 0: 10 s x 100 W; GPU 1: linear, at 10 s 116.67 W and at 20 s 283.33 W -> mean 200 W over 10 s
    assert checked.energy_j == pytest.approx(1000.0 + 2000.0, abs=0.01)
    assert checked.mean_power_w == pytest.approx(300.0, abs=0.001)
    assert checked.max_sample_gap_seconds == 1.0


def test_a_window_needs_samples_around_it_close_enough_from_one_gpu_identity() -> None:
    steady = device(*((t, 100.0) for t in range(8, 23)))
    assert check_window(window(), {("n1", "0"): steady}).valid
    late = device(*((t, 100.0) for t in range(11, 23)))  # nothing at or before the start
    assert check_window(window(), {("n1", "0"): late}).reasons == ("measurement_window_not_bracketed",)
    sparse = device((9.0, 100.0), (21.0, 100.0))
    assert check_window(window(), {("n1", "0"): sparse}).reasons == ("sample_gap_exceeded",)
    swapped = device(*((t, 100.0) for t in range(8, 23)))
    swapped.identities.add("GPU-zzz")
    assert check_window(window(), {("n1", "0"): swapped}).reasons == ("gpu_uuid_changed",)
    assert check_window(window(), {}).reasons == ("no_power_samples",)


def test_a_window_the_client_did_not_finish_or_wrote_badly_is_not_covered() -> None:
    steady = {("n1", "0"): device(*((t, 100.0) for t in range(8, 23)))}
    assert check_window(window(status="running", benchmark_end_time_unix=None), steady).reasons == (
        "measurement_window_incomplete",
    )
    assert check_window(window(concurrency=True), steady).reasons == ("measurement_window_malformed",)
    assert check_window(window(benchmark_start_time_unix="soon"), steady).reasons == ("measurement_window_malformed",)
    assert check_window("broken.json", steady).reasons == ("measurement_window_malformed",)


class Clock:
    """A clock the test advances: each request reads it twice."""

    def __init__(self, start: float = 100.0) -> None:
        self.now = start

    def __call__(self) -> float:
        self.now += 0.05
        return self.now


def sampling(tmp_path: Path, *, required: bool = False, nodes: tuple[str, ...] = ("n1", "n2")) -> PowerSampling:
    return PowerSampling(
        dir=str(tmp_path / "power"),
        endpoints=tuple(PowerEndpoint(node=n, url=f"http://{n}:9401/metrics") for n in nodes),
        metric="DCGM_FI_DEV_POWER_USAGE",
        index_label="gpu",
        identity_label="UUID",
        interval_seconds=0.01,
        required=required,
    )


def exporter(request: httpx.Request) -> httpx.Response:
    if request.url.host == "down":
        return httpx.Response(503)
    return httpx.Response(200, text=f'DCGM_FI_DEV_POWER_USAGE{{gpu="0",UUID="GPU-{request.url.host}"}} 150\n')


async def sample_for(sampler: PowerSampler, scrapes: int) -> None:
    import anyio

    async with anyio.create_task_group() as tg:
        tg.start_soon(sampler.run)
        with anyio.fail_after(20):
            while sampler.scrapes < scrapes:
                await anyio.sleep(0.005)
        tg.cancel_scope.cancel()


@pytest.mark.anyio
async def test_the_sampler_writes_srt_slurms_samples_file_and_a_manifest(tmp_path: Path) -> None:
    clock = Clock()
    sampler = PowerSampler(sampling(tmp_path), transport=httpx.MockTransport(exporter), clock=clock)
    await sample_for(sampler, 5)
    # the client marked one window inside the sampled span (this host's clock stands for its)
    times = sampler.devices[("n1", "0")].times
    doc = window(start=times[1] + 0.001, end=times[-2] - 0.001)
    del doc["_file"]
    (tmp_path / "power" / "windows" / "aiperf_c4.json").write_text(json.dumps(doc))
    verdict = sampler.finish()
    assert (verdict.status, verdict.reasons, verdict.samples) == ("complete", (), 2 * sampler.scrapes)
    rows = list(csv.reader((tmp_path / "power" / "samples.csv").open()))
    assert rows[0] == ["schema_version", "timestamp_unix", "scrape_seq", "hostname", "gpu_index", "gpu_uuid", "power_w"]
    assert rows[1][2:] == ["0", "n1", "0", "GPU-n1", "150.0"]
    assert rows[2][2:] == ["0", "n2", "0", "GPU-n2", "150.0"]
    manifest = json.loads((tmp_path / "power" / "manifest.json").read_text())
    assert (manifest["status"], manifest["publication_valid"], manifest["producer"]) == ("complete", True, "srtd")
    (checked,) = manifest["windows"]
    assert (checked["file"], checked["power_coverage_valid"]) == ("aiperf_c4.json", True)
    assert checked["mean_power_w"] == pytest.approx(300.0)  # two GPUs at 150 W
    assert sampler.finish() is verdict  # once


@pytest.mark.anyio
async def test_finishing_as_a_scrape_round_ends_leaves_the_sampler_quiet(tmp_path: Path) -> None:
    """finish() can run after a round's scrapes ended but before the sampler's own turn (a
    cancel reaches a task at its next wait only): the sampler must not write to the closed file."""
    import anyio

    answered = anyio.Event()

    async def answer(request: httpx.Request) -> httpx.Response:
        answered.set()
        return exporter(request)

    sampler = PowerSampler(sampling(tmp_path, nodes=("n1",)), transport=httpx.MockTransport(answer))
    async with anyio.create_task_group() as tg:
        tg.start_soon(sampler.run)
        await answered.wait()
        await anyio.lowlevel.checkpoint()  # the scrape's task ends; the sampler is woken, not yet run
        verdict = sampler.finish()
    assert (verdict.status, sampler.write_error) == ("incomplete", None)
    rows = list(csv.reader((tmp_path / "power" / "samples.csv").open()))
    assert [r[3:] for r in rows[1:]] == [["n1", "0", "GPU-n1", "150.0"]]  # the round in flight is kept


@pytest.mark.anyio
async def test_an_exporter_that_never_answers_and_no_window_make_the_data_incomplete(tmp_path: Path) -> None:
    sampler = PowerSampler(sampling(tmp_path, nodes=("n1", "down")), transport=httpx.MockTransport(exporter))
    await sample_for(sampler, 3)
    verdict = sampler.finish()
    assert verdict.status == "incomplete"
    assert verdict.reasons == ("endpoint_never_answered:down", "no_measurement_windows")
    manifest = json.loads((tmp_path / "power" / "manifest.json").read_text())
    down = next(e for e in manifest["endpoints"] if e["node"] == "down")
    assert (down["answered"], down["errors"] >= 3) == (0, True)
    assert "503" in down["last_error"]


class Job:
    """The after-job hook's view of a job, with its notes kept."""

    def __init__(self, plan: Any, log_dir: Path) -> None:
        self.notes: list[tuple[str, dict[str, Any]]] = []
        self.after = AfterJob(plan, log_dir, lambda reason, detail: self.notes.append((reason, detail)))


class Port:
    """A service's view of a job: its plan's power and units, and its listeners."""

    def __init__(self, power: PowerSampling | None) -> None:
        from types import SimpleNamespace

        bench = SimpleNamespace(name="benchmark", kind=UnitKind.BENCHMARK)
        self.plan = SimpleNamespace(power=power, units=(bench,))
        self.listeners: list[Any] = []

    def listen(self, listener: Any) -> None:
        self.listeners.append(listener)


@pytest.mark.anyio
@pytest.mark.parametrize("required", [True, False])
async def test_required_power_fails_the_job_with_its_own_exit_code(tmp_path: Path, required: bool) -> None:
    import anyio

    power = sampling(tmp_path, required=required, nodes=("n1",))
    service, check = power_telemetry(transport=httpx.MockTransport(exporter))
    job = Job(None, tmp_path)
    async with service(Port(power)) as sampler:  # type: ignore[arg-type]
        assert isinstance(sampler, PowerSampler)
        with anyio.fail_after(20):
            while sampler.scrapes < 2:
                await anyio.sleep(0.005)
        failure = await check(job.after)
    assert job.notes == [
        (
            "power incomplete: 0/0 windows covered: no_measurement_windows",
            {"power": {"status": "incomplete", "reasons": ["no_measurement_windows"], "windows": 0}},
        )
    ]
    if required:
        assert failure is not None
        assert (failure.exit_code, failure.reason) == (
            EXIT_POWER,
            "telemetry.required: power incomplete: 0/0 windows covered: no_measurement_windows",
        )
    else:
        assert failure is None


@pytest.mark.anyio
async def test_a_plan_without_power_samples_nothing(tmp_path: Path) -> None:
    service, check = power_telemetry(transport=httpx.MockTransport(exporter))
    async with service(Port(None)) as sampler:  # type: ignore[arg-type]
        assert sampler is None
    assert await check(Job(None, tmp_path).after) is None
    assert not (tmp_path / "power").exists()


@pytest.mark.anyio
async def test_the_benchmarks_end_is_read_at_once_while_the_exporters_still_run(tmp_path: Path) -> None:
    import anyio

    power = replace(sampling(tmp_path, nodes=("n1",)), interval_seconds=3600.0)
    service, _ = power_telemetry(transport=httpx.MockTransport(exporter))
    port = Port(power)
    async with service(port) as sampler:  # type: ignore[arg-type]
        assert isinstance(sampler, PowerSampler)
        with anyio.fail_after(20):
            while sampler.scrapes < 1:  # the first reading, then an hour's wait
                await anyio.sleep(0.005)
            (listener,) = port.listeners
            listener(Event(seq=1, ts=0, unit="frontend_0", state="exited", exit_code=0))
            await anyio.sleep(0.05)
            assert sampler.scrapes == 1  # another unit's end changes nothing
            listener(Event(seq=2, ts=0, unit="benchmark", state="exited", exit_code=0))
            while sampler.scrapes < 2:
                await anyio.sleep(0.005)
