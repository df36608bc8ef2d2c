"""`srtd run` off a terminal prints what rich printed, byte for byte, without importing rich.

EXPECTED was printed by rich (`rich.Console(width=120, no_color=True, highlight=False)`, the
console before issue #36) for these inputs: a change to the text off a terminal fails here.
The plain path (`srtd.supervisor._plain`) writes all of them but `failure/wide_tab`,
`table/non_ascii` and `table/too_wide`, which it leaves to rich, so those check the hand-off.
"""

from __future__ import annotations

import io
import subprocess
import sys

import pytest

from srtd.supervisor import _plain
from srtd.supervisor._console import SummaryRow, TerminalConsole, render_table_text

ROWS = (
    SummaryRow("etcd", "node-01", "ready", 0, "-", 1.234),
    SummaryRow("decode_0", "node-02", "failed", 3, "killed by SIGKILL", None),
    SummaryRow("bench", "-", "exited", 0, "exit code 0", 612.0),
)
TEXTS = {  # a failure's text: a unit's log line in it may hold anything
    "plain": "job failed: terminal unit bench exited with exit code 2",
    "long": "x" * 50 + " " + "word " * 40,
    "markup": "[bold]decode[/] said [/] and [red]no[/red] \\[x] :smile:",
    "non_ascii": "décodé → 東京 ✓ ß Ω 😀",
    "controls": "bell\x07 bs\x08 vt\x0b ff\x0c cr\r esc\x1b[31mred\x1b[0m nul\x00 del\x7f c1\x85",
    "tabs": "a\tbc\tdefghijk\tl\n\tx\x1b\ty",
    "wide_tab": "東京\tx",
    "lines": "first\n\n  indented  \nlast\n",
    "empty": "",
}
HEADLINES = {  # the summary table's title: centred, word-wrapped to the table's width
    "short": "units",
    "even": "ab",
    "wrapped": "dynamo-disagg-llama70b-1p2d-isl8k-osl1k-c256-and-more: failed, exit code 2",
    "folded": "a" * 150 + ": failed, exit code 2",
    "spaces": "x  y\xa0 z   w" + " " * 70 + "end  ",
}
NAMES = {
    "spaced": (SummaryRow(" a b ", "n", "ready", 0, "-", None),),
    "non_ascii": (SummaryRow("décodé", "東京-node", "ready", 0, "-", 2.0),),
    "too_wide": (SummaryRow("u" * 40, "n" * 70, "ready", 10, "exit code 0", 1.0),),
    "none": (),
}
RESULTS = "table of\nresults\t1\n"
HANDED_TO_RICH = {"failure/wide_tab", "table/non_ascii", "table/too_wide"}

