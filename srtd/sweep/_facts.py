"""What srtd recorded of one ended job: its journal's end, its results, its post-mortem's line.

Read back as untrusted, like every reader of a log directory (docs/security.md): a
missing, truncated or planted file is "nothing known", never an error.
"""

from __future__ import annotations

from pathlib import Path

from srtd._files import SMALL_LIMIT, read_text_back
from srtd._value import value_class
from srtd.errors import printable
from srtd.events import FINAL_JOB_STATES

_REASON = "reason: "


@value_class
class JournalEnd:
    state: str
    exit_code: int
    reason: str | None
    time_limit: bool


def journal_end(log_dir: Path) -> JournalEnd | None:
    """The journal's job-level end event, or None when srtd wrote none (or it cannot be read)."""
    from srtd.attach import journal_events

    for event in reversed(journal_events(log_dir) or []):
        if event.unit is None and event.state in FINAL_JOB_STATES:
            detail = event.detail or {}
            return JournalEnd(
                str(event.state), int(event.exit_code or 0), event.reason, detail.get("time_limit") is True
            )
    return None


def postmortem_line(log_dir: Path) -> str | None:
    """The post-mortem's `reason:` line (what failed, in srtd's words), or None."""
    from srtd.supervisor import POSTMORTEM_NAME

    try:
        text = read_text_back(log_dir / POSTMORTEM_NAME, limit=SMALL_LIMIT * 4, error=OSError, follow=False)
    except OSError:
        return None
    for line in text.splitlines()[:8]:
        if line.startswith(_REASON):
            return printable(line[len(_REASON) :].strip())[:500]
    return None


def has_results(log_dir: Path) -> bool:
    from srtd.results import RESULTS_NAME

    return (log_dir / RESULTS_NAME).is_file()
