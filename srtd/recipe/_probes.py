"""Probe shapes: a service's `readiness:`, a custom engine's `health:`, and `liveness:`."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, model_validator
from pydantic_core import PydanticCustomError

from srtd.patterns import log_pattern_error
from srtd.recipe._base import LOG_PATTERN_RULE, Rules, Section


def _check_port(rules: Rules, path: str, port: int | None) -> None:
    if port is not None and not 1 <= port <= 65535:
        rules.add(path, f"port must be between 1 and 65535, got {port}")


class TcpProbe(Section):
    """Ready when `port` accepts a TCP connection on the service node."""

    port: int
    """Port probed on the service node."""


class HttpProbe(Section):
    """Ready when `GET http://<node>:<port><path>` answers `status`."""

    port: int
    """Port probed on the service node."""
    path: str = "/health"
    """URL path requested."""
    status: int = 200
    """HTTP status that counts as ready."""


class LogProbe(Section):
    """Ready when a line of the unit's log matches `pattern`."""

    pattern: str
    """Regular expression (RE2 syntax, docs/recipe.md#log-patterns) searched for in each log line."""


class FileProbe(Section):
    """Ready when a file exists: a service that announces itself by writing one."""

    path: str
    """Relative to the job's log directory (or absolute); `{node}` is the service's node."""


class _ReadinessRules(Section):
    timeout_seconds: int = 120
    """How long to wait, per node, before the unit fails."""
    interval_seconds: int = 2
    """Seconds between attempts once the first quick attempts have failed."""

    def _probes(self) -> dict[str, object]:
        raise NotImplementedError

    @model_validator(mode="after")
    def _exactly_one_probe(self) -> _ReadinessRules:
        rules = Rules()
        named = [name for name, probe in self._probes().items() if probe is not None]
        if len(named) != 1:
            choices = " / ".join(self._probes())
            found = ", ".join(named) if named else "none"
            rules.add("", f"name exactly one probe ({choices}); found {found}")
        if self.timeout_seconds <= 0:
            rules.add("timeout_seconds", f"must be positive, got {self.timeout_seconds}")
        if self.interval_seconds <= 0:
            rules.add("interval_seconds", f"must be positive, got {self.interval_seconds}")
        _probe_rules(rules, self._probes())
        rules.check()
        return self


def _probe_rules(rules: Rules, probes: dict[str, object]) -> None:
    """Ports in range, HTTP paths and statuses, log patterns that compile."""
    for name, probe in probes.items():
        if isinstance(probe, int) and not isinstance(probe, bool):
            _check_port(rules, name, probe)
        port = getattr(probe, "port", None)
        if isinstance(port, int):
            _check_port(rules, f"{name}.port", port)
        if isinstance(probe, HttpProbe | OptionalPortHttp):
            if not probe.path.startswith("/"):
                rules.add(f"{name}.path", f"must start with '/', got {probe.path!r}")
            if not 100 <= probe.status <= 599:
                rules.add(f"{name}.status", f"must be an HTTP status (100-599), got {probe.status}")
        if isinstance(probe, LogProbe) and (why := log_pattern_error(probe.pattern)) is not None:
            rules.add(f"{name}.pattern", f"{LOG_PATTERN_RULE}: {why}")


class ServiceReadiness(_ReadinessRules):
    """A readiness gate: the unit counts as ready once its one probe passes."""

    port: int | None = None
    """Shorthand for `tcp: {port: <port>}`."""
    tcp: TcpProbe | None = None
    """TCP connect probe."""
    http: HttpProbe | None = None
    """HTTP GET probe."""
    log: LogProbe | None = None
    """Log-line probe."""
    file: FileProbe | None = None
    """File-exists probe."""

    def _probes(self) -> dict[str, object]:
        return {"port": self.port, "tcp": self.tcp, "http": self.http, "log": self.log, "file": self.file}


class OptionalPortTcp(Section):
    """TCP probe of a worker; without `port`, the worker's own allocated port."""

    port: int | None = None


class OptionalPortHttp(Section):
    """HTTP probe of a worker; without `port`, the worker's own allocated port."""

    port: int | None = None
    path: str = "/health"
    status: int = 200


