"""Power telemetry's sampler: GPU power over the job, and whether it covers the benchmark's windows.

`power_telemetry()` (`_telemetry.py`) gives `srtd run` two pieces that share one sampler:
a service that reads every GPU exporter of the plan's `power` while the job runs, and an
after-job hook that stops it, checks each measurement window the benchmark client marked,
writes the manifest and, with `required`, fails the job (`EXIT_POWER`) when the power data
does not cover every window.  A plan without `power` costs nothing: this module is not
even imported.

The files are srt-slurm's (the plan's `power.dir`, `<logs>/power` by default), so its
analysis tools read srtd's too:

    samples.csv      schema_version,timestamp_unix,scrape_seq,hostname,gpu_index,gpu_uuid,power_w
    windows/*.json   the client's windows: benchmark_type, concurrency, status,
                     benchmark_start_time_unix, benchmark_end_time_unix, duration
    manifest.json    srtd's verdict: status, reasons, every window's coverage and energy

Samples are stamped with this host's clock (the middle of each request), windows with
the client's: the nodes' clocks must agree (NTP), as under srtctl.
"""

from __future__ import annotations

import bisect
import contextlib
import csv
import itertools
import json
import math
import re
import time
from array import array
from collections.abc import Callable, Collection
from dataclasses import field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import anyio

from srtd._files import open_file, write_under
from srtd._value import value_class
from srtd.errors import FileRefused
from srtd.events import Event
from srtd.unit import PowerEndpoint, PowerSampling

if TYPE_CHECKING:
    import httpx


SCHEMA_VERSION = 1
CLOCK_SOURCE = "head_node_unix_clock"
SAMPLES_FILE = "samples.csv"
MANIFEST_FILE = "manifest.json"
WINDOWS_DIR = "windows"
SAMPLES_HEADER = ("schema_version", "timestamp_unix", "scrape_seq", "hostname", "gpu_index", "gpu_uuid", "power_w")
MAX_SAMPLE_GAP = 3.0  # seconds between two samples of a GPU inside a window, at most
MAX_SCRAPE_BYTES = 16 << 20  # an exporter's answer beyond this is refused, not read
MAX_WINDOW_BYTES = 1 << 20
MAX_WINDOWS = 10_000

Key = tuple[str, str]  # (node, GPU index)


# --------------------------------------------------------------------------- reading an exporter

_SAMPLE = re.compile(r"([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+-?\d+)?\s*")
_LABEL = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(?:,|$)')
_ESCAPE = re.compile(r"\\(.)")


def _labels(text: str) -> dict[str, str] | None:
    labels, at = {}, 0
    while at < len(text.rstrip()):
        match = _LABEL.match(text, at)
        if match is None:
            return None
        labels[match[1]] = _ESCAPE.sub(lambda m: "\n" if m[1] == "n" else m[1], match[2])
        at = match.end()
    return labels


def power_readings(
    text: str, metric: str, index_label: str, identity_label: str | None
) -> list[tuple[str, str, float]]:
    """(GPU index, identity, watts) of every sample of `metric` in a Prometheus text exposition."""
    readings = []
    for line in text.splitlines():
        if not line.startswith(metric):
            continue
        match = _SAMPLE.fullmatch(line)
        if match is None or match[1] != metric:
            continue
        labels = _labels(match[2] or "")
        if labels is None or index_label not in labels:
            continue
        try:
            watts = float(match[3])
        except ValueError:
            continue
        if math.isfinite(watts) and watts >= 0:
            readings.append((labels[index_label], labels.get(identity_label or "", ""), watts))
    return readings


# --------------------------------------------------------------------------- what was sampled


@value_class(frozen=False)
class Device:
    """One GPU's samples: their times and readings (arrays: a long job has many)."""

    times: array[float] = field(default_factory=lambda: array("d"))
    watts: array[float] = field(default_factory=lambda: array("d"))
    identities: set[str] = field(default_factory=set)


@value_class(frozen=False)
class Endpoint:
    answered: int = 0
    errors: int = 0
    without_metric: int = 0
    last_error: str | None = None


