"""Host steps (`host_setup`): one unit per node before the job and after its teardown.

The setup steps are the job's first tier (every other unit waits for all of them, directly
or through what it waits for), the teardown steps its last (launched by the supervisor after
every other tier, `on_teardown`).  srtctl's semantics: srtctl-behaviour.md §1.6 and §4.1.
"""

from __future__ import annotations

import shlex

from srtd.cluster import Cluster
from srtd.launch import srun_line
from srtd.plan import PHASES
from srtd.recipe import HostSetupConfig
from srtd.unit import Condition, Plan, UnitKind
from tests.plan._util import PD, after, load_problems, names, plan

NODES = ["n1", "n2", "n3", "n4"]


def hooks(extra: str = "", *, commands: str = '["lock clocks", "echo ok"]', teardown: str = '["reset clocks"]') -> str:
    return f"host_setup:\n  commands: {commands}\n  teardown: {teardown}\n{extra}" + PD


def waits_for(p: Plan, name: str) -> set[str]:
    """Every unit `name` waits for, directly or through its dependencies."""
    seen: set[str] = set()
    todo = [name]
    while todo:
        for edge in p.unit(todo.pop()).after:
            if edge.unit not in seen:
                seen.add(edge.unit)
                todo.append(edge.unit)
    return seen


def test_every_node_gets_a_setup_step_first_and_a_teardown_step_last() -> None:
    p = plan(hooks(), nodes=NODES)
    order = names(p)
    assert order[:2] == ["host_setup_n1", "host_setup_n2"]
    assert order[-2:] == ["host_teardown_n1", "host_teardown_n2"]
    assert p.phases == ("host_setup", *PHASES, "host_teardown")
    # n1 is head and infra (and prefill), n2 decode: nodes: all covers each once
    assert [p.unit(n).nodes for n in order[:2]] == [("n1",), ("n2",)]


def test_nothing_launches_before_every_setup_step_has_ended() -> None:
    p = plan(hooks(), nodes=NODES)
    setup = {"host_setup_n1", "host_setup_n2"}
    body = [u for u in p.units if u.kind is not UnitKind.HOST]
    assert body, "the job has units"
    for unit in body:
        assert setup <= waits_for(p, unit.name), unit.name
    # the roots wait for them directly, as `ended` (an ignored failure does not hold them back)
    roots = [u.name for u in body if all(e.unit in setup for e in u.after)]
    assert roots == ["service_etcd"]  # NATS waits for etcd, the workers for both
    assert after(p, "service_etcd") == [("host_setup_n1", "ended"), ("host_setup_n2", "ended")]
    # a unit that already waits for something is not given the edges again
    assert ("host_setup_n1", "ended") not in after(p, "prefill_0_n1")


def test_a_setup_step_is_the_recipes_shell_on_the_bare_host() -> None:
    p = plan(hooks("  timeout_seconds: 42\n"), nodes=NODES)
    step = p.unit("host_setup_n2")
    assert step.kind is UnitKind.HOST
    assert step.argv == ("bash", "-c", "lock clocks && echo ok")
    assert step.container is None
    assert step.log == "host_setup_n2.out"
    assert step.run_timeout == 42.0
    assert step.critical
    assert not step.terminal
    assert not step.on_teardown
    assert step.restart.policy.value == "never"
    assert step.env["SRTD_LOG_DIR"] == p.log_dir  # the host's path, not the container's /logs
    line = shlex.split(srun_line(step, job_id="7", log_dir="/logs"))
    assert "--nodes=1" in line
    assert "--nodelist=n2" in line
    assert not [a for a in line if a.startswith("--container")]
    assert line[-3:-1] == ["bash", "-c"]
    assert line[-1].endswith("exec bash -c 'lock clocks && echo ok'")


def test_ignore_failure_makes_the_setup_steps_non_critical() -> None:
    p = plan(hooks("  ignore_failure: true\n"), nodes=NODES)
    assert not p.unit("host_setup_n1").critical
    assert after(p, "service_etcd")[0] == ("host_setup_n1", Condition.ENDED.value)


def test_teardown_steps_are_their_own_last_tier_with_their_own_budget() -> None:
    p = plan(hooks("  timeout_seconds: 120\n"), nodes=NODES)
    last = max(u.tier for u in p.units if not u.on_teardown)
    for name in ("host_teardown_n1", "host_teardown_n2"):
        step = p.unit(name)
        assert step.on_teardown
        assert not step.critical
        assert not step.after
        assert step.tier == last + 1
        assert step.argv == ("bash", "-c", "reset clocks")
        assert step.log == f"{name}.out"
    # the budget of that tier is the run timeout plus the grace of the kill that ends it there
    assert p.teardown.tiers[str(last + 1)] == 125.0
    assert p.teardown.total_seconds == sum(p.teardown.tiers.values())