EXPECTED = {
    "failure/plain": "job failed: terminal unit bench exited with exit code 2\n",
    "failure/long": "x" * 50 + " " + "word " * 40 + "\n",  # never wrapped
    "failure/markup": "[bold]decode[/] said [/] and [red]no[/red] \\[x] :smile:\n",
    "failure/non_ascii": "décodé → 東京 ✓ ß Ω 😀\n",
    "failure/controls": "bell bs vt ff cr esc\x1b[31mred\x1b[0m nul\x00 del\x7f c1\x85\n",
    "failure/tabs": ("a       bc      defghijk        l\n        x\x1b       y\n"),
    "failure/wide_tab": "東京    x\n",
    "failure/lines": ("first\n\n  indented  \nlast\n\n"),
    "failure/empty": "\n",
    "table/short": (
        "                                  units                                   \n"
        " unit     ┃ node    ┃ state  ┃ restarts ┃ exit              ┃ ready after \n"
        "━━━━━━━━━━╇━━━━━━━━━╇━━━━━━━━╇━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━\n"
        " etcd     │ node-01 │ ready  │ 0        │ -                 │ 1.2 s       \n"
        " decode_0 │ node-02 │ failed │ 3        │ killed by SIGKILL │ -           \n"
        " bench    │ -       │ exited │ 0        │ exit code 0       │ 612.0 s     \n"
    ),
    "table/even": (
        "                                    ab                                    \n"
        " unit     ┃ node    ┃ state  ┃ restarts ┃ exit              ┃ ready after \n"
        "━━━━━━━━━━╇━━━━━━━━━╇━━━━━━━━╇━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━\n"
        " etcd     │ node-01 │ ready  │ 0        │ -                 │ 1.2 s       \n"
        " decode_0 │ node-02 │ failed │ 3        │ killed by SIGKILL │ -           \n"
        " bench    │ -       │ exited │ 0        │ exit code 0       │ 612.0 s     \n"
    ),
    "table/wrapped": (
        "dynamo-disagg-llama70b-1p2d-isl8k-osl1k-c256-and-more: failed, exit code 2\n"
        " unit     ┃ node    ┃ state  ┃ restarts ┃ exit              ┃ ready after \n"
        "━━━━━━━━━━╇━━━━━━━━━╇━━━━━━━━╇━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━\n"
        " etcd     │ node-01 │ ready  │ 0        │ -                 │ 1.2 s       \n"
        " decode_0 │ node-02 │ failed │ 3        │ killed by SIGKILL │ -           \n"
        " bench    │ -       │ exited │ 0        │ exit code 0       │ 612.0 s     \n"
    ),
    "table/folded": (
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n"
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n"
        "                         aa: failed, exit code 2                          \n"
        " unit     ┃ node    ┃ state  ┃ restarts ┃ exit              ┃ ready after \n"
        "━━━━━━━━━━╇━━━━━━━━━╇━━━━━━━━╇━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━\n"
        " etcd     │ node-01 │ ready  │ 0        │ -                 │ 1.2 s       \n"
        " decode_0 │ node-02 │ failed │ 3        │ killed by SIGKILL │ -           \n"
        " bench    │ -       │ exited │ 0        │ exit code 0       │ 612.0 s     \n"
    ),
    "table/spaces": (
        "                               x  y\xa0 z   w                                \n"
        "                                   end                                    \n"
        " unit     ┃ node    ┃ state  ┃ restarts ┃ exit              ┃ ready after \n"
        "━━━━━━━━━━╇━━━━━━━━━╇━━━━━━━━╇━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━\n"
        " etcd     │ node-01 │ ready  │ 0        │ -                 │ 1.2 s       \n"
        " decode_0 │ node-02 │ failed │ 3        │ killed by SIGKILL │ -           \n"
        " bench    │ -       │ exited │ 0        │ exit code 0       │ 612.0 s     \n"
    ),
    "table/spaced": (
        "                        units                         \n"
        " unit  ┃ node ┃ state ┃ restarts ┃ exit ┃ ready after \n"
        "━━━━━━━╇━━━━━━╇━━━━━━━╇━━━━━━━━━━╇━━━━━━╇━━━━━━━━━━━━━\n"
        "  a b  │ n    │ ready │ 0        │ -    │ -           \n"
    ),
    "table/non_ascii": (
        "                           units                            \n"
        " unit   ┃ node      ┃ state ┃ restarts ┃ exit ┃ ready after \n"
        "━━━━━━━━╇━━━━━━━━━━━╇━━━━━━━╇━━━━━━━━━━╇━━━━━━╇━━━━━━━━━━━━━\n"
        " décodé │ 東京-node │ ready │ 0        │ -    │ 2.0 s       \n"
    ),
    "table/too_wide": (
        "                                                         units                                      "
        "                    \n"
        " unit                               ┃ node                               ┃ state ┃ restarts ┃ exit  "
        "      ┃ ready after \n"
        "━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━╇━━━━━━━━━━╇━━━━━━━"
        "━━━━━━╇━━━━━━━━━━━━━\n"
        " uuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuu… │ nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn… │ ready │ 10       │ exit c"
        "ode 0 │ 1.0 s       \n"
    ),
    "table/none": (
        "                        units                        \n"
        " unit ┃ node ┃ state ┃ restarts ┃ exit ┃ ready after \n"
        "━━━━━━╇━━━━━━╇━━━━━━━╇━━━━━━━━━━╇━━━━━━╇━━━━━━━━━━━━━\n"
    ),
    "summary/results": (
        "                          c: failed, exit code 2                          \n"
        " unit     ┃ node    ┃ state  ┃ restarts ┃ exit              ┃ ready after \n"
        "━━━━━━━━━━╇━━━━━━━━━╇━━━━━━━━╇━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━\n"
        " etcd     │ node-01 │ ready  │ 0        │ -                 │ 1.2 s       \n"
        " decode_0 │ node-02 │ failed │ 3        │ killed by SIGKILL │ -           \n"
        " bench    │ -       │ exited │ 0        │ exit code 0       │ 612.0 s     \n"
        "table of\n"
        "results 1\n"
    ),
    "summary/latin-1": (
        "                          c: failed, exit code 2                          \n"
        " unit     | node    | state  | restarts | exit              | ready after \n"
        "----------+---------+--------+----------+-------------------+-------------\n"
        " etcd     | node-01 | ready  | 0        | -                 | 1.2 s       \n"
        " decode_0 | node-02 | failed | 3        | killed by SIGKILL | -           \n"
        " bench    | -       | exited | 0        | exit code 0       | 612.0 s     \n"
        "table of\n"
        "results 1\n"
    ),
}


