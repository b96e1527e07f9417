"""Polling helpers shared by the tests that watch a live tournament."""

import os
import shutil
import time

import pytest


def wait_until(cond, timeout=30.0, every=0.05):
    """True as soon as ``cond()`` holds, False after ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(every)
    return False


def latest_steps(t, pod):
    """A pod's env-step count from its latest progress event (None before the first)."""
    events = [m for m in t.curves(pod) if "env_steps" in m]
    return events[-1]["env_steps"] if events else None


CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
NO_CHROMIUM = "browser test: Chromium not installed"
"""The start of every browser test's skip reason: conftest lists them at the end."""


def need_chromium() -> str:
    """Chromium's path; a browser test fails without it in CI (``.ci/run`` installs it)
    and is skipped elsewhere, with a reason the end-of-run summary picks up."""
    if not os.path.exists(CHROMIUM):
        if os.environ.get("CI"):
            pytest.fail(f"Chromium not found at {CHROMIUM}: .ci/run must install it")
        pytest.skip(f"{NO_CHROMIUM} (Debian: apt-get install chromium)")
    return CHROMIUM


def open_report(path, shot_path):
    """Open an HTML report in headless Chromium; screenshot it to ``shot_path``.

    Returns what the tests check: metrics-table rows (cell texts), every URL the page
    requested, any JavaScript dialog that fired, the page text and the grey-level spread
    of the equity chart (a blank box has none).
    """
    import io

    import numpy as np
    from PIL import Image
    from playwright.sync_api import sync_playwright

    exe = CHROMIUM
    requests, dialogs = [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=exe, args=["--no-sandbox", "--disable-gpu"], headless=True
        )
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.on("request", lambda r: requests.append(r.url))
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.goto(path.as_uri())
            page.wait_for_load_state("load")
            page.screenshot(path=str(shot_path), full_page=True)
            rows = [
                [c.inner_text() for c in row.locator("td").all()]
                for row in page.locator("#metrics tbody tr").all()
            ]
            chart = page.locator("#equity")
            loaded = chart.evaluate("img => img.complete && img.naturalWidth > 0")
            png = chart.screenshot()
            text = page.locator("body").inner_text()
        finally:
            browser.close()
    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("L"), dtype=float)
    return {
        "rows": rows,
        "requests": requests,
        "dialogs": dialogs,
        "text": text,
        "chart_loaded": loaded,
        "chart_std": float(pixels.std()),
    }