# --------------------------------------------------------------------------- the windows


@value_class
class Window:
    """A measurement window the client marked, and what srtd found of its power."""

    file: str
    benchmark_type: str | None
    concurrency: int | None
    status: str | None
    reasons: tuple[str, ...]
    max_sample_gap_seconds: float | None = None
    mean_power_w: float | None = None  # every GPU's mean power inside the window, summed
    energy_j: float | None = None

    @property
    def valid(self) -> bool:
        return not self.reasons


def _number(value: Any) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def read_windows(folder: Path) -> list[dict[str, Any] | str]:
    """Every window file (its document, or why it cannot be read), sorted by name."""
    if not folder.is_dir() or folder.is_symlink():
        return []
    found: list[dict[str, Any] | str] = []
    for path in sorted(folder.iterdir())[:MAX_WINDOWS]:
        if path.suffix != ".json" or path.name.startswith("."):
            continue  # a writer's temporary file
        try:
            if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_WINDOW_BYTES:
                found.append(path.name)
                continue
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            found.append(path.name)
            continue
        found.append({**doc, "_file": path.name} if isinstance(doc, dict) else path.name)
    return found


def _span(device: Device, start: float, end: float) -> tuple[list[tuple[float, float]], float] | None:
    """The samples that bracket [start, end] (the last at or before, the first at or after), and the largest gap.

    A device's readings are in the order they were taken, so both ends are a bisection
    (hours of 1 Hz samples, one window after another).
    """
    times = device.times
    first = bisect.bisect_right(times, start) - 1
    last = bisect.bisect_left(times, end)
    if first < 0 or last == len(times):
        return None
    points = [(times[i], device.watts[i]) for i in range(first, last + 1)]
    gap = max((b[0] - a[0] for a, b in itertools.pairwise(points)), default=0.0)
    return points, gap


def _energy(points: list[tuple[float, float]], start: float, end: float) -> float:
    """Joules between start and end: the readings joined by straight lines (trapezoids), cut at the edges."""

    def at(t: float) -> float:
        for (t0, w0), (t1, w1) in itertools.pairwise(points):
            if t0 <= t <= t1:
                return w0 if t1 == t0 else w0 + (w1 - w0) * (t - t0) / (t1 - t0)
        return points[-1][1]

    inner = [(t, w) for t, w in points if start < t < end]
    line = [(start, at(start)), *inner, (end, at(end))]
    return sum((t1 - t0) * (w0 + w1) / 2 for (t0, w0), (t1, w1) in itertools.pairwise(line))


def check_window(doc: dict[str, Any] | str, devices: dict[Key, Device]) -> Window:
    """Whether every GPU's samples cover one window, and its energy when they do."""
    if isinstance(doc, str):
        return Window(doc, None, None, None, ("measurement_window_malformed",))
    kind, concurrency, status = doc.get("benchmark_type"), doc.get("concurrency"), doc.get("status")
    start, end = _number(doc.get("benchmark_start_time_unix")), _number(doc.get("benchmark_end_time_unix"))
    concurrency = concurrency if isinstance(concurrency, int) and not isinstance(concurrency, bool) else None
    base = {"file": doc["_file"], "benchmark_type": kind if isinstance(kind, str) else None}
    base.update(concurrency=concurrency, status=status if isinstance(status, str) else None)
    if base["benchmark_type"] is None or concurrency is None or start is None:
        return Window(**base, reasons=("measurement_window_malformed",))
    if status != "completed" or end is None or end <= start:
        return Window(**base, reasons=("measurement_window_incomplete",))
    reasons: list[str] = []
    gaps, energy = [], 0.0
    for key in sorted(devices):
        device = devices[key]
        if len(device.identities) > 1:
            reasons.append("gpu_uuid_changed")
            continue
        span = _span(device, start, end)
        if span is None:
            reasons.append("measurement_window_not_bracketed")
            continue
        points, gap = span
        gaps.append(gap)
        if gap > MAX_SAMPLE_GAP:
            reasons.append("sample_gap_exceeded")
        energy += _energy(points, start, end)
    if not devices:
        reasons.append("no_power_samples")
    if reasons:
        return Window(**base, reasons=tuple(dict.fromkeys(reasons)), max_sample_gap_seconds=max(gaps, default=None))
    return Window(
        **base,
        reasons=(),
        max_sample_gap_seconds=round(max(gaps), 3),
        mean_power_w=round(energy / (end - start), 3),
        energy_j=round(energy, 3),
    )


