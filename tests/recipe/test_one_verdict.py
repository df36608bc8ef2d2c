"""One verdict: `srtd validate` refuses what `srtd plan` refuses, at the same line, for every variant."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

import srtd.cli._commands  # noqa: F401  (registers the commands)
from srtd.cli._main import cli
from tests.plan._util import HEAD as PLAN_HEAD

# Ten lines; anything appended starts on line 11.
HEAD = (
    PLAN_HEAD
    + """\
engine: sglang
roles:
  agg: {nodes: 1, workers: 1}
frontend:
  type: sglang-router
"""
)


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "r.yaml"
    path.write_text(text)
    return path


def same_verdict(path: Path, *plan_args: str) -> list[str]:
    """validate's lines; `srtd plan` must refuse with exactly those lines, and both exit 2."""
    checked = run("validate", str(path))
    planned = run("plan", str(path), "--slurm", *plan_args)  # validate plans for Slurm
    assert (checked.exit_code, planned.exit_code) == (2, 2), (checked.output, planned.output)
    assert checked.stdout == planned.stdout == ""
    lines = checked.stderr.splitlines()
    assert planned.stderr.splitlines() == [f"srtd: {line}" for line in lines]
    return lines


def test_a_cycle_of_three_after_entries(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        HEAD
        + "services:\n"
        + "  - {name: a, command: [x], after: [c]}\n"
        + "  - {name: b, command: [x], after: [a]}\n"
        + "  - {name: c, command: [x], after: [b]}\n",
    )
    assert same_verdict(path) == [
        f"{path}:12:37 services.0.after.0: dependency cycle: service_a -> service_c -> service_b -> service_a"
    ]


def test_after_naming_an_implied_service_that_is_disabled(tmp_path: Path) -> None:
    text = HEAD.replace("type: sglang-router", "type: dynamo") + (
        "services:\n  - {name: etcd, type: etcd, enabled: false}\n  - {name: a, command: [x], after: [etcd]}\n"
    )
    path = write(tmp_path, text)
    assert same_verdict(path) == [
        f"{path}:13:37 services.1.after.0: service 'a' waits for 'etcd', which is disabled "
        "(services.0 has enabled: false)"
    ]


def test_after_naming_no_service_one_message_per_entry(tmp_path: Path) -> None:
    path = write(tmp_path, HEAD + "services:\n  - {name: a, command: [x], after: [zz, yy]}\n")
    assert same_verdict(path) == [
        f"{path}:12:37 services.0.after.0: service 'a' waits for 'zz', which is not a service of this job (a)",
        f"{path}:12:41 services.0.after.1: service 'a' waits for 'yy', which is not a service of this job (a)",
    ]


def test_two_services_on_one_port_of_one_node(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        HEAD
        + "services:\n"
        + "  - {name: a, command: [x], readiness: {port: 9000}}\n"
        + "  - name: b\n"
        + "    command: [y]\n"
        + "    readiness:\n"
        + "      http: {port: 9000, path: /ready}\n",
    )
    assert same_verdict(path) == [
        f"{path}:16:14 services.1.readiness.http.port: port 9000 on node1: both service_a and service_b listen on it"
    ]


def test_a_direct_frontend_with_several_workers(tmp_path: Path) -> None:
    text = HEAD.replace("agg: {nodes: 1, workers: 1}", "agg: {nodes: 1, workers: 3}").replace(
        "type: sglang-router", "type: sglang"
    )
    path = write(tmp_path, text)
    (line,) = same_verdict(path)
    assert line.startswith(f"{path}:8:19 roles.agg.workers: frontend `sglang` has no router: ")
    assert "roles.agg has 3 workers" in line


def test_inside_an_override_variant(tmp_path: Path) -> None:
    base = "".join(f"  {line}\n" for line in HEAD.splitlines())
    text = (
        "base:\n"
        + base
        + "override_ok:\n  name: ok\n"
        + "override_loop:\n"
        + "  services:\n"
        + "    - {name: a, command: [x], after: [b]}\n"
        + "    - {name: b, command: [x], after: [a]}\n"
    )
    path = write(tmp_path, text)
    assert same_verdict(path, "--variant", "override_loop") == [
        f"{path}:16:39 [override_loop] services.0.after.0: dependency cycle: service_a -> service_b -> service_a"
    ]
    # the good variant plans; validate judges the file by all of its variants
    assert run("plan", str(path), "--slurm", "--variant", "override_ok").exit_code == 0


def test_warnings_are_printed_alike_and_reported_in_json(tmp_path: Path) -> None:
    # a model alias the cluster settings do not define is kept as written, with a warning
    path = write(tmp_path, HEAD.replace("path: /models/m", "path: mymodel"))
    warning = f"{path}: warning: model alias 'mymodel' is not defined in the cluster settings; kept as written"
    checked = run("validate", str(path))
    assert checked.exit_code == 0
    assert checked.stdout == f"{path}: valid (1 recipe)\n"
    assert checked.stderr.splitlines() == [warning]
    planned = run("plan", str(path), "--json", "--slurm")
    assert planned.exit_code == 0
    assert planned.stderr.splitlines() == [warning]
    doc = json.loads(run("validate", "--json", str(path)).stdout)
    assert doc[0]["warnings"] == [
        {
            "file": str(path),
            "line": None,
            "column": None,
            "path": "",
            "variant": None,
            "message": "warning: model alias 'mymodel' is not defined in the cluster settings; kept as written",
        }
    ]


@pytest.mark.parametrize("as_json", [False, True])
def test_a_valid_file_has_no_problem(tmp_path: Path, as_json: bool) -> None:
    path = write(tmp_path, HEAD)
    result = run("validate", *(["--json"] if as_json else []), str(path))
    assert result.exit_code == 0
    assert result.stderr == ""


def test_workers_that_do_not_fit_their_nodes(tmp_path: Path) -> None:
    path = write(tmp_path, HEAD.replace("agg: {nodes: 1, workers: 1}", "agg: {nodes: 1, workers: 3, gpus: 4}"))
    assert same_verdict(path) == [
        f"{path}:8:19 roles.agg.workers: 3 worker(s) of 4 GPU(s) do not fit on 1 node(s) of 8 GPUs"
    ]
