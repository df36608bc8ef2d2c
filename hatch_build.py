"""The build step that fetches the dashboard's charting library from the npm registry.

`js/package.json` and `js/package-lock.json` pin Observable Plot and d3 (docs/collector.md
says why these).  Every wheel build and every editable install (`pip install -e`, which
nox and CI use) runs this hook: `npm ci` in a scratch folder, then the two minified
bundles and their licence files are copied into `srtd/collector/static/vendor/`, a
gitignored folder the wheel ships (`artifacts` in pyproject.toml), so the dashboard
fetches nothing from a CDN: clusters are often offline.  When the folder already holds
what the lock file pins (`STAMP` records the lock's hash) npm is not run again.  A build
without npm fails with one line rather than ship a dashboard without its charts.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

try:
    from hatchling.builders.hooks.plugin.interface import BuildHookInterface
except ImportError:  # run as a script, or by the tests, without hatchling
    BuildHookInterface = object

ROOT = Path(__file__).resolve().parent
JS = ROOT / "js"
VENDOR = ROOT / "srtd" / "collector" / "static" / "vendor"
STAMP = VENDOR / "lock.sha256"
# (file in node_modules, name in vendor/)
SHIPPED = (
    ("d3/dist/d3.min.js", "d3.min.js"),
    ("d3/LICENSE", "d3.LICENSE"),
    ("@observablehq/plot/dist/plot.umd.min.js", "plot.umd.min.js"),
    ("@observablehq/plot/LICENSE", "plot.LICENSE"),
)


class VendorError(RuntimeError):
    pass


def lock_hash() -> str:
    return hashlib.sha256((JS / "package-lock.json").read_bytes()).hexdigest()


def vendored() -> bool:
    """The vendor folder holds every shipped file, from the lock file as it is now."""
    return (
        STAMP.is_file()
        and STAMP.read_text().strip() == lock_hash()
        and all((VENDOR / name).is_file() for _, name in SHIPPED)
    )


def vendor() -> None:
    if vendored():
        return
    npm = shutil.which("npm")
    if npm is None:
        raise VendorError("srtd's build needs npm (Node.js) to fetch the dashboard's charting library: install npm")
    with tempfile.TemporaryDirectory(prefix="srtd-npm-") as scratch:
        for name in ("package.json", "package-lock.json"):
            shutil.copy2(JS / name, Path(scratch) / name)
        argv = [npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"]
        done = subprocess.run(argv, cwd=scratch, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise VendorError(f"npm ci for the dashboard's charting library failed ({done.returncode}): {last}")
        VENDOR.mkdir(parents=True, exist_ok=True)
        for source, name in SHIPPED:
            shutil.copy2(Path(scratch) / "node_modules" / source, VENDOR / name)
    STAMP.write_text(lock_hash() + "\n")


def main() -> None:
    """Vendor, or stop the build with one line that says why."""
    try:
        vendor()
    except VendorError as err:
        raise SystemExit(f"srtd build: {err}") from None


class VendorHook(BuildHookInterface):  # type: ignore[misc,valid-type]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        main()


if __name__ == "__main__":  # `python hatch_build.py`: vendor without a build
    main()
