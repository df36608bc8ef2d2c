"""The charting library: fetched from npm at build time into the package, never from a CDN."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from srtd.collector._pages import STATIC

ROOT = Path(__file__).resolve().parents[2]
VENDOR = STATIC / "vendor"
TEMPLATES = STATIC.with_name("templates")


def test_the_editable_install_holds_the_pinned_bundles_with_their_licences() -> None:
    lock = (ROOT / "js" / "package-lock.json").read_text()
    for package, version in (("@observablehq/plot", "0.6.17"), ("d3", "7.9.2")):
        assert re.search(rf'"node_modules/{re.escape(package)}": {{\s*"version": "{version}"', lock)
    assert "// @observablehq/plot v0.6.17 " in (VENDOR / "plot.umd.min.js").read_text()[:200]
    assert "// https://d3js.org v7.9.2 " in (VENDOR / "d3.min.js").read_text()[:200]
    assert "Permission to use, copy, modify" in (VENDOR / "plot.LICENSE").read_text()  # ISC
    assert "Permission to use, copy, modify" in (VENDOR / "d3.LICENSE").read_text()


def test_every_script_a_page_names_is_a_file_of_the_package() -> None:
    named = {src for page in TEMPLATES.glob("*.html") for src in re.findall(r'src="([^"]+)"', page.read_text())}
    assert named == {
        "/static/live.js",
        "/static/vendor/d3.min.js",
        "/static/vendor/plot.umd.min.js",
        "/static/charts.js",
    }
    assert all((STATIC / src.removeprefix("/static/")).is_file() for src in named)


@pytest.mark.anyio
async def test_the_collector_serves_the_library_and_its_licence(api: httpx.AsyncClient) -> None:
    for name in ("plot.umd.min.js", "d3.min.js", "plot.LICENSE", "d3.LICENSE"):
        assert (await api.get(f"/static/vendor/{name}")).status_code == 200


def test_a_build_without_npm_stops_with_one_line_that_says_so(tmp_path: Path) -> None:
    """The build hook itself (hatch_build.py, as every build runs it) in a checkout without the
    vendored files, on a PATH without npm; `uv build` shows this line as the build's error."""
    shutil.copy2(ROOT / "hatch_build.py", tmp_path / "hatch_build.py")
    shutil.copytree(ROOT / "js", tmp_path / "js")
    env = {**os.environ, "PATH": str(tmp_path / "no-npm-here")}
    done = subprocess.run(
        [sys.executable, str(tmp_path / "hatch_build.py")], env=env, capture_output=True, text=True, check=False
    )
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        "srtd build: srtd's build needs npm (Node.js) to fetch the dashboard's charting library: install npm\n"
    )
    assert not (tmp_path / "srtd").exists()  # nothing half-vendored