class WorkerHealth(_ReadinessRules):
    """A custom engine worker's readiness probe.

    Same shape as a service's `readiness:`, except that a port may be left out:
    it then means the worker's own `{port}`.  `port: null` with nothing else is
    not a probe; write `tcp: {}` for "my own port accepts".
    """

    port: int | None = None
    tcp: OptionalPortTcp | None = None
    http: OptionalPortHttp | None = None
    log: LogProbe | None = None
    timeout_seconds: int = 1800
    """Large models take long to load; the frontend gate waits as long."""

    def _probes(self) -> dict[str, object]:
        return {"port": self.port, "tcp": self.tcp, "http": self.http, "log": self.log}


DEFAULT_LIVENESS_TIMEOUT = 5.0


class LivenessSpec(Section):
    """srtd: is a ready process still serving?  Checked once per period, only while it is ready.

    One probe (`default`, `port`, `tcp`, `http` or `log`), `log_silence_seconds`, or
    both.  A period fails when the probe fails or does not answer within
    `timeout_seconds`, when a `log` probe saw no matching (heartbeat) line during the
    period, or when the log has had no new line for `log_silence_seconds`;
    `failure_threshold` failed periods in a row end the attempt as unhealthy.  A
    worker's probe without `port` uses the worker's own port.
    """

    default: bool = False
    """Probe the engine's own health endpoint (a service: its readiness probe)."""
    port: int | None = None
    """Shorthand for `tcp: {port: <port>}`."""
    tcp: OptionalPortTcp | None = None
    """TCP connect probe.  It does not see a frozen process: the kernel still accepts."""
    http: OptionalPortHttp | None = None
    """HTTP GET probe."""
    log: LogProbe | None = None
    """A heartbeat: at least one matching log line per period."""
    period_seconds: float = 10.0
    """Seconds between checks."""
    timeout_seconds: float | None = None
    """How long one tcp/http check may take, at most `period_seconds`; default 5 (or the
    period, when shorter)."""
    failure_threshold: int = 3
    """Failed periods in a row that make the process unhealthy."""
    log_silence_seconds: float | None = None
    """No new log line for this long counts as one failed period per period."""

    @property
    def timeout(self) -> float:
        if self.timeout_seconds is not None:
            return self.timeout_seconds
        return min(DEFAULT_LIVENESS_TIMEOUT, self.period_seconds)

    def timings(self) -> dict[str, Any]:
        """The plan's `Liveness` fields besides the probe, defaults resolved."""
        return {
            "period_seconds": self.period_seconds,
            "timeout_seconds": self.timeout,
            "failure_threshold": self.failure_threshold,
            "log_silence_seconds": self.log_silence_seconds,
        }

    def probes(self) -> dict[str, object]:
        named = {"port": self.port, "tcp": self.tcp, "http": self.http, "log": self.log}
        return {"default": self.default or None, **named}

    def named_probe(self) -> str | None:
        named = [name for name, probe in self.probes().items() if probe is not None]
        return named[0] if named else None

    @model_validator(mode="after")
    def _rules(self) -> LivenessSpec:
        rules = Rules()
        named = [name for name, probe in self.probes().items() if probe is not None]
        if len(named) > 1:
            rules.add("", f"name at most one probe (default / port / tcp / http / log); found {', '.join(named)}")
        if not named and self.log_silence_seconds is None:
            rules.add("", "name a probe (default / port / tcp / http / log) or log_silence_seconds")
        if self.period_seconds <= 0:
            rules.add("period_seconds", f"must be positive, got {self.period_seconds:g}")
        if self.timeout_seconds is None:
            pass
        elif self.timeout_seconds <= 0:
            rules.add("timeout_seconds", f"must be positive, got {self.timeout_seconds:g}")
        elif self.timeout_seconds > self.period_seconds > 0:
            rules.add(
                "timeout_seconds",
                f"must be at most period_seconds ({self.period_seconds:g}), got {self.timeout_seconds:g}",
            )
        if self.failure_threshold < 1:
            rules.add("failure_threshold", f"must be at least 1, got {self.failure_threshold}")
        if self.log_silence_seconds is not None and self.log_silence_seconds <= 0:
            rules.add("log_silence_seconds", f"must be positive, got {self.log_silence_seconds:g}")
        _probe_rules(rules, {k: v for k, v in self.probes().items() if k != "default"})
        rules.check()
        return self


def _liveness_from_name(value: Any) -> Any:
    # `liveness: default` is short for `liveness: {default: true}`.
    if isinstance(value, str):
        if value != "default":
            raise PydanticCustomError("liveness", "must be 'default' or a mapping")
        return {"default": True}
    return value


LivenessField = Annotated[
    LivenessSpec | None,
    BeforeValidator(_liveness_from_name, json_schema_input_type=Literal["default"] | LivenessSpec | None),
]