def test_workers_means_the_worker_nodes_only() -> None:
    p = plan(hooks("  nodes: workers\n"), nodes=NODES)
    everything = plan(hooks(), nodes=NODES)
    assert [u.name for u in p.units if u.kind is UnitKind.HOST] == [
        "host_setup_n1",
        "host_setup_n2",
        "host_teardown_n1",
        "host_teardown_n2",
    ]
    three = plan(hooks("  nodes: workers\n").replace("prefill: {nodes: 1", "prefill: {nodes: 2"), nodes=NODES)
    assert [u.node for u in three.units if u.phase == "host_setup"] == ["n1", "n2", "n3"]
    assert len(everything.units) == len(p.units)


def test_all_adds_a_dedicated_infra_node() -> None:
    dedicated = "services:\n  - {name: etcd, type: etcd, placement: {node: dedicated}}\nfrontend:"
    body = hooks().replace("frontend:", dedicated)
    p = plan(body, nodes=NODES)
    assert (p.nodes["infra"], p.nodes["head"]) == (("n1",), ("n2",))
    # srtctl's order: head, infra, then the worker nodes, each once
    assert [u.node for u in p.units if u.phase == "host_setup"] == ["n2", "n1", "n3"]
    workers_only = plan(body.replace("host_setup:\n", "host_setup:\n  nodes: workers\n"), nodes=NODES)
    assert [u.node for u in workers_only.units if u.phase == "host_setup"] == ["n2", "n3"]


def test_only_the_lists_that_are_set_make_steps() -> None:
    teardown_only = plan(hooks(commands="[]"), nodes=NODES)
    assert [u.name for u in teardown_only.units if u.kind is UnitKind.HOST] == ["host_teardown_n1", "host_teardown_n2"]
    assert teardown_only.phases == (*PHASES, "host_teardown")
    assert not teardown_only.unit("service_etcd").after
    setup_only = plan(hooks(teardown="[]"), nodes=NODES)
    assert setup_only.phases == ("host_setup", *PHASES)
    assert not [u for u in setup_only.units if u.on_teardown]


def test_a_plan_without_host_setup_is_unchanged() -> None:
    p = plan(PD, nodes=NODES)
    assert p.phases == PHASES
    assert not [u for u in p.units if u.kind is UnitKind.HOST]
    assert '"on_teardown"' not in p.dumps()


def test_the_plan_json_carries_the_host_steps_through_a_round_trip() -> None:
    p = plan(hooks(), nodes=NODES)
    again = Plan.loads(p.dumps())
    assert again == p
    assert again.unit("host_teardown_n1").on_teardown
    assert '"on_teardown": true' in p.dumps()


def test_a_timeout_below_one_second_is_refused_with_its_line() -> None:
    problems = load_problems(hooks("  timeout_seconds: 0\n"))
    assert [(line, path) for line, path, _ in problems] == [(9, "host_setup.timeout_seconds")]


CLUSTER_HOOKS = Cluster(default_host_setup=HostSetupConfig(commands=("cluster lock",), teardown=("cluster reset",)))


def test_the_clusters_default_hooks_run_when_the_recipe_has_none() -> None:
    p = plan(PD, CLUSTER_HOOKS, nodes=NODES)
    assert [(u.name, u.argv) for u in p.units if u.kind is UnitKind.HOST] == [
        ("host_setup_n1", ("bash", "-c", "cluster lock")),
        ("host_setup_n2", ("bash", "-c", "cluster lock")),
        ("host_teardown_n1", ("bash", "-c", "cluster reset")),
        ("host_teardown_n2", ("bash", "-c", "cluster reset")),
    ]


def test_a_recipes_host_setup_replaces_the_clusters_whole() -> None:
    # the recipe names no teardown: the cluster's teardown does not come back through it
    p = plan(hooks(teardown="[]"), CLUSTER_HOOKS, nodes=NODES)
    assert [(u.name, u.argv[-1]) for u in p.units if u.kind is UnitKind.HOST] == [
        ("host_setup_n1", "lock clocks && echo ok"),
        ("host_setup_n2", "lock clocks && echo ok"),
    ]
    # an empty block turns the cluster's hooks off
    off = plan("host_setup: {}\n" + PD, CLUSTER_HOOKS, nodes=NODES)
    assert not [u for u in off.units if u.kind is UnitKind.HOST]
