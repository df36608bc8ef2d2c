"""Multi-node groups restart together: one member's restart stops its siblings, and no
member relaunches before the group's backoff is over and every stopped attempt is gone."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import field
from typing import TYPE_CHECKING

from srtd._value import value_class
from srtd.supervisor._attempt import AttemptEnd
from srtd.supervisor._clock import Clock

if TYPE_CHECKING:
    from srtd.launch import Handle
    from srtd.supervisor._unit import UnitRunner


@value_class(frozen=False)
class Group:
    name: str
    members: list[UnitRunner] = field(default_factory=list)
    # the attempts a group restart is stopping: relaunches wait until they are gone
    stopping: list[tuple[UnitRunner, Handle]] = field(default_factory=list)
    due: float = 0.0  # clock time at which the group relaunches


class Groups:
    """The job's groups, by name, and their shared restarts."""

    def __init__(self, runners: Iterable[UnitRunner], clock: Clock) -> None:
        self.clock = clock
        self.by_name: dict[str, Group] = {}
        for runner in runners:
            if runner.unit.group is not None:
                self.by_name.setdefault(runner.unit.group, Group(runner.unit.group)).members.append(runner)

    def restart(self, runner: UnitRunner, reason: str, delay: float) -> None:
        """`runner` restarts: its siblings' attempts end now, and the group relaunches after `delay`."""
        group = self.by_name[runner.unit.group or ""]
        group.stopping = [(m, m.handle) for m in group.members if m.live and m.handle is not None]
        group.due = self.clock.now() + delay
        why = f"restarted with group {group.name}: {runner.name} {reason}"
        for member in group.members:
            if member is not runner:
                member.interrupt(AttemptEnd("group", why, delay=delay))

    async def relaunch(self, runner: UnitRunner, changed: Callable[[], Awaitable[None]]) -> None:
        """Until the group's backoff is over and every attempt its restart stops has ended."""
        group = self.by_name[runner.unit.group or ""]
        await self.clock.sleep(group.due - self.clock.now())
        while any(m.handle is h and m.live for m, h in group.stopping):
            await changed()
