"""The clock check: before a job that samples power, each node says whether its clock is synchronised.

srtd stamps each power sample with its own clock and the benchmark client stamps each
measurement window with its node's; a window's power is only right when those clocks
agree.  So a job with `telemetry.enabled` first runs one `clock_sync_<node>` host step on
every node of the job (as srtctl does), beside the `host_setup` steps: the job's first
tier, which every other unit waits for (`_hosts.with_host_steps`).

A node passes when any of its time sources says it is synchronised: systemd's
`timedatectl`, chrony, ntpd, or at last the kernel itself (`adjtimex`: neither
TIME_ERROR nor STA_UNSYNC).  The step prints which source answered, or every answer it
got, and exits 1.  With `telemetry.required` a failed check fails the job before anything
else launches (power numbers from unsynchronised clocks are not publishable); otherwise it
is a recorded, non-critical failure and the job goes on.

A local job runs on one host, one clock: it has no clock check.
"""

from __future__ import annotations

import shlex

from srtd.context import PlanContext
from srtd.plan._hosts import host_step, job_nodes
from srtd.unit import Unit

TIMEOUT = 30.0  # seconds, as srtctl's; each source answers at once or not at all

# The kernel's view, for nodes without a time daemon's client: struct timex on LP64 Linux
# has `maxerror` (µs) at byte 24 and `status` at byte 40; adjtimex returns 5 (TIME_ERROR)
# or sets STA_UNSYNC (0x40) while the clock is not synchronised.
_KERNEL = (
    "import ctypes, struct, sys\n"
    "buf = ctypes.create_string_buffer(512)\n"
    "state = ctypes.CDLL(None, use_errno=True).adjtimex(buf)\n"
    'if state < 0: sys.exit("adjtimex failed, errno %d" % ctypes.get_errno())\n'
    'maxerror, = struct.unpack_from("l", buf, 24); status, = struct.unpack_from("i", buf, 40)\n'
    'report = "state %d, status 0x%x, max error %d us" % (state, status, maxerror)\n'
    "sys.exit(report) if state == 5 or status & 0x40 else print(report)\n"
)

# Each source is tried in turn; the first that answers "synchronised" ends the step with 0.
# (Double quotes only, so the script reads as itself once quoted into srun's wrapper.)
CHECK = f"""\
node=$(hostname)
if said=$(timedatectl show --property=NTPSynchronized --value 2>&1) && [ "$said" = yes ]; then
  echo "$node: clock synchronised (timedatectl)"; exit 0
fi
if chrony=$(chronyc -n tracking 2>&1) && grep -Eq "^Leap status +: +Normal" <<<"$chrony"; then
  echo "$node: clock synchronised (chronyc)"; grep -E "^(Reference ID|System time|Last offset)" <<<"$chrony"; exit 0
fi
if ntp=$(ntpq -pn 2>&1) && grep -q "^[*]" <<<"$ntp"; then
  echo "$node: clock synchronised (ntpq)"; grep "^[*]" <<<"$ntp"; exit 0
fi
if kernel=$(python3 -c {shlex.quote(_KERNEL)} 2>&1); then
  echo "$node: clock synchronised (kernel: $kernel)"; exit 0
fi
nl="
"  # a newline: each source's answer is shown on one line
printf "%s\\n" "$node: clock not synchronised" "  timedatectl: ${{said//$nl/; }}" "  chronyc: ${{chrony//$nl/; }}" \\
  "  ntpq: ${{ntp//$nl/; }}" "  kernel: ${{kernel//$nl/; }}" >&2
exit 1
"""


def clock_units(ctx: PlanContext) -> list[Unit]:
    """One `clock_sync_<node>` step per node of the job, when the job samples power on Slurm."""
    if ctx.local or not ctx.recipe.telemetry.enabled:
        return []
    return [_check(ctx, node) for node in job_nodes(ctx)]


def _check(ctx: PlanContext, node: str) -> Unit:
    # the job's first tier, with the setup hooks; at the top of logs/ beside theirs, as srtctl keeps it
    required = ctx.recipe.telemetry.required
    return host_step(ctx, f"clock_sync_{node}", node, CHECK, critical=required, timeout=TIMEOUT)