# --------------------------------------------------------------------------- the sampler


@value_class
class Verdict:
    """What the manifest says: `complete` (every window covered), `incomplete`, or `failed` (no samples)."""

    status: str
    reasons: tuple[str, ...]
    windows: tuple[Window, ...]
    samples: int

    @property
    def valid(self) -> bool:
        return self.status == "complete"

    def summary(self) -> dict[str, Any]:
        return {"status": self.status, "reasons": list(self.reasons), "windows": len(self.windows)}


class PowerSampler:
    """Reads every endpoint once per interval into `samples.csv` until `finish()`."""

    def __init__(
        self,
        power: PowerSampling,
        *,
        clients: Collection[str] = (),
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.power = power
        self._clients = frozenset(clients)  # the benchmark units: their end is read at once
        self.dir = Path(power.dir)
        self._transport = transport
        self._clock = clock
        self.devices: dict[Key, Device] = {}
        self.endpoints = {e.node: Endpoint() for e in power.endpoints}
        self.scrapes = 0
        self.samples = 0
        self._scope = anyio.CancelScope()
        self._wake = anyio.Event()
        self._verdict: Verdict | None = None
        self._csv: IO[str] | None = None
        self._round: list[tuple[Any, ...]] = []  # the readings of the scrape round in flight
        self.write_error: str | None = None  # why samples.csv could not be written

    async def run(self) -> None:
        """Sample until `finish()`; a samples file that cannot be written stops sampling, not the job."""
        with self._scope:
            try:
                await self._sample()
            except OSError as e:
                self.write_error = str(e)

    async def _sample(self) -> None:
        from srtd._httpx import httpx

        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / WINDOWS_DIR).mkdir(exist_ok=True)
        fd = open_file(self.dir / SAMPLES_FILE, error=FileRefused)
        self._csv = open(fd, "w", newline="", encoding="utf-8")  # noqa: SIM115  (closed when sampling ends)
        csv.writer(self._csv).writerow(SAMPLES_HEADER)
        timeout = httpx.Timeout(self.power.request_timeout_seconds)
        async with httpx.AsyncClient(transport=self._transport, timeout=timeout, trust_env=False) as client:
            while True:
                began = anyio.current_time()
                async with anyio.create_task_group() as tg:
                    for endpoint in self.power.endpoints:
                        tg.start_soon(self._scrape, client, endpoint, self.scrapes)
                if self._verdict is not None:
                    # finish() ran between the scrapes' end and this task's turn (a cancel reaches
                    # a task at its next wait only): it wrote this round and closed the file
                    return
                self._write_round()
                self.scrapes += 1
                with anyio.move_on_after(max(0.0, self.power.interval_seconds - (anyio.current_time() - began))):
                    await self._wake.wait()
                self._wake = anyio.Event()

    def _write_round(self) -> None:
        """The readings of the round in flight into samples.csv, in node and GPU order."""
        rows, self._round = sorted(self._round, key=lambda r: (r[3], r[4])), []
        if self._csv is not None:
            csv.writer(self._csv).writerows(rows)
            self._csv.flush()

    def read_now(self, event: Event) -> None:
        """Journal listener: read every exporter at once when the benchmark ends, while they still run,
        so its last window has a reading after it before the teardown stops them."""
        if event.unit in self._clients and event.state in ("exited", "failed", "stopped"):
            self._wake.set()

    async def _scrape(self, client: httpx.AsyncClient, endpoint: PowerEndpoint, seq: int) -> None:
        from srtd._httpx import httpx

        state = self.endpoints[endpoint.node]
        began = self._clock()
        text: str | None = None
        # httpx's timeout is per read: a server that drips its answer is cut off here
        with anyio.move_on_after(self.power.request_timeout_seconds * 2):
            try:
                text = await _read_capped(client, endpoint.url)
            except (httpx.HTTPError, ValueError) as e:
                state.last_error = str(e) or type(e).__name__
        if text is None:
            state.errors += 1
            state.last_error = state.last_error or "no answer in time"
            return
        stamp = (began + self._clock()) / 2
        readings = power_readings(text, self.power.metric, self.power.index_label, self.power.identity_label)
        state.answered += 1
        state.without_metric += not readings
        for index, identity, watts in readings:
            device = self.devices.setdefault((endpoint.node, index), Device())
            if device.times and stamp <= device.times[-1]:
                continue  # a reading must not go back in time
            device.times.append(stamp)
            device.watts.append(watts)
            device.identities.add(identity)
            self._round.append((SCHEMA_VERSION, f"{stamp:.6f}", seq, endpoint.node, index, identity, watts))
            self.samples += 1

    def finish(self) -> Verdict:
        """Stop sampling, judge every window, write the manifest (once; later calls return the same)."""
        if self._verdict is not None:
            return self._verdict
        self._scope.cancel()
        if self._csv is not None:
            with contextlib.suppress(OSError):
                self._write_round()
            with contextlib.suppress(OSError):  # closed even when the last round could not be written
                self._csv.close()
        windows = tuple(check_window(doc, self.devices) for doc in read_windows(self.dir / WINDOWS_DIR))
        reasons = [r for w in windows for r in w.reasons]
        seen: set[tuple[Any, Any]] = set()
        for w in windows:
            if w.benchmark_type is not None and (w.benchmark_type, w.concurrency) in seen:
                reasons.append("measurement_window_duplicate")
            seen.add((w.benchmark_type, w.concurrency))
        reasons += [f"endpoint_never_answered:{node}" for node, e in self.endpoints.items() if not e.answered]
        if not windows:
            reasons.append("no_measurement_windows")
        if self.write_error is not None:
            reasons.append("samples_csv_unwritable")
        status = "failed" if not self.samples else "incomplete" if reasons else "complete"
        if not self.samples:
            reasons.insert(0, "no_power_samples")
        self._verdict = Verdict(status, tuple(dict.fromkeys(reasons)), windows, self.samples)
        self._write_manifest(self._verdict)
        return self._verdict

    def _write_manifest(self, verdict: Verdict) -> None:
        doc = {
            "schema_version": SCHEMA_VERSION,
            "producer": "srtd",
            "clock_source": CLOCK_SOURCE,
            "status": verdict.status,
            "publication_valid": verdict.valid,
            "required": self.power.required,
            "reason_codes": list(verdict.reasons),
            "metric": self.power.metric,
            "sample_interval_seconds": self.power.interval_seconds,
            "scrapes": self.scrapes,
            "samples": verdict.samples,
            "endpoints": [{"node": e.node, "url": e.url, **vars(self.endpoints[e.node])} for e in self.power.endpoints],
            "devices": [
                {"hostname": node, "gpu_index": index, "gpu_uuids": sorted(d.identities), "samples": len(d.times)}
                for (node, index), d in sorted(self.devices.items())
            ],
            "windows": [
                vars(w) | {"power_coverage_valid": w.valid, "reasons": list(w.reasons)} for w in verdict.windows
            ],
        }
        with contextlib.suppress(OSError):  # a full disk: the verdict still decides, the journal says it
            self.dir.mkdir(parents=True, exist_ok=True)
            write_under(self.dir, self.dir / MANIFEST_FILE, json.dumps(doc, indent=2) + "\n", error=FileRefused)


async def _read_capped(client: httpx.AsyncClient, url: str) -> str:
    async with client.stream("GET", url) as response:
        response.raise_for_status()
        body = bytearray()
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) > MAX_SCRAPE_BYTES:
                raise ValueError(f"answer larger than {MAX_SCRAPE_BYTES >> 20} MiB")
    return body.decode("utf-8", errors="replace")


__all__ = ["PowerSampler", "Verdict", "Window", "check_window", "power_readings"]
