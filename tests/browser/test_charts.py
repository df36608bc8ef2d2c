"""The sweep and compare pages' charts in Debian's chromium: points where their results put them.

Sweeps are sent to a real collector through its API with known numbers, so each point's
place is known: the tests read the circles and the axes' tick labels back from the chart's
SVG, invert the axes, and compare.  Skipped unless SRTD_TEST_BROWSER=1 (`nox -s browser`).
"""

from __future__ import annotations

import hashlib
import math
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from tests.browser.conftest import BROWSER_ONLY, POISON, WRITE, screenshots
from tests.collector.helpers import Running

pytestmark = BROWSER_ONLY
GPUS = 4
# sweep -> (concurrency, output tok/s, median TPOT ms); alpha's c=32 is beaten by its c=16 on both axes
SWEEPS = {
    "alpha": ((1, 400.0, 10.0), (4, 1200.0, 16.0), (16, 2800.0, 32.0), (32, 2600.0, 50.0), (64, 3000.0, 80.0)),
    "beta": ((1, 520.0, 9.0), (4, 1500.0, 14.0), (16, 3300.0, 30.0), (64, 3900.0, 70.0)),
}
# The chart as numbers: each circle's centre and each axis' tick labels, in the SVG's coordinates.
READ_CHART = """svg => {
  const at = (el, dx = 0, dy = 0) => { const m = el.getCTM(); return [m.e + m.a * dx, m.f + m.d * dy]; };
  const ticks = (axis) => [...svg.querySelectorAll(`g[aria-label="${axis}-axis tick label"] text`)]
    .filter(t => t.textContent.trim())
    .map(t => [at(t), Number(t.textContent.replace(/,/g, "").replace("\\u2212", "-"))]);
  const dots = [...svg.querySelectorAll("g.points circle")].map(c => ({
    ...c.dataset, at: at(c, +c.getAttribute("cx"), +c.getAttribute("cy")),
  }));
  const fronts = [...svg.querySelectorAll("g.pareto path")].map(p => ({
    series: p.dataset.series,
    at: p.getAttribute("d").slice(1).split("L").map(xy => at(p, ...xy.split(",").map(Number))),
  }));
  return {x: ticks("x"), y: ticks("y"), dots, fronts};
}"""


def seed(url: str, sweeps: dict[str, Any]) -> None:
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {WRITE}"}, timeout=30) as client:
        for name, points in sweeps.items():
            for concurrency, tok_s, tpot in points:
                job_id = f"{hashlib.sha256(name.encode()).hexdigest()[:12]}-{concurrency}"
                at = "2026-12-01T10:00:00+00:00"
                created = {"job_id": job_id, "job_name": name, "submitted_at": at}
                assert client.post("/api/jobs", json=created).status_code in (200, 201)
                measured = {
                    "concurrency": concurrency,
                    "output_tok_s": tok_s,
                    "tpot_ms": {"p50": tpot},
                    "ttft_ms": {"p50": 30.0 + concurrency + tpot, "p99": 60.0 + 2 * concurrency + 2 * tpot},
                    "itl_ms": {"p50": tpot * 0.95},
                    "e2e_ms": {"p50": 300.0 + 10 * (concurrency + tpot), "p99": 600.0 + 20 * (concurrency + tpot)},
                    "requests_sent": 64,
                    "requests_succeeded": 64,
                }
                update = {
                    "status": "completed",
                    "updated_at": at,
                    "exit_code": 0,
                    "metadata": {"variant": f"concurrency={concurrency}", "gpus": GPUS},
                    "benchmark_results": {"format": 1, "unit": "benchmark", "points": [measured]},
                }
                assert client.put(f"/api/jobs/{job_id}", json=update).status_code == 200


@pytest.fixture(scope="module")
def seeded(served: Running) -> Running:
    seed(served.url, SWEEPS)
    return served


def invert(ticks: list[list[Any]], axis: int, pixel: float, log: bool = False) -> float:
    """A pixel on an axis as the value its tick labels say it stands for (linear or log)."""
    (p0, v0), (p1, v1) = (ticks[0][0][axis], ticks[0][1]), (ticks[-1][0][axis], ticks[-1][1])
    scale = math.log if log else float
    value = scale(v0) + (pixel - p0) * (scale(v1) - scale(v0)) / (p1 - p0)
    return math.exp(value) if log else value


def expected(name: str) -> dict[str, tuple[float, float]]:
    """Each point of a sweep at (tok/s per user, tok/s per GPU)."""
    return {f"concurrency={c}": (1000.0 / tpot, tok_s / GPUS) for c, tok_s, tpot in SWEEPS[name]}


def front_of(points: dict[str, tuple[float, float]]) -> set[str]:
    def beaten(a: tuple[float, float]) -> bool:
        return any(b[0] >= a[0] and b[1] >= a[1] and b != a for b in points.values())

    return {label for label, xy in points.items() if not beaten(xy)}


def placed(chart: dict[str, Any], log: bool = False) -> dict[str, tuple[float, float]]:
    return {
        d["point"]: (invert(chart["x"], 0, d["at"][0], log), invert(chart["y"], 1, d["at"][1])) for d in chart["dots"]
    }


def close(got: tuple[float, float], want: tuple[float, float]) -> bool:
    return all(math.isclose(g, w, rel_tol=0.01) for g, w in zip(got, want, strict=True))


def read_chart(page: Any) -> dict[str, Any]:
    chart: dict[str, Any] = page.locator('[data-chart="throughput"] svg').first.evaluate(READ_CHART)
    return chart


