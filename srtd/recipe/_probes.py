"""Readiness probe shapes: a service's `readiness:` and a custom engine's `health:`."""

from __future__ import annotations

import re

from pydantic import model_validator

from srtd.recipe._base import Rules, Section


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
    """Regular expression searched for in each log line."""


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
        for name, probe in self._probes().items():
            if isinstance(probe, int):
                _check_port(rules, name, probe)
            port = getattr(probe, "port", None)
            if isinstance(port, int):
                _check_port(rules, f"{name}.port", port)
            if isinstance(probe, HttpProbe | OptionalPortHttp):
                if not probe.path.startswith("/"):
                    rules.add(f"{name}.path", f"must start with '/', got {probe.path!r}")
                if not 100 <= probe.status <= 599:
                    rules.add(f"{name}.status", f"must be an HTTP status (100-599), got {probe.status}")
            if isinstance(probe, LogProbe):
                try:
                    re.compile(probe.pattern)
                except re.error as err:
                    rules.add(f"{name}.pattern", f"is not a valid regular expression: {err}")
        rules.check()
        return self


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

    def _probes(self) -> dict[str, object]:
        return {"port": self.port, "tcp": self.tcp, "http": self.http, "log": self.log}


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
