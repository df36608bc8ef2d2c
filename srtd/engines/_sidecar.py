"""Native engine + Dynamo sidecar in one step (`roles.<role>.sidecar` / `dynamo.sidecar`).

The engine serves its own gRPC endpoint; `dynamo.sglang.sidecar` connects to it and
registers the worker with Dynamo.  Both run under one small bash supervisor so the
step lives and dies with the pair: the sidecar starts once the engine's gRPC port
accepts, and whichever exits first takes the other down (and fails the step).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

_SCRIPT = """\
set -euo pipefail
engine_pid=""
sidecar_pid=""
stop_both() {{
    status=$?
    trap - EXIT INT TERM
    for pid in "$sidecar_pid" "$engine_pid"; do
        [[ -n "$pid" ]] && kill "$pid" 2>/dev/null || true
    done
    for pid in "$sidecar_pid" "$engine_pid"; do
        [[ -n "$pid" ]] || continue
        for _ in $(seq 1 10); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    exit "$status"
}}
trap stop_both EXIT INT TERM
{engine} &
engine_pid=$!
ready=0
for _ in $(seq 1 {timeout}); do
    kill -0 "$engine_pid" 2>/dev/null || {{ echo "engine exited before its gRPC port {port} opened" >&2; exit 1; }}
    if (exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null; then ready=1; break; fi
    sleep 1
done
[[ "$ready" == 1 ]] || {{ echo "engine gRPC port {port} not open within {timeout} s" >&2; exit 1; }}
{sidecar} &
sidecar_pid=$!
set +e
wait -n "$engine_pid" "$sidecar_pid"
status=$?
set -e
[[ "$status" == 0 ]] && status=1
exit "$status"
"""


def supervised_pair(engine: Sequence[str], sidecar: Sequence[str], *, grpc_port: int, timeout: int) -> list[str]:
    """argv of one step that runs the engine, then its sidecar, and fails when either ends."""
    script = _SCRIPT.format(
        engine=shlex.join(engine), sidecar=shlex.join(sidecar), port=int(grpc_port), timeout=int(timeout)
    )
    return ["bash", "-c", script]
