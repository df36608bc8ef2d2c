"""Readiness probes: one check at a time; the unit decides when to check again.

`check()` runs one attempt of a tcp, http or worker-count probe against a host the
launcher resolved, and says whether it passed and, if not, why (the last reason goes
into the "not ready within N s" message).  Log probes are not polled: the unit's log
watcher matches them line by line as the tailer delivers lines.  `ProbePacer` says
when the next attempt is due: by the clock, or at once when something nudges it.

HTTP goes through one shared `httpx.AsyncClient` whose transport can be injected
(`httpx.MockTransport` in tests).  `trust_env=False`: a probe of a node never goes
through an HTTP proxy from the environment.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import anyio

from srtd._json import loads_bounded
from srtd._value import value_class
from srtd.unit import Count, FileProbe, HttpProbe, LogProbe, Plan, Probe, TcpProbe, WorkerCountProbe

if TYPE_CHECKING:
    import httpx

ATTEMPT_TIMEOUT = 2.0  # one connect or one request, in real seconds
FIRST_PROBE_DELAY = 0.05  # then doubling up to QUICK_PROBE_DELAY
QUICK_PROBE_DELAY = 0.25  # the pace during the unit's first interval, and after a nudge
REFUSED_PACE = 1.0  # a refused connect is cheap: after the first interval, at least this often
NUDGE_RATE = 5.0  # probes per real second one unit's nudges may cause, sustained
NUDGE_BURST = 3.0  # ... and at once, after a quiet while
NUDGE_WINDOW = 1.0  # after a nudge, probe at the quick pace for this long


def probe_delay(previous: float | None, elapsed: float, interval: float) -> float:
    """How long to wait before the next attempt, by the clock alone.

    A fresh unit is probed quickly (50 ms, doubling to 250 ms) during its first
    `interval` seconds, so a server that is up in 0.6 s is seen at 0.6 s, not at
    the interval; after that, every `interval` seconds, as the recipe asks.
    """
    if elapsed >= interval:
        return interval
    if previous is None:
        return min(FIRST_PROBE_DELAY, interval)
    return min(previous * 2, QUICK_PROBE_DELAY, max(interval - elapsed, FIRST_PROBE_DELAY))


class ProbePacer:
    """When one unit's next probe is due: the clock schedule, and what a nudge may do.

    The clock schedule is `probe_delay` during the first interval; after it, every
    `REFUSED_PACE` while nothing listens (a refused connect costs next to nothing),
    every `interval_seconds` once a server answers "not ready".  A *nudge* (a new
    line in the unit's log; for the frontend gate, a state change of another unit)
    asks for a probe now: it is granted, and the quick pace resumes for
    `NUDGE_WINDOW`, unless an HTTP server answered "not ready" less than
    `interval_seconds` ago (an engine's health endpoint must not be hammered
    because its log is chatty).  How often nudges may probe (`NudgeBucket`) is
    plumbing, not semantics, so it runs on real time, not on this clock.
    """

    def __init__(self, probe: TcpProbe | HttpProbe | FileProbe | WorkerCountProbe, interval: float, now: float) -> None:
        self.interval = interval
        self.holds = isinstance(probe, HttpProbe)  # the gate's router is asked, not an engine
        self.quick_until = now + interval
        self.previous: float | None = None
        self.held_until: float | None = None

    def after(self, now: float, result: ProbeResult) -> float:
        """A probe just failed with `result`: the clock delay until the next one."""
        if self.holds and result.answered:
            self.held_until = now + self.interval
            self.previous = None
            return self.interval
        if now >= self.quick_until:
            self.previous = None
            return self.interval if result.answered else min(self.interval, REFUSED_PACE)
        delay = probe_delay(self.previous, 0.0, self.interval)
        self.previous = delay = min(delay, max(self.quick_until - now, FIRST_PROBE_DELAY))
        return delay

    def nudge(self, now: float) -> bool:
        """A hint that the state may have changed.  True: probe now (after the gap)."""
        if self.held_until is not None and now < self.held_until:
            return False
        if now + NUDGE_WINDOW > self.quick_until:
            self.quick_until = now + NUDGE_WINDOW
            self.previous = QUICK_PROBE_DELAY / 2  # the follow-ups: at the quick pace
        return True


class NudgeBucket:
    """A token bucket: nudged probes at most `NUDGE_RATE` a second, `NUDGE_BURST` at once.

    A nudged probe waits for a token and takes it; the clock's probes keep their own
    pace.  So a line after a quiet while is followed at once, and a chatty log adds
    at most `NUDGE_RATE` probes a second to the clock's.
    """

    def __init__(self, now: float, rate: float = NUDGE_RATE, burst: float = NUDGE_BURST) -> None:
        self.rate = rate
        self.burst = burst
        self.tokens = burst
        self.at = now

    def _refill(self, now: float) -> None:
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = now

    def wait(self, now: float) -> float:
        """Seconds until a nudged probe may run."""
        self._refill(now)
        return 0.0 if self.tokens >= 1 else (1 - self.tokens) / self.rate

    def take(self, now: float) -> None:
        self._refill(now)
        self.tokens = max(0.0, self.tokens - 1)


@value_class(slots=True)
class ProbeResult:
    ok: bool
    detail: str = ""
    answered: bool = False  # the server answered, and the answer was "not ready"


def _url(host: str, port: int, path: str) -> str:
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{port}{path}"


def describe(probe: Probe, host: str | None = None) -> str:
    """`tcp 127.0.0.1:8000`, `http GET http://...`, `log /ready/`."""
    if isinstance(probe, LogProbe):
        return f"log /{probe.pattern}/"
    if isinstance(probe, FileProbe):
        return f"file {probe.path}"
    where = host or probe.node
    if isinstance(probe, TcpProbe):
        return f"tcp {where}:{probe.port}"
    if isinstance(probe, WorkerCountProbe):
        return (
            f"workers {_url(where, probe.port, probe.path)} "
            f"(prefill>={probe.expect_prefill}, decode>={probe.expect_decode})"
        )
    return f"http {_url(where, probe.port, probe.path)}"


def speaks_http(plan: Plan) -> bool:
    """Whether any unit's readiness or liveness probe is an HTTP request."""
    probes = [p for u in plan.units for p in (u.readiness and u.readiness.probe, u.liveness and u.liveness.probe)]
    return any(isinstance(p, HttpProbe | WorkerCountProbe) for p in probes)


def http_client(transport: httpx.AsyncBaseTransport | None) -> httpx.AsyncClient:
    """The probes' one client.  httpx is imported here, not with the supervisor: with its
    TLS stack it is about 12 MiB, which a job whose probes are tcp, log or file never needs.

    verify=False: probes speak plain http:// only (see `_url`); the default TLS context
    would load the CA bundle, 0.1-0.3 s more before the first unit could launch.
    """
    from srtd._httpx import httpx

    return httpx.AsyncClient(transport=transport, trust_env=False, verify=False)


async def check(
    probe: TcpProbe | HttpProbe | FileProbe | WorkerCountProbe,
    *,
    host: str,
    client: httpx.AsyncClient,
    timeout: float = ATTEMPT_TIMEOUT,
) -> ProbeResult:
    if isinstance(probe, FileProbe):
        # the file is on storage the supervisor shares with the node (the log directory)
        exists = await anyio.Path(probe.path).exists()
        return ProbeResult(exists, "file exists" if exists else "no such file yet")
    if isinstance(probe, TcpProbe):
        return await _check_tcp(host, probe.port, timeout)
    from srtd._httpx import httpx  # already imported by `http_client`, which made `client`

    url = _url(host, probe.port, probe.path)
    try:
        response = await client.get(url, timeout=timeout)
    except httpx.HTTPError as e:
        return ProbeResult(False, f"{type(e).__name__}: {e}" if str(e) else type(e).__name__)
    if response.status_code != probe.status:
        return ProbeResult(False, f"HTTP {response.status_code} (want {probe.status})", answered=True)
    if isinstance(probe, HttpProbe):
        return ProbeResult(True, f"HTTP {response.status_code}")
    try:
        document = loads_bounded(response.content)  # a frontend's body: nesting bounded
    except ValueError:  # not JSON, not UTF-8, nested too deep
        return ProbeResult(False, f"body is not JSON: {response.text[:200]!r}", answered=True)
    return evaluate_workers(probe, document)


async def _check_tcp(host: str, port: int, timeout: float) -> ProbeResult:
    try:
        with anyio.fail_after(timeout):
            stream = await anyio.connect_tcp(host, port)
    except TimeoutError:
        return ProbeResult(False, f"connect timed out after {timeout:g} s")
    except OSError as e:
        cause = e.__cause__ if isinstance(e.__cause__, OSError) else e
        if cause.errno:
            return ProbeResult(False, os.strerror(cause.errno))
        return ProbeResult(False, str(cause))
    await stream.aclose()
    return ProbeResult(True, "accepting connections")


# ---------------------------------------------------------------- worker counting


def _dig(document: Any, dotted: str) -> Any:
    node = document
    for part in dotted.split("."):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def _as_text(value: Any) -> str:
    """How a JSON scalar compares with a `where` value: `true`, `null`, `3`, `decode`."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    return str(value)


def _matches(entry: Any, where: dict[str, str | list[str]]) -> bool:
    if not where:
        return True
    if not isinstance(entry, dict):
        return False
    for key, wanted in where.items():
        if key not in entry:
            return False
        have = _as_text(entry[key])
        if isinstance(wanted, list):
            if have not in wanted:
                return False
        elif have != wanted:
            return False
    return True


def count(document: Any, rule: Count) -> int:
    """The number one `Count` rule reads from a JSON document (0 when absent)."""
    if rule.field is not None:
        value = _dig(document, rule.field)
        if isinstance(value, bool) or not isinstance(value, int | float):
            return 0
        return int(value)
    if rule.items is not None:
        items = _dig(document, rule.items)
        if not isinstance(items, list):
            return 0
        return sum(1 for entry in items if _matches(entry, rule.where))
    return 0


def _total(document: Any, rules: Iterable[Count]) -> int:
    return sum(count(document, rule) for rule in rules)


def evaluate_workers(probe: WorkerCountProbe, document: Any) -> ProbeResult:
    prefill = _total(document, probe.prefill)
    decode = _total(document, probe.decode)
    detail = f"prefill {prefill}/{probe.expect_prefill}, decode {decode}/{probe.expect_decode}"
    ok = prefill >= probe.expect_prefill and decode >= probe.expect_decode
    return ProbeResult(ok, detail, answered=not ok)
