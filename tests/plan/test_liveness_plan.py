"""`liveness:` from the recipe to the plan: shapes, `default` per engine row, services, errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

import srtd.cli._commands  # noqa: F401
from srtd.cli._main import cli
from srtd.unit import HttpProbe, Liveness, LogProbe, TcpProbe
from tests.plan._util import HEAD, HEAD_LINES, check_problems, load_problems, plan, plan_error

SGLANG = """\
engine: sglang
roles:
  agg:
    nodes: 1
    workers: 1
    liveness: {liveness}
frontend: {{type: {frontend}, enable_multiple_frontends: false}}
"""

CUSTOM = """\
engine:
  type: custom
  command: [serve, --port, "{{port}}"]
  health: {{http: {{path: /ready}}}}
  liveness: {engine}
roles:
  agg: {{nodes: 1, workers: 1, gpus: 8{role}}}
frontend: {{type: none}}
"""


def test_no_liveness_unless_asked() -> None:
    p = plan(SGLANG.format(liveness="null", frontend="dynamo"))
    assert all(u.liveness is None for u in p.units)
    assert '"liveness"' not in p.dumps()  # the plan JSON of a job without it is unchanged


@pytest.mark.parametrize(
    ("frontend", "port_name"),
    [("dynamo", "sys"), ("sglang-router", "http")],
)
def test_sglang_default_is_its_own_health_endpoint(frontend: str, port_name: str) -> None:
    """Dynamo-launched: the system port's /health; launched directly: the HTTP port's /health."""
    unit = plan(SGLANG.format(liveness="default", frontend=frontend)).unit("agg_0_node1")
    assert unit.liveness == Liveness(probe=HttpProbe(node="node1", port=unit.ports[port_name], path="/health"))
    assert unit.liveness.period_seconds == 10
    assert unit.liveness.timeout_seconds == 5
    assert unit.liveness.failure_threshold == 3


def test_vllm_default_is_its_own_health_endpoint() -> None:
    body = SGLANG.replace("engine: sglang", "engine: vllm").format(liveness="default", frontend="dynamo")
    unit = plan(body).unit("agg_0_node1")
    assert unit.liveness is not None
    assert unit.liveness.probe == HttpProbe(node="node1", port=unit.ports["sys"], path="/health")


@pytest.mark.parametrize(
    ("liveness", "probe"),
    [
        ("{tcp: {}}", TcpProbe(node="node1", port=6100)),
        ("{port: 7000}", TcpProbe(node="node1", port=7000)),
        ("{http: {path: /alive, status: 204}}", HttpProbe(node="node1", port=6100, path="/alive", status=204)),
        ("{log: {pattern: 'heartbeat'}}", LogProbe(pattern="heartbeat")),
    ],
)
def test_probe_shapes_and_a_portless_probe_uses_the_worker_port(liveness: str, probe: object) -> None:
    unit = plan(SGLANG.format(liveness=liveness, frontend="sglang-router")).unit("agg_0_node1")
    assert unit.ports["http"] == 6100
    assert unit.liveness is not None
    assert unit.liveness.probe == probe


def test_timings_and_log_silence() -> None:
    liveness = "{http: {}, period_seconds: 2, timeout_seconds: 1, failure_threshold: 5, log_silence_seconds: 60}"
    unit = plan(SGLANG.format(liveness=liveness, frontend="sglang-router")).unit("agg_0_node1")
    assert unit.liveness == Liveness(
        probe=HttpProbe(node="node1", port=6100),
        period_seconds=2,
        timeout_seconds=1,
        failure_threshold=5,
        log_silence_seconds=60,
    )


def test_log_silence_alone_and_a_short_period_shortens_the_default_timeout() -> None:
    unit = plan(SGLANG.format(liveness="{log_silence_seconds: 30, period_seconds: 2}", frontend="dynamo")).unit(
        "agg_0_node1"
    )
    assert unit.liveness == Liveness(probe=None, period_seconds=2, timeout_seconds=2, log_silence_seconds=30)


def test_custom_default_is_its_health_probe_and_the_role_wins_over_the_engine() -> None:
    unit = plan(CUSTOM.format(engine="default", role="")).unit("agg_0_node1")
    assert unit.liveness is not None
    assert unit.liveness.probe == HttpProbe(node="node1", port=6100, path="/ready")
    role = ", liveness: {log: {pattern: tick}, period_seconds: 30}"
    unit = plan(CUSTOM.format(engine="default", role=role)).unit("agg_0_node1")
    assert unit.liveness == Liveness(probe=LogProbe(pattern="tick"), period_seconds=30)


def test_default_on_an_engine_without_a_known_health_endpoint_is_refused_with_its_location() -> None:
    body = """\
engine: atom
roles:
  agg:
    nodes: 1
    liveness: default
