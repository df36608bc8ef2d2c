"""`srtd attach`: a running job's live state and control verbs over a local socket,
the replay of a finished job, and its startup timeline.  See docs/attach.md.

- `serve(job)`: the server, a supervisor `Service` (`srtd run` starts it)
- `Connection`, `connect`, `running_jobs`: the client side
- `journal_end`, `journal_events`, `journal_view`: a job's journal read from its log directory
- `list_jobs`, `ListedJob`: `srtd ps` (this node's sockets and this user's srtd jobs on the cluster)
- `unit_logs`, `unit_log`, `open_log`, `follow_log`: `srtd logs` (a unit's log from the log directory)
- `run_relay`, `RELAY_STEP`: the relay step's side (`srtd relay`), reached from off the node
- `render_view`, `render_timeline`, `Timeline`, `build_timeline`, `write_svg`: the views
  (rich renderables, also used headless, and the timeline's SVG)
- `snapshot_message`, `view_of`, `event_of`: the protocol's messages (docs/attach.md)

This package sits above the supervisor: it imports it, never the other way round.
Its modules load on first use: `srtd ps` needs no server, `srtd run` no client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from srtd._lazy import lazy_attributes

if TYPE_CHECKING:
    from srtd.attach._client import Connection, RunningJob, connect, running_jobs
    from srtd.attach._jobs import DEAD, ListedJob, gone_note, journal_end, journal_events, journal_view, list_jobs
    from srtd.attach._logs import follow_log, open_log, unit_log, unit_logs
    from srtd.attach._paths import pointer_job_id, srtd_command
    from srtd.attach._protocol import event_of, snapshot_message, view_of
    from srtd.attach._relay import RELAY_STEP, run_relay
    from srtd.attach._server import serve
    from srtd.attach._timeline import SVG_NAME, Timeline, gantt_width, render_timeline, svg_text, write_svg
    from srtd.attach._timeline import build as build_timeline
    from srtd.attach._view import EVENT_PANE, LiveView, RunView, clock_time, render_view

# public name -> (module, its name there)
_LAZY = {
    **{n: ("_client", n) for n in ("Connection", "RunningJob", "connect", "running_jobs")},
    **{
        n: ("_jobs", n)
        for n in ("DEAD", "ListedJob", "gone_note", "journal_end", "journal_events", "journal_view", "list_jobs")
    },
    **{n: ("_relay", n) for n in ("RELAY_STEP", "run_relay")},
    **{n: ("_paths", n) for n in ("pointer_job_id", "srtd_command")},
    **{n: ("_logs", n) for n in ("follow_log", "open_log", "unit_log", "unit_logs")},
    **{n: ("_protocol", n) for n in ("event_of", "snapshot_message", "view_of")},
    "serve": ("_server", "serve"),
    **{
        n: ("_timeline", n) for n in ("SVG_NAME", "Timeline", "gantt_width", "render_timeline", "svg_text", "write_svg")
    },
    "build_timeline": ("_timeline", "build"),
    **{n: ("_view", n) for n in ("EVENT_PANE", "LiveView", "RunView", "clock_time", "render_view")},
}


__getattr__ = lazy_attributes(__name__, _LAZY)


__all__ = [
    "DEAD",
    "EVENT_PANE",
    "RELAY_STEP",
    "SVG_NAME",
    "Connection",
    "ListedJob",
    "LiveView",
    "RunView",
    "RunningJob",
    "Timeline",
    "build_timeline",
    "clock_time",
    "connect",
    "event_of",
    "follow_log",
    "gantt_width",
    "gone_note",
    "journal_end",
    "journal_events",
    "journal_view",
    "list_jobs",
    "open_log",
    "pointer_job_id",
    "render_timeline",
    "render_view",
    "run_relay",
    "running_jobs",
    "serve",
    "snapshot_message",
    "srtd_command",
    "svg_text",
    "unit_log",
    "unit_logs",
    "view_of",
    "write_svg",
]