def _failure(text: str) -> str:
    out = io.StringIO()
    TerminalConsole(out, tty=False).failure(text)
    return out.getvalue()


def _summary(out: io.StringIO | io.TextIOWrapper, rows: tuple[SummaryRow, ...], headline: str) -> None:
    console = TerminalConsole(out, tty=False)
    console.results(RESULTS, {})
    console.summary(rows, headline)


def _printed() -> dict[str, str]:
    got = {f"failure/{k}": _failure(v) for k, v in TEXTS.items()}
    got |= {f"table/{k}": render_table_text(ROWS, v) for k, v in HEADLINES.items()}
    got |= {f"table/{k}": render_table_text(v, "units") for k, v in NAMES.items()}
    out = io.StringIO()
    _summary(out, ROWS, "c: failed, exit code 2")
    got["summary/results"] = out.getvalue()
    latin = io.TextIOWrapper(io.BytesIO(), encoding="latin-1")  # rich's ASCII box
    _summary(latin, ROWS, "c: failed, exit code 2")
    latin.flush()
    got["summary/latin-1"] = latin.buffer.getvalue().decode("latin-1")
    return got


def test_off_a_terminal_the_console_prints_what_rich_printed() -> None:
    assert _printed() == EXPECTED


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_plain_path_writes_all_but_what_it_hands_to_rich(name: str) -> None:
    kind, case = name.split("/")
    if kind == "failure":
        plain = _plain.text(TEXTS[case])
    elif kind == "table":
        rows = NAMES.get(case, ROWS)
        cells = [(r.unit, r.node, r.state, str(r.restarts), r.exit, "-") for r in rows]
        plain = _plain.table("units", ("unit", "node", "state", "restarts", "exit", "ready after"), cells, "utf-8")
    else:
        return
    assert (plain is None) == (name in HANDED_TO_RICH)


def test_names_print_as_they_are_not_as_rich_markup() -> None:
    """rich read a str cell as markup: `[bold]` vanished, `[/]` raised; now both print as written."""
    rows = (SummaryRow("[bold]u", "[/]", "ready", 0, "-", None),)
    assert render_table_text(rows, "p[i]:x:") == (
        "                        p[i]:x:                         \n"
        " unit    ┃ node ┃ state ┃ restarts ┃ exit ┃ ready after \n"
        "━━━━━━━━━╇━━━━━━╇━━━━━━━╇━━━━━━━━━━╇━━━━━━╇━━━━━━━━━━━━━\n"
        " [bold]u │ [/]  │ ready │ 0        │ -    │ -           \n"
    )
    out = io.StringIO()
    TerminalConsole(out, tty=True).summary(rows, "p[i]:x:")  # rich, on a terminal: the same words
    assert "p[i]:x:" in out.getvalue()
    assert " [bold]u │ [/]  │ " in out.getvalue()


def test_off_a_terminal_the_console_imports_no_rich() -> None:
    script = (
        "import io, sys\n"
        "from srtd.supervisor._console import SummaryRow, TerminalConsole\n"
        "c = TerminalConsole(io.StringIO(), tty=False)\n"
        "c.failure('boom\\tand [bold]more')\n"
        "c.summary([SummaryRow('u', 'n', 'ready', 0, '-', 1.0)], 'job: succeeded, exit code 0')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('rich', 'pygments')))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout == "[]\n"
