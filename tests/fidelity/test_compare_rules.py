"""The comparison's own rules, on hand-written command lines."""

from __future__ import annotations

from tests.fidelity._compare import command_parts


def test_a_flag_repeated_with_its_value_is_one_pair() -> None:
    program, flags = command_parts(
        ["vllm", "serve", "--served-model-name", "m", "--port", "1", "--served-model-name", "m"]
    )
    assert program == "vllm serve"
    assert flags == [("served-model-name", ("m",)), ("port", ("1",))]


def test_a_flag_repeated_with_another_value_counts_twice() -> None:
    _, flags = command_parts(["vllm", "--served-model-name", "a", "--served-model-name", "b"])
    assert flags == [("served-model-name", ("a",)), ("served-model-name", ("b",))]


def test_the_same_pair_in_two_processes_of_a_step_counts_for_each() -> None:
    script = "python3 -m a --port 1 &\npython3 -m b --port 1 &\nwait"
    program, flags = command_parts(["bash", "-c", script])
    assert program == "python3 -m a + python3 -m b"
    assert flags == [("port", ("1",)), ("port", ("1",))]
