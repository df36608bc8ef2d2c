"""Stands in for `aiperf profile` in the driver's tests: writes the exports aiperf writes.

FAKE_AIPERF_ERRORS=N makes the first N requests fail (with N equal to the request count,
no summary JSON is written, as aiperf does); FAKE_AIPERF_EXIT sets the exit code.  It
records its argv and whether HF_HUB_OFFLINE reached it.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def main() -> None:
    argv = sys.argv[1:]
    value = {argv[i]: argv[i + 1] for i in range(len(argv) - 1) if argv[i].startswith("--")}
    out = Path(value["--artifact-dir"])
    out.mkdir(parents=True, exist_ok=True)
    count = int(value["--request-count"])
    errors = int(os.environ.get("FAKE_AIPERF_ERRORS", "0"))
    with (out / "profile_export.jsonl").open("w") as f:
        for i in range(count):
            record: dict[str, object] = {"metadata": {"benchmark_phase": "profiling"}, "metrics": {}}
            if i < errors:
                record["error"] = {"code": 503, "type": "Service Unavailable", "message": "no worker"}
            f.write(json.dumps(record) + "\n")
    if errors < count:
        concurrency = int(value["--concurrency"])
        summary = {
            "time_to_first_token": {"unit": "ms", "p50": 10.0 * concurrency, "p99": 20.0 * concurrency},
            "inter_token_latency": {"unit": "ms", "avg": 1.25},
            "output_token_throughput": {"unit": "tokens/sec", "avg": 100.0 * concurrency},
        }
        (out / "profile_export_aiperf.json").write_text(json.dumps(summary))
    (out / "fake.json").write_text(json.dumps({"argv": argv, "offline": os.environ.get("HF_HUB_OFFLINE")}))
    print("fake aiperf: done")
    sys.exit(int(os.environ.get("FAKE_AIPERF_EXIT", "0")))


if __name__ == "__main__":
    main()
