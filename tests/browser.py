"""Driving JupyterLab in headless Chromium (Playwright): the steps the browser tests share."""

FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--disable-quic",
]


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


def run_cell(page, code: str) -> None:
    """Append a cell at the end of the notebook, type ``code`` and run it."""
    page.locator(".jp-Notebook .jp-Cell").last.click()
    page.keyboard.press("Escape")
    page.keyboard.press("b")  # new cell below, in command mode
    page.keyboard.press("Enter")  # edit it
    page.keyboard.type(code)
    page.keyboard.press("Shift+Enter")
