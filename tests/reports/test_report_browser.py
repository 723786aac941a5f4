"""The HTML reports in a real browser: headless Chromium (Debian's ``chromium`` package) renders the report of
a committed run and of a committed protocol, and of a served page; no console message, a screenshot that is
not blank.

Skipped, saying why, where Chromium is not installed (``.ci/run`` installs it when it can).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

from autoprox.reports.html.report import write_report
from tests.conftest import REPO

RUNS = REPO / "runs"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or (
    "/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="headless Chromium not found (install Debian's chromium package: "
                             "apt-get install -y chromium; .ci/run does it when apt can)")
#: Chromium's own flags: no network of its own, no first-run work, a fresh profile per page.
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--enable-logging=stderr", "--v=0")
CONSOLE = re.compile(r":CONSOLE(?:\(\d+\)|:\d+)\]\s*(.*)")


def render(url: str, tmp_path, name: str, extra: tuple[str, ...] = ()) -> tuple[list[str], object]:
    """Open ``url`` in headless Chromium: (its console messages, its 1280x2000 screenshot)."""
    from PIL import Image

    profile = tmp_path / f"profile-{name}"
    profile.mkdir()
    shot = tmp_path / f"{name}.png"
    done = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", f"--screenshot={shot}",
                           "--window-size=1280,2000", *extra, url], capture_output=True, text=True, timeout=180)
    assert shot.is_file(), f"no screenshot (exit {done.returncode}): {done.stderr[-2000:]}"
    messages = [m.group(1) for m in map(CONSOLE.search, done.stderr.splitlines()) if m]
    return messages, Image.open(shot).convert("RGB")


def check_not_blank(image) -> None:
    assert image.size == (1280, 2000)
    colours = image.getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 200, f"{len(colours or [])} distinct colours: a blank page?"
    white = {colour: count for count, colour in colours}.get((255, 255, 255), 0)
    assert white < 0.97 * image.size[0] * image.size[1]


def test_the_console_check_sees_an_error(tmp_path):
    """The check below can fail: a page that throws is seen."""
    page = tmp_path / "broken.html"
    page.write_text("<!DOCTYPE html><html><body><p>broken</p><script>throw new Error('boom');</script></body></html>")
    messages, _ = render(page.as_uri(), tmp_path, "broken")
    assert any("Uncaught Error: boom" in m for m in messages), messages


@pytest.mark.parametrize("path", [RUNS / "pit-best", RUNS / "protocol" / "pit-best"], ids=["run", "protocol"])
def test_a_committed_report_renders_without_console_messages(path, tmp_path):
    out = write_report(path, tmp_path / "report.html", compute=False, simplify=False)
    messages, image = render(out.as_uri(), tmp_path, "report")
    assert messages == []
    check_not_blank(image)


def test_a_served_report_runs_its_reload_script_without_console_messages(tmp_path):
    server = subprocess.Popen([sys.executable, "-m", "autoprox.cli", "report", str(RUNS / "protocol" / "pit-best"),
                               "--serve", "--port", "0", "--no-simplify"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONPATH=str(REPO)))
    try:
        line = server.stdout.readline()
        url = re.search(r"(http://127\.0\.0\.1:\d+/)", line)
        assert url, (line, server.stderr.read() if server.poll() is not None else "")
        # The page's script asks /state every two seconds: let five seconds of page time pass.
        messages, image = render(url.group(1), tmp_path, "served", ("--virtual-time-budget=5000",))
        assert messages == []
        check_not_blank(image)
    finally:
        server.terminate()
        server.wait(timeout=30)
