"""What `srtd sweep` shows: a live table of the points (`srtd attach`'s live view is the model)
on a terminal, one line per change into a pipe, and one JSON snapshot per change with `--json`.

The snapshot (`snapshot`) is the one source of all three: the table is drawn from it,
the JSON is it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from srtd.errors import printable
from srtd.sweep._follow import Campaign, point_status, retried, summary

if TYPE_CHECKING:
    from rich.console import Console, RenderableType
    from rich.live import Live

SNAPSHOT_FORMAT = 1
_STYLE = {"measured": "green", "configuration": "red", "time limit": "yellow", "infrastructure": "red"}


def snapshot(campaign: Campaign, retries: int, *, final: bool = False) -> dict[str, Any]:
    points = []
    for point in campaign.points:
        status, last = point_status(campaign, point, retries)
        points.append(
            {
                "key": point.key,
                "name": point.name,
                "variant": point.variant,
                "status": status,
                "job_id": last.job_id if last else None,
                "log_dir": last.log_dir if last else None,
                "slurm_state": last.slurm_state if last else None,
                "exit_code": last.exit_code if last else None,
                "why": last.why if last and last.outcome not in (None, "measured") else None,
                "exclude": list(last.exclude) if last else [],
                "retried": retried(campaign, point),
            }
        )
    return {
        "format": SNAPSHOT_FORMAT,
        "campaign": campaign.manifest.campaign,
        "directory": str(campaign.directory),
        "counts": summary(campaign, retries),
        "final": final,
        "points": points,
    }


def frame(snap: dict[str, Any]) -> RenderableType:
    """The live table of one snapshot."""
    from rich.table import Table
    from rich.text import Text

    counts = ", ".join(f"{n} {status}" for status, n in sorted(snap["counts"].items()))
    table = Table(title=f"sweep {printable(snap['campaign'])}: {counts}", title_justify="left", expand=False)
    for column in ("point", "status", "job", "retried", "why"):
        table.add_column(column, overflow="fold")
    for p in snap["points"]:
        table.add_row(
            Text(printable(p["key"])),
            Text(p["status"], style=_STYLE.get(p["status"], "")),
            p["job_id"] or "-",
            str(p["retried"]),
            Text(printable(p["why"] or "")),
        )
    return table


class SweepView:
    """Shows each pass of the loop: live on a terminal, by changed lines otherwise, JSON with `--json`."""

    def __init__(
        self, console: Console, retries: int, *, as_json: bool, live: bool, echo: Callable[[str], None]
    ) -> None:
        self._console = console
        self._retries = retries
        self._json = as_json
        self._live_wanted = live and not as_json
        self._live: Live | None = None
        self._echo = echo
        self._last: dict[str, Any] | None = None
        self._said: dict[str, tuple[str, str | None]] = {}

    def __call__(self, campaign: Campaign) -> None:
        snap = snapshot(campaign, self._retries)
        if snap == self._last:
            return
        self._last = snap
        if self._json:
            self._echo(json.dumps(snap))
        elif self._live_wanted:
            if self._live is None:
                from rich.live import Live

                self._live = Live(frame(snap), console=self._console, auto_refresh=False, transient=False)
                self._live.start()
            self._live.update(frame(snap), refresh=True)
        else:
            for p in snap["points"]:
                now = (p["status"], p["job_id"])
                if self._said.get(p["key"]) != now:
                    self._said[p["key"]] = now
                    job = f" (job {p['job_id']})" if p["job_id"] else ""
                    self._echo(printable(f"{p['key']}: {p['status']}{job}"))

    def close(self, campaign: Campaign | None = None) -> dict[str, Any] | None:
        if self._live is not None:
            self._live.stop()
            self._live = None
        if campaign is None:
            return None
        snap = snapshot(campaign, self._retries, final=True)
        if self._json:
            self._echo(json.dumps(snap))
        return snap
