"""`srtd results` on bad input, and `--plot` without matplotlib: one line, exit 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from srtd.results import Point, Results, Verdict, write_results


def run(*args: str, block_matplotlib: bool = False) -> subprocess.CompletedProcess[str]:
    code = "import sys\n"
    if block_matplotlib:
        code += "sys.modules['matplotlib'] = None  # as if it were not installed\n"
    code += f"sys.argv = ['srtd', *{list(args)!r}]\nfrom srtd.cli import main\nmain()\n"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)


def a_job(tmp_path: Path) -> Path:
    point = Point(concurrency=2, requests_sent=4, requests_succeeded=4, output_tok_s=10.0)
    results = Results(
        job="j", job_id="7", unit="benchmark", reader="srtd", path="b.json", points=(point,), verdict=Verdict(ok=True)
    )
    write_results(results, tmp_path)
    return tmp_path


def test_plot_without_matplotlib_says_how_to_get_it(tmp_path: Path) -> None:
    done = run("results", str(a_job(tmp_path)), "--plot", str(tmp_path / "p.png"), block_matplotlib=True)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "srtd: --plot needs matplotlib: pip install 'srtd[plots]'\n"
    assert not (tmp_path / "p.png").exists()


def test_a_directory_without_results_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = run("results", str(tmp_path))
    assert done.returncode == 2
    assert done.stderr == (
        f"srtd: {tmp_path / 'results.json'}: cannot read: No such file or directory (was its benchmark read by srtd?)\n"
    )
    (tmp_path / "results.json").write_text("{}")
    done = run("results", str(tmp_path))
    assert done.returncode == 2
    assert done.stderr.startswith(f"srtd: {tmp_path / 'results.json'}: not a results.json written by srtd (")
    assert done.stderr.count("\n") == 1


def test_plot_needs_png_or_svg(tmp_path: Path) -> None:
    done = run("results", str(a_job(tmp_path)), "--plot", str(tmp_path / "p.jpg"))
    assert done.returncode == 2
    assert done.stderr == f"srtd: --plot {tmp_path / 'p.jpg'}: the file must end in .png or .svg\n"
