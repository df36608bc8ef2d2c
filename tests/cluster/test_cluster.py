"""Cluster settings: which srtslurm.yaml is read, SRTD_* overrides, and errors that point at the line."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pydantic import ValidationError

from srtd.cluster import CONFIG_ENV, Cluster, find_cluster_file, load_cluster
from srtd.errors import EXIT_INPUT, ClusterConfigError, exit_code_for


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No SRTD_* variable, an empty working directory and an empty home."""
    for name in list(os.environ):
        if name.startswith("SRTD_"):
            monkeypatch.delenv(name)
    work = tmp_path / "work"
    home = tmp_path / "home"
    work.mkdir()
    home.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("HOME", str(home))
    return tmp_path


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def error_of(explicit: Path | None = None) -> str:
    with pytest.raises(ClusterConfigError) as info:
        load_cluster(explicit)
    assert exit_code_for(info.value) == EXIT_INPUT
    return str(info.value)


# --------------------------------------------------------------------------- which file


@pytest.fixture
def four_files(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """A settings file in each place srtd looks, each naming where it is."""
    files = {
        "explicit": write(isolated / "explicit.yaml", "cluster: explicit\n"),
        "env": write(isolated / "from-env.yaml", "cluster: env\n"),
        "cwd": write(isolated / "work" / "srtslurm.yaml", "cluster: cwd\n"),
        "home": write(isolated / "home" / ".config" / "srtd" / "srtslurm.yaml", "cluster: home\n"),
    }
    monkeypatch.setenv(CONFIG_ENV, str(files["env"]))
    return files


def test_no_file_at_all_gives_defaults() -> None:
    cluster, path = load_cluster()
    assert path is None
    assert cluster == Cluster()
    assert cluster.container_runtime == "pyxis"
    assert cluster.visible_devices_env == "CUDA_VISIBLE_DEVICES"
    assert cluster.kill_wait_seconds == 30
    assert cluster.output_root == "outputs"
    assert cluster.containers == {}
    assert find_cluster_file() is None


def test_explicit_path_wins_over_everything(four_files: dict[str, Path]) -> None:
    cluster, path = load_cluster(four_files["explicit"])
    assert (cluster.cluster, path) == ("explicit", four_files["explicit"])


def test_explicit_path_as_a_string(four_files: dict[str, Path]) -> None:
    cluster, path = load_cluster(str(four_files["explicit"]))
    assert (cluster.cluster, path) == ("explicit", four_files["explicit"])


def test_env_variable_wins_over_cwd_and_home(four_files: dict[str, Path]) -> None:
    cluster, path = load_cluster()
    assert (cluster.cluster, path) == ("env", four_files["env"])


def test_cwd_wins_over_home(four_files: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CONFIG_ENV)
    cluster, path = load_cluster()
    assert cluster.cluster == "cwd"
    assert path is not None
    assert path.resolve() == four_files["cwd"].resolve()


def test_home_when_nothing_else(four_files: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CONFIG_ENV)
    four_files["cwd"].unlink()
    cluster, path = load_cluster()
    assert (cluster.cluster, path) == ("home", four_files["home"])


def test_cwd_is_the_current_directory_not_the_first_one(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(isolated / "work" / "srtslurm.yaml", "cluster: work\n")
    other = isolated / "other"
    write(other / "srtslurm.yaml", "cluster: other\n")
    monkeypatch.chdir(other)
    assert load_cluster()[0].cluster == "other"


def test_a_directory_named_srtslurm_yaml_in_cwd_is_skipped(isolated: Path) -> None:
    (isolated / "work" / "srtslurm.yaml").mkdir()
    write(isolated / "home" / ".config" / "srtd" / "srtslurm.yaml", "cluster: home\n")
    assert load_cluster()[0].cluster == "home"


def test_explicit_path_that_does_not_exist(isolated: Path) -> None:
    missing = isolated / "nope.yaml"
    assert error_of(missing) == f"{missing}: no such file"


def test_env_variable_naming_a_missing_file_is_an_error(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Not a silent fall-back to ./srtslurm.yaml: the user asked for that file.
    write(isolated / "work" / "srtslurm.yaml", "cluster: cwd\n")
    monkeypatch.setenv(CONFIG_ENV, str(isolated / "nope.yaml"))
    assert error_of() == f"{isolated / 'nope.yaml'}: no such file"


def test_empty_env_variable_is_ignored(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(isolated / "work" / "srtslurm.yaml", "cluster: cwd\n")
    monkeypatch.setenv(CONFIG_ENV, "")
    assert load_cluster()[0].cluster == "cwd"


# --------------------------------------------------------------------------- contents


def test_file_values(isolated: Path) -> None:
    path = write(
        isolated / "c.yaml",
        "cluster: alpha\n"
        "default_account: acct\n"
        "gpus_per_node: 4\n"
        "container_runtime: none\n"
        "containers:\n"
        "  sglang: /img/sglang.sqsh\n"
        "default_srun_options:\n"
        "  mpi: pmix\n"
        "early_warning_seconds: 120\n",
    )
    cluster, _ = load_cluster(path)
    assert cluster.cluster == "alpha"
    assert cluster.default_account == "acct"
    assert cluster.gpus_per_node == 4
    assert cluster.container_runtime == "none"
    assert cluster.containers == {"sglang": "/img/sglang.sqsh"}
    assert cluster.default_srun_options == {"mpi": "pmix"}
    assert cluster.early_warning_seconds == 120
    assert cluster.default_partition is None  # unset keys keep their defaults


@pytest.mark.parametrize("text", ["", "\n", "# nothing here\n", "~\n"])
def test_empty_file_gives_defaults(isolated: Path, text: str) -> None:
    path = write(isolated / "c.yaml", text)
    assert load_cluster(path) == (Cluster(), path)


@pytest.mark.parametrize("text", ["- a\n- b\n", "just text\n", "42\n"])
def test_file_that_is_not_a_mapping_is_refused(isolated: Path, text: str) -> None:
    path = write(isolated / "c.yaml", text)
    assert error_of(path) == f"{path}:1: the cluster settings must be a YAML mapping"


def test_yaml_syntax_error(isolated: Path) -> None:
    path = write(isolated / "c.yaml", "cluster: a\ncontainers: [\n")
    assert error_of(path) == f"{path}:3:1: invalid YAML: expected the node content, but found '<stream end>'"


def test_unknown_key_names_the_key_line_and_a_close_match(isolated: Path) -> None:
    path = write(isolated / "c.yaml", "cluster: a\ndefault_acount: x\n")
    assert error_of(path) == f"{path}:2:1 default_acount: unknown key 'default_acount'; did you mean 'default_account'?"


def test_unknown_key_without_a_close_match_lists_the_known_keys(isolated: Path) -> None:
    path = write(isolated / "c.yaml", "cluster: a\nzzz: 1\n")
    known = ", ".join(Cluster.model_fields)  # the list grows as settings are added
    assert known.startswith("cluster, default_account, default_partition, ")
    assert error_of(path) == f"{path}:2:1 zzz: unknown key 'zzz'; known keys: {known}"


def test_every_unknown_key_is_reported(isolated: Path) -> None:
    path = write(isolated / "c.yaml", "contaners: {}\ncluster: a\nnetwork_interfce: ib0\n")
    assert error_of(path).splitlines() == [
        f"{path}:1:1 contaners: unknown key 'contaners'; did you mean 'containers'?",
        f"{path}:3:1 network_interfce: unknown key 'network_interfce'; did you mean 'network_interface'?",
    ]


def test_wrong_type_names_the_line(isolated: Path) -> None:
    path = write(isolated / "c.yaml", "cluster: a\ngpus_per_node: four\n")
    assert error_of(path) == (
        f"{path}:2:16 gpus_per_node: input should be a valid integer, unable to parse string as an integer, got 'four'"
    )


def test_wrong_type_in_a_nested_mapping_names_its_line(isolated: Path) -> None:
    path = write(isolated / "c.yaml", "cluster: a\ncontainers:\n  sglang: /img\n  vllm: 1\n")
    assert error_of(path) == f"{path}:4:9 containers.vllm: input should be a valid string, got 1"


def test_value_outside_its_vocabulary(isolated: Path) -> None:
    path = write(isolated / "c.yaml", "container_runtime: docker\n")
    assert error_of(path) == f"{path}:1:20 container_runtime: input should be 'pyxis' or 'none', got 'docker'"


def test_several_wrong_values_are_all_reported(isolated: Path) -> None:
    path = write(isolated / "c.yaml", "gpus_per_node: x\ncluster: a\nkill_wait_seconds: soon\n")
    assert [line.split(" ", 2)[:2] for line in error_of(path).splitlines()] == [
        [f"{path}:1:16", "gpus_per_node:"],
        [f"{path}:3:20", "kill_wait_seconds:"],
    ]


def test_settings_are_frozen() -> None:
    cluster, _ = load_cluster()
    with pytest.raises(ValidationError, match="frozen"):
        cluster.cluster = "x"  # type: ignore[misc]


# --------------------------------------------------------------------------- SRTD_* overrides


def test_env_overrides_beat_the_file(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(isolated / "c.yaml", "cluster: file\ndefault_account: file-acct\ngpus_per_node: 4\n")
    monkeypatch.setenv("SRTD_DEFAULT_ACCOUNT", "env-acct")
    monkeypatch.setenv("SRTD_GPUS_PER_NODE", "8")
    monkeypatch.setenv("SRTD_CONTAINER_RUNTIME", "none")
    cluster, _ = load_cluster(path)
    assert cluster.cluster == "file"
    assert cluster.default_account == "env-acct"
    assert cluster.gpus_per_node == 8
    assert cluster.container_runtime == "none"


def test_nested_env_override_replaces_one_entry_of_a_file_mapping(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(isolated / "c.yaml", "containers:\n  sglang: /file/sglang.sqsh\n  vllm: /file/vllm.sqsh\n")
    monkeypatch.setenv("SRTD_CONTAINERS__SGLANG", "/env/sglang.sqsh")
    monkeypatch.setenv("SRTD_MODEL_PATHS__DSR1", "/models/dsr1")
    cluster, _ = load_cluster(path)
    assert cluster.containers == {"sglang": "/env/sglang.sqsh", "vllm": "/file/vllm.sqsh"}
    assert cluster.model_paths == {"dsr1": "/models/dsr1"}


def test_env_overrides_without_a_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SRTD_CLUSTER", "envonly")
    monkeypatch.setenv("SRTD_CONTAINERS__SGLANG", "img")
    monkeypatch.setenv("SRTD_USE_GPUS_PER_NODE_DIRECTIVE", "false")
    cluster, path = load_cluster()
    assert path is None
    assert cluster.cluster == "envonly"
    assert cluster.containers == {"sglang": "img"}
    assert cluster.use_gpus_per_node_directive is False


def test_env_override_of_the_wrong_type_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SRTD_GPUS_PER_NODE", "x")
    assert error_of() == (
        "SRTD_GPUS_PER_NODE: input should be a valid integer, unable to parse string as an integer, got 'x'"
    )


def test_env_override_of_the_wrong_type_with_an_unrelated_file(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(isolated / "c.yaml", "cluster: a\n")
    monkeypatch.setenv("SRTD_CONTAINER_RUNTIME", "docker")
    assert error_of(path) == "SRTD_CONTAINER_RUNTIME: input should be 'pyxis' or 'none', got 'docker'"


def test_bad_env_override_of_a_key_the_file_also_sets_names_the_variable(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(isolated / "c.yaml", "cluster: a\ngpus_per_node: 4\n")
    monkeypatch.setenv("SRTD_GPUS_PER_NODE", "x")
    assert error_of(path) == (
        "SRTD_GPUS_PER_NODE: input should be a valid integer, unable to parse string as an integer, got 'x'"
    )


def test_the_config_variable_itself_is_not_a_setting(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(isolated / "c.yaml", "cluster: a\n")
    monkeypatch.setenv(CONFIG_ENV, str(path))
    monkeypatch.setenv("SRTD_TEST_SHARED", "/elsewhere")
    monkeypatch.setenv("SRTD_JOB_ID", "42")
    cluster, found = load_cluster()
    assert (cluster.cluster, found) == ("a", path)


def test_a_mistyped_variable_is_an_error_naming_it(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SRTD_DEFAULT_ACOUNT", "abc")
    with pytest.raises(ClusterConfigError) as info:
        load_cluster()
    assert str(info.value) == "SRTD_DEFAULT_ACOUNT: not a cluster setting; did you mean SRTD_DEFAULT_ACCOUNT?"


def test_nested_variables_of_a_known_setting_are_accepted(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SRTD_CONTAINERS__SGLANG", "/c/sglang.sqsh")
    cluster, _ = load_cluster()
    assert cluster.containers == {"sglang": "/c/sglang.sqsh"}


def test_default_host_setup_is_read_and_checked_like_a_recipes(isolated: Path) -> None:
    path = write(isolated / "hooks.yaml", "default_host_setup:\n  commands: [nvidia-smi -lgc 1980]\n  nodes: workers\n")
    cluster, _ = load_cluster(path)
    assert cluster.default_host_setup is not None
    hooks = cluster.default_host_setup
    assert (hooks.commands, hooks.nodes) == (("nvidia-smi -lgc 1980",), "workers")
    bad = write(isolated / "bad.yaml", "default_host_setup:\n  commands: [x]\n  timeout_seconds: 0\n")
    assert error_of(bad) == (
        f"{bad}:3:20 default_host_setup.timeout_seconds: input should be greater than or equal to 1, got 0"
    )
