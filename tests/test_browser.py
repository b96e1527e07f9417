"""Real browser, end to end: JupyterLab on 127.0.0.1, the dashboard notebook in headless
Chromium driven by Playwright, a click on Pause, and the kernel confirms the pod paused."""

import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

from tests.servers import free_port

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--disable-quic",
]

SETUP = """import elegantpod
client = elegantpod.cluster(n_workers=2)
t = elegantpod.Tournament(env="CartPole-v1", algos=["ppo"], pods=2, max_seconds=300,
                          segment_steps=10**8, store="store", client=client)
t.start()
dashboard = t.dashboard(refresh_seconds=0.5)
import time


def wait_for_replacement(t, seconds=120):
    # the pods made by replacing others, once there is one (and a few more segments)
    end = time.monotonic() + seconds
    while time.monotonic() < end and not [r for r in t.lineage() if r["parent"]]:
        time.sleep(0.5)
    time.sleep(2)  # a few more segments on the curves
    return [r["pod"] for r in t.lineage() if r["parent"]]


dashboard.widget"""


# Typed into cells one line each: JupyterLab indents typed blocks by itself.
SCREENSHOT_RUN = (
    "t.stop(); t.wait(60); t2 = elegantpod.Tournament(env='CartPole-v1', "
    "algos=['ppo', 'dqn'], pods=4, max_seconds=240, segment_steps=4096, store='store2', "
    "client=client, seed=0); t2.start()"
)
WAIT_FOR_REPLACEMENT = 'print("REPLACED", wait_for_replacement(t2))'


def _wait_http(url: str, timeout: float = 90) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise TimeoutError(f"{url} did not answer in {timeout}s")


def click_pause(page, scope, pod: str) -> None:
    """In the dashboard inside ``scope`` (a page or a cell): choose ``pod``, click Pause,
    and wait for the dashboard to say the tournament answered."""
    page.wait_for_function(
        "(pod) => [...document.querySelectorAll('.jupyter-widgets select option')]"
        ".some(o => o.textContent.trim() === pod)",
        arg=pod,
        timeout=120_000,
    )
    scope.locator(".jupyter-widgets select").first.select_option(pod)
    scope.locator(".jupyter-widgets button", has_text="Pause").first.click()
    scope.locator(".jupyter-widgets", has_text=f"pause {pod}: done").first.wait_for(timeout=30_000)


def _run_cell(page, code: str) -> None:
    """Append a cell at the end of the notebook, type ``code`` and run it."""
    page.locator(".jp-Notebook .jp-Cell").last.click()
    page.keyboard.press("Escape")
    page.keyboard.press("b")  # new cell below, in command mode
    page.keyboard.press("Enter")  # edit it
    page.keyboard.type(code)
    page.keyboard.press("Shift+Enter")


@pytest.mark.slow
def test_click_pause_in_jupyterlab(tmp_path):
    if not os.path.exists(CHROMIUM):
        if os.environ.get("CI"):
            pytest.fail(f"Chromium not found at {CHROMIUM}: .ci/run must install it")
        pytest.skip("Chromium not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    work = tmp_path / "work"
    work.mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(SETUP)]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nbformat.write(nb, work / "dashboard.ipynb")
    env = dict(
        os.environ,
        JUPYTER_CONFIG_DIR=str(tmp_path / "config"),
        JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"),
        HOME=str(tmp_path / "home"),
    )
    (tmp_path / "home").mkdir()
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyterlab",
            "--no-browser",
            "--ip=127.0.0.1",
            f"--port={port}",
            "--ServerApp.token=",
            "--ServerApp.password=",
            "--allow-root",
            f"--ServerApp.root_dir={work}",
            "--LabApp.news_url=None",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT if os.environ.get("ELEGANTPOD_DEBUG") else subprocess.DEVNULL,
    )
    artifacts = Path(os.environ.get("ELEGANTPOD_ARTIFACTS", tmp_path))
    artifacts.mkdir(parents=True, exist_ok=True)
    try:
        _wait_http(f"http://127.0.0.1:{port}/api/status")
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
            page = browser.new_page(viewport={"width": 1500, "height": 1000})
            page.goto(f"http://127.0.0.1:{port}/lab/tree/dashboard.ipynb")
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=120_000)
            # wait for the kernel to be connected and idle before typing
            page.locator(".jp-StatusBar-Widget", has_text="| Idle").first.wait_for(timeout=120_000)
            first = page.locator(".jp-Notebook .jp-Cell").first
            for _ in range(3):  # a keypress that lands before the kernel is ready is lost
                first.click()
                page.keyboard.press("Escape")
                page.keyboard.press("Control+Enter")  # run in place, no new cell
                try:
                    page.wait_for_function(
                        "() => !document.querySelector('.jp-Notebook .jp-Cell .jp-InputPrompt')"
                        ".textContent.includes('[ ]')",
                        timeout=15_000,
                    )
                    break
                except Exception:
                    continue
            pause = page.locator(".jupyter-widgets button", has_text="Pause")
            try:
                pause.wait_for(timeout=int(os.environ.get("ELEGANTPOD_WIDGET_TIMEOUT", 180_000)))
            except Exception:
                page.screenshot(path=str(artifacts / "failure.png"), full_page=True)
                raise
            click_pause(page, page, "p000")
            _run_cell(page, 'print("STATUS", t.pod("p000")["status"])')
            page.locator(".jp-OutputArea-output", has_text="STATUS paused").wait_for(timeout=60_000)
            _run_cell(page, 't.stop("p001")')  # its segment ends and enters the leaderboard
            page.locator(".jupyter-widgets .lm-TabBar-tab", has_text="Leaderboard").first.click()
            page.locator(".widget-gridbox", has_text="stopped").first.wait_for(timeout=60_000)
            # The README's picture: a real run with several pods, curves and a replacement.
            _run_cell(page, SCREENSHOT_RUN)
            _run_cell(page, WAIT_FOR_REPLACEMENT)
            try:
                page.locator(".jp-OutputArea-output", has_text="REPLACED ['p0").wait_for(
                    timeout=150_000
                )
            except Exception:
                page.screenshot(path=str(artifacts / "failure.png"), full_page=True)
                raise
            shot = page.locator(".jp-Cell", has_text="store2").locator(".jp-OutputArea-output")
            shot.locator(".widget-gridbox", has_text="replaced").wait_for(timeout=30_000)
            shot.scroll_into_view_if_needed()
            shot.screenshot(path=str(artifacts / "dashboard.png"))
            shot.locator(".lm-TabBar-tab", has_text="Curves").click()
            page.wait_for_timeout(1500)
            shot.screenshot(path=str(artifacts / "dashboard_curves.png"))
            _run_cell(page, "t2.stop(); t2.wait(60); elegantpod.shutdown(client)")
            page.wait_for_selector(
                ".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=120_000
            )
            browser.close()
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
    assert (artifacts / "dashboard.png").stat().st_size > 10_000
    assert (artifacts / "dashboard_curves.png").stat().st_size > 10_000
