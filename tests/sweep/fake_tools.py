"""Stand-ins for sbatch, scontrol, squeue and sacct: the wiring of `srtd sweep` without a cluster.

Each tool is a script on PATH that runs this file with the tool's name first.
sbatch hands out job ids from a counter and writes, as the job would, its journal's end
and a results.json into the log directory its mark names; a point whose variant holds
`broken` ends failed with a post-mortem instead.  Jobs are COMPLETED (or FAILED) at once,
or RUNNING for as long as a file `hold-running` is in the state directory.
The real run is tests/slurm/test_sweep.py on the dev cluster.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

STATE = Path(os.environ["FAKE_SLURM_DIR"])
SEP = "\x1f"


def _jobs() -> dict[str, dict[str, str]]:
    path = STATE / "jobs.json"
    return json.loads(path.read_text()) if path.exists() else {}


def _save(jobs: dict[str, dict[str, str]]) -> None:
    (STATE / "jobs.json").write_text(json.dumps(jobs))


def sbatch(args: list[str]) -> int:
    sys.stdin.read()
    jobs = _jobs()
    job_id = str(1000 + len(jobs))
    comment = next(a for a in args if a.startswith("--comment=")).removeprefix("--comment=srtd:1 ")
    mark = json.loads(comment)
    log_dir = Path(mark["log_dir"].replace("%j", job_id))
    log_dir.mkdir(parents=True)
    broken = "broken" in (mark["variant"] or "")
    end = {"seq": 1, "ts": 1.0, "state": "failed" if broken else "succeeded", "exit_code": 1 if broken else 0}
    end["reason"] = "agg_0 exited 2 before ready" if broken else "every terminal unit exited 0"
    (log_dir / "events.jsonl").write_text(json.dumps(end) + "\n")
    if broken:
        (log_dir / "postmortem.txt").write_text("srtd post-mortem: x\nstate: failed\nreason: agg_0 exited 2\n")
    else:
        results = {
            "format": 1,
            "job": mark["name"],
            "job_id": job_id,
            "variant": mark["variant"],
            "unit": "benchmark",
            "reader": "srtd",
            "path": "b.json",
            "points": [{"concurrency": 1, "requests_sent": 4, "requests_succeeded": 4, "output_tok_s": 10.0}],
            "verdict": {"ok": True},
        }
        (log_dir / "results.json").write_text(json.dumps(results))
    jobs[job_id] = {"state": "FAILED" if broken else "COMPLETED", "args": " ".join(args), "name": mark["name"]}
    _save(jobs)
    print(job_id)
    return 0


def scontrol(args: list[str]) -> int:
    jobs = _jobs()
    if args[:2] == ["show", "hostnames"]:
        print(args[2])
    elif args[0] == "release":
        jobs[args[1]]["released"] = "yes"
        _save(jobs)
    elif "job" in args:
        job_id = args[-1]
        print(f"JobId={job_id} JobState={jobs[job_id]['state']} NodeList=node1 ExitCode=0:0")
    return 0


def squeue(args: list[str]) -> int:
    jobs = _jobs()
    wanted = next(a for a in args if a.startswith("--jobs=")).removeprefix("--jobs=").split(",")
    for job_id in wanted:
        job = jobs[job_id]
        state = "RUNNING" if (STATE / "hold-running").exists() else job["state"]
        print(SEP.join([job_id, state, job["name"], "me", "node1", "node1", "", ""]))
    return 0


def main() -> int:
    tool = sys.argv[1]
    if tool == "sacct":
        print("sacct: error: Slurm accounting storage is disabled", file=sys.stderr)
        return 1
    return {"sbatch": sbatch, "scontrol": scontrol, "squeue": squeue}[tool](sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