frontend: {type: sglang-router}
"""
    mine = [p for p in check_problems(body) if "liveness" in p[1]]
    assert mine == [
        (
            HEAD_LINES + 5,
            "roles.agg.liveness",
            "`default` needs the engine's own health endpoint, and atom has none srtd knows; "
            "name a probe (http, tcp or log)",
        )
    ]


@pytest.mark.parametrize(
    ("liveness", "path", "message"),
    [
        ("sometimes", "roles.agg.liveness", "must be 'default' or a mapping, got 'sometimes'"),
        ("{}", "roles.agg.liveness", "name a probe (default / port / tcp / http / log) or log_silence_seconds"),
        (
            "{tcp: {}, log: {pattern: x}}",
            "roles.agg.liveness",
            "name at most one probe (default / port / tcp / http / log); found tcp, log",
        ),
        ("{tcp: {}, period_seconds: 0}", "roles.agg.liveness.period_seconds", "must be positive, got 0"),
        (
            "{tcp: {}, period_seconds: 2, timeout_seconds: 3}",
            "roles.agg.liveness.timeout_seconds",
            "must be at most period_seconds (2), got 3",
        ),
        ("{tcp: {}, failure_threshold: 0}", "roles.agg.liveness.failure_threshold", "must be at least 1, got 0"),
        ("{log_silence_seconds: -1}", "roles.agg.liveness.log_silence_seconds", "must be positive, got -1"),
        ("{http: {path: x}}", "roles.agg.liveness.http.path", "must start with '/', got 'x'"),
        ("{log: {pattern: '('}}", "roles.agg.liveness.log.pattern", "is not a log pattern srtd can use"),
    ],
)
def test_bad_liveness_is_refused_with_its_path(liveness: str, path: str, message: str) -> None:
    problems = load_problems(SGLANG.format(liveness=liveness, frontend="dynamo"))
    assert len(problems) == 1
    line, where, text = problems[0]
    assert line is not None
    assert line > HEAD_LINES
    assert where == path
    assert text.startswith(message)


SERVICE = """\
engine: sglang
roles:
  agg: {{nodes: 1, workers: 1}}
frontend: {{type: dynamo, enable_multiple_frontends: false}}
services:
  - name: side
    command: [side]
    readiness: {readiness}
    liveness: {liveness}
"""


def test_a_service_default_reuses_its_readiness_probe() -> None:
    unit = plan(SERVICE.format(readiness="{http: {port: 9000, path: /ok}}", liveness="default")).unit("service_side")
    assert unit.liveness is not None
    assert unit.liveness.probe == HttpProbe(node="node1", port=9000, path="/ok")


def test_a_service_portless_probe_uses_its_readiness_port() -> None:
    unit = plan(SERVICE.format(readiness="{port: 9000}", liveness="{http: {path: /alive}}")).unit("service_side")
    assert unit.liveness is not None
    assert unit.liveness.probe == HttpProbe(node="node1", port=9000, path="/alive")


def test_a_service_without_a_port_to_reuse_is_refused() -> None:
    message = plan_error(SERVICE.format(readiness="{log: {pattern: up}}", liveness="default"))
    assert message == (
        "service 'side': liveness: `default` reuses a tcp or http readiness probe, and it has none; name a probe"
    )
    message = plan_error(SERVICE.format(readiness="null", liveness="{tcp: {}}"))
    assert message == "service 'side': liveness: give the probe a port (its readiness probe has none to reuse)"


def test_per_worker_service_instances_cannot_share_a_port_probe() -> None:
    body = SERVICE.format(readiness="{log: {pattern: up}}", liveness="{tcp: {port: 9000}}").replace(
        "    command: [side]\n", "    command: [side]\n    placement: {node: agg, per: worker}\n"
    )
    problems = load_problems(body)
    assert [(path, message) for _, path, message in problems] == [
        (
            "services.0.liveness",
            "per-worker instances share their node's ports; only a `log` probe or "
            "`log_silence_seconds` can tell them apart",
        )
    ]


def test_srtd_plan_shows_the_liveness_check(tmp_path: Path) -> None:
    recipe = tmp_path / "r.yaml"
    liveness = "{http: {}, period_seconds: 4, timeout_seconds: 2, log_silence_seconds: 120}"
    recipe.write_text(HEAD + SGLANG.format(liveness=liveness, frontend="sglang-router"))
    result = CliRunner().invoke(cli, ["plan", str(recipe)], env={"NO_COLOR": "1", "COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    alive = [line.strip() for line in result.stdout.splitlines() if line.strip().startswith("alive:")]
    assert alive == [
        "alive: every 4 s: http node1:6100/health = 200 (timeout 2 s); log silence 120 s; "
        "unhealthy after 3 failed in a row"
    ]