def no_horizontal_scroll(page: Any) -> bool:
    return bool(page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"))


def test_the_sweep_page_draws_each_point_where_its_results_put_it_with_its_front(
    seeded: Running, browser_page: Any
) -> None:
    page = browser_page
    refused: list[str] = []
    page.on("console", lambda m: refused.append(m.text) if "Content Security Policy" in m.text else None)
    page.goto(seeded.url + "/sweeps/alpha")
    page.locator('[data-chart="throughput"] g.points circle').first.wait_for()
    chart = read_chart(page)
    want = expected("alpha")
    got = placed(chart)
    assert sorted(got) == sorted(want)  # one circle per sweep point
    assert all(close(got[label], want[label]) for label in want), (got, want)
    on_front = {d["point"] for d in chart["dots"] if d["pareto"] == "1"}
    assert on_front == front_of(want) == {"concurrency=1", "concurrency=4", "concurrency=16", "concurrency=64"}
    (front,) = chart["fronts"]  # the front's line goes through its points, left to right
    assert [d["point"] for d in sorted((d for d in chart["dots"] if d["pareto"] == "1"), key=lambda d: d["at"][0])] == [
        label for label, _ in sorted(((lb, xy) for lb, xy in want.items() if lb in on_front), key=lambda i: i[1][0])
    ]
    dots_on_front = sorted(tuple(d["at"]) for d in chart["dots"] if d["pareto"] == "1")
    assert all(math.dist(a, b) < 0.5 for a, b in zip(sorted(map(tuple, front["at"])), dots_on_front, strict=True))
    # hover: the point's configuration and numbers
    page.locator('[data-chart="throughput"] circle[data-point="concurrency=16"]').hover()
    tip = page.locator('[data-chart="throughput"] g[aria-label="tip"]')
    tip.locator("text").first.wait_for()
    lines = (tip.text_content() or "").split("\u200b")  # Plot's tip: one line per channel
    assert {"series alpha ■", "configuration concurrency=16", "tok/s 2,800"} <= set(lines)
    assert {"tok/s per user → 31.25", "↑ output tok/s per GPU 700"} <= set(lines)
    # the log axis: the same points, placed by a logarithmic x
    page.get_by_label("log x").check()
    logged = placed(read_chart(page), log=True)
    assert all(close(logged[label], want[label]) for label in want), (logged, want)
    page.get_by_label("log x").uncheck()
    assert no_horizontal_scroll(page)
    page.screenshot(path=str(screenshots() / "collector-sweep.png"), full_page=True)
    assert refused == []  # the library's styles carry the page's nonce


def test_the_compare_page_of_two_sweeps_picked_in_the_jobs_table_shows_two_series(
    seeded: Running, browser_page: Any
) -> None:
    page = browser_page
    page.goto(seeded.url + "/")
    assert no_horizontal_scroll(page)
    page.locator('input[name="sweep"][value="alpha"]').first.check()
    page.locator('input[name="sweep"][value="beta"]').first.check()
    seed(seeded.url, {"gamma": ((1, 10.0, 50.0),)})  # news: the table is refreshed in place
    page.locator('tr[data-job-id] input[name="sweep"][value="gamma"]').wait_for()
    ticked = page.locator("input[type=checkbox]:checked").evaluate_all("bs => bs.map(b => b.value)")
    assert sorted(ticked) == ["alpha", "beta"]  # what was ticked stays ticked
    page.click("button.compare-action")
    page.wait_for_url("**/compare?**")
    chosen = page.url.split("?", 1)[1].split("&")
    assert sorted(chosen) == ["sweep=alpha", "sweep=beta"]  # the selection is the URL: it can be shared
    page.locator('[data-chart="throughput"] g.points circle').first.wait_for()
    chart = read_chart(page)
    assert sorted({f["series"] for f in chart["fronts"]}) == ["alpha", "beta"]
    for name in SWEEPS:
        got = placed({**chart, "dots": [d for d in chart["dots"] if d["series"] == name]})
        want = expected(name)
        assert sorted(got) == sorted(want)
        assert all(close(got[label], want[label]) for label in want), (name, got, want)
    toggles = page.locator(".series-toggle").all_inner_texts()
    assert [t.strip() for t in toggles] == [c.removeprefix("sweep=") for c in chosen]  # a series per sweep
    assert no_horizontal_scroll(page)
    page.screenshot(path=str(screenshots() / "collector-compare.png"), full_page=True)
    page.get_by_label("beta", exact=True).uncheck()  # a series toggled off is not drawn
    page.wait_for_function("() => !document.querySelector('circle[data-series=\"beta\"]')")
    assert {d["series"] for d in read_chart(page)["dots"]} == {"alpha"}


def test_a_sweep_named_with_markup_is_text_on_the_jobs_sweep_and_compare_pages(
    seeded: Running, browser_page: Any
) -> None:
    seed(seeded.url, {POISON: ((2, 100.0, 20.0),)})
    page = browser_page
    job = f"/jobs/{hashlib.sha256(POISON.encode()).hexdigest()[:12]}-2"  # the sweep's point: its page names the sweep
    pages = (job, "/", "/sweeps/" + quote(POISON, safe=""), "/compare?sweep=" + quote(POISON, safe=""))
    for path in pages:
        page.goto(seeded.url + path)
        assert POISON in page.inner_text("main")
        assert no_horizontal_scroll(page)
        assert page.evaluate("typeof window.__pwned") == "undefined"
    assert [t.strip() for t in page.locator(".series-toggle").all_inner_texts()] == [POISON]  # the series, as written
    page.locator('[data-chart="throughput"] g.points circle').first.hover()
    tip = page.locator('[data-chart="throughput"] g[aria-label="tip"]')
    tip.locator("text").first.wait_for()
    assert POISON in (tip.text_content() or "")
    assert page.evaluate("typeof window.__pwned") == "undefined"
