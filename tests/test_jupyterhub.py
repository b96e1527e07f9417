"""JupyterHub end to end, as daskhub deploys it, on 127.0.0.1 (``deploy/local/``), and
the dashboard in JupyterLab driven by a real browser.

A user logs in to a real JupyterHub in headless Chromium, gets their own JupyterLab
server, runs tutorial 03 there, opens the Dask dashboard through the hub's proxy
(jupyter-server-proxy), clicks Pause in a dashboard (the kernel confirms the
pod paused), stops a pod (the Leaderboard tab shows it), captures the README's
dashboard pictures from a PPO + DQN run, and from the same server creates a Dask
Gateway cluster found through the environment JupyterHub sets, runs a tournament on it
and shuts it down. Another user cannot see or reach that cluster, a request without a
token is refused, and no process outlives the hub. (One hub run covers what a plain
JupyterLab run would: the user's server *is* JupyterLab.)
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from elegantpod.clusters.gateway import close_gateway
from tests.browser import FLAGS, click_pause, run_cell
from tests.helpers import need_chromium, wait_until
from tests.servers import daskhub

pytest.importorskip("jupyterhub")
pytest.importorskip("dask_gateway_server")
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    folder = tmp_path_factory.mktemp("daskhub")
    home = folder / "home" / "alice"
    home.mkdir(parents=True)
    shutil.copy(ROOT / "tutorials" / "03_tournament.ipynb", home)
    user_env = {"ELEGANTPOD_SMALL_BUDGET": "1", "ELEGANTPOD_WORKDIR": str(folder / "work")}
    with daskhub.local_daskhub(folder, user_env=user_env) as h:
        yield h
    left = daskhub.alive(h.seen)
    assert left == [], f"processes left after the hub stopped: {left}"


def _gateway(hub, token):
    from dask_gateway import Gateway, JupyterHubAuth

    proxy = hub.gateway_proxy.replace("http://", "gateway://")
    return Gateway(hub.gateway_url, proxy_address=proxy, auth=JupyterHubAuth(api_token=token))


def _status(url: str, token: str | None = None) -> int:
    headers = {"Authorization": f"jupyterhub {token}"} if token else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10):
            return 200
    except urllib.error.HTTPError as exc:
        return exc.code


def test_the_gateway_refuses_requests_without_a_valid_hub_token(hub):
    for base in (hub.gateway_url, hub.gateway_proxy + "/services/dask-gateway"):
        assert _status(f"{base}/api/v1/clusters/") == 401
        # a token the hub does not know: the hub answers the gateway 403, and
        # dask-gateway-server turns that into a 500 ("Permission failure verifying user's
        # JupyterHub API token"); refused either way
        assert _status(f"{base}/api/v1/clusters/", token="not-a-token") in (401, 403, 500)
    # a real token of a user the hub knows works
    assert _status(f"{hub.gateway_url}/api/v1/clusters/", hub.user_token("bob")) == 200


def test_a_user_runs_a_tutorial_and_a_gateway_tournament_from_their_server(hub):
    chromium = need_chromium()
    from playwright.sync_api import sync_playwright

    artifacts = Path(os.environ.get("ELEGANTPOD_ARTIFACTS", hub.folder))
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, headless=True, args=FLAGS)
        page = browser.new_page(viewport={"width": 1500, "height": 1000})
        try:
            _log_in(page, hub, "alice")
            _run_the_tutorial(page, hub)
            _click_pause_stop_and_capture(page, hub, artifacts)
            _tournament_on_the_gateway(page, hub)
        except Exception:
            page.screenshot(path=str(artifacts / "hub-failure.png"), full_page=True)
            raise
        finally:
            browser.close()


def _log_in(page, hub, user):
    page.goto(f"{hub.url}/hub/login")
    page.fill("#username_input", user)
    page.fill("#password_input", hub.password)
    page.click("#login_submit")
    # the hub spawns the user's server, then sends the browser to its JupyterLab
    page.wait_for_url(re.compile(rf".*/user/{user}/lab.*"), timeout=180_000)
    page.locator(".jp-LabShell").wait_for(timeout=120_000)


def _run_the_tutorial(page, hub):
    page.goto(f"{hub.url}/user/alice/lab/tree/03_tournament.ipynb")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=120_000)
    page.locator(".jp-StatusBar-Widget", has_text="| Idle").first.wait_for(timeout=120_000)
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
    # Run All stops at an error: the last code cell gets its number only if all ran
    last = page.locator(".jp-Notebook .jp-CodeCell .jp-InputPrompt").last
    wait_until(lambda: re.fullmatch(r"\[\d+\]:", last.inner_text().strip()), timeout=300)
    errors = page.locator(".jp-OutputArea-output", has_text="Traceback (most recent call last)")
    assert errors.count() == 0, errors.first.inner_text()[-2000:]
    # the tutorial's dashboard rendered
    assert page.locator(".jupyter-widgets button", has_text="Pause").count() >= 1


PAUSE_RUN = (
    "pclient = elegantpod.cluster(n_workers=2); tp = elegantpod.Tournament("
    "env='CartPole-v1', algos=['ppo'], pods=2, max_seconds=300, segment_steps=10**8, "
    "store=elegantpod.workdir('pause-check'), client=pclient); tp.start()"
)
# The README's picture: a real run with several pods, curves and a replacement.
SCREENSHOT_RUN = (
    "tp.stop(); tp.wait(60); t2 = elegantpod.Tournament(env='CartPole-v1', "
    "algos=['ppo', 'dqn'], pods=4, max_seconds=240, segment_steps=4096, "
    "store=elegantpod.workdir('screenshot'), client=pclient, seed=0); t2.start()"
)
# One line (JupyterLab indents typed blocks by itself): up to 120 s for a replacement,
# then a few more segments on the curves.
WAIT_FOR_REPLACEMENT = (
    "import time; children = lambda: list(t2.lineage().dropna(subset=['parent'])['pod']); "
    "_ = [time.sleep(0.5) for _ in range(240) if not children()]; time.sleep(2); "
    "print('REPLACED', children())"
)


def _open_the_dask_dashboard(page, hub):
    """The client's dashboard link opens from the user's browser: through the hub and
    jupyter-server-proxy, not the server's own 127.0.0.1 the browser cannot reach."""
    run_cell(page, 'print("DASHLINK=" + pclient.dashboard_link)')
    out = page.locator(".jp-OutputArea-output", has_text="DASHLINK=").last
    out.wait_for(timeout=60_000)
    link = out.inner_text().split("DASHLINK=", 1)[1].split()[0]
    assert re.fullmatch(r"/user/alice/proxy/\d+/status", link), link
    # the page's own request context: the logged-in user's cookies, as a click would send
    response = page.request.get(f"{hub.url}{link}", timeout=60_000)
    assert response.status == 200, (response.status, response.text()[:500])
    assert "<title>Dask" in response.text(), response.text()[:500]


def _click_pause_stop_and_capture(page, hub, artifacts):
    run_cell(page, PAUSE_RUN)
    cell = page.locator(".jp-Cell", has_text="pause-check")
    pause = cell.locator(".jupyter-widgets button", has_text="Pause")
    pause.wait_for(timeout=120_000)
    _open_the_dask_dashboard(page, hub)
    click_pause(page, cell, "p000")
    run_cell(page, 'print("STATUS", tp.pod("p000")["status"])')
    page.locator(".jp-OutputArea-output", has_text="STATUS paused").last.wait_for(timeout=60_000)
    run_cell(page, 'tp.stop("p001")')  # its segment ends and enters the leaderboard
    cell.locator(".jupyter-widgets .lm-TabBar-tab", has_text="Leaderboard").first.click()
    cell.locator(".widget-gridbox", has_text="stopped").first.wait_for(timeout=60_000)
    if os.environ.get("ELEGANTPOD_ARTIFACTS"):  # the README's pictures: a longer run
        run_cell(page, SCREENSHOT_RUN)
        run_cell(page, WAIT_FOR_REPLACEMENT)
        page.locator(".jp-OutputArea-output", has_text="REPLACED ['p0").wait_for(timeout=150_000)
        shot = page.locator(".jp-Cell", has_text="screenshot").locator(".jp-OutputArea-output")
        shot.locator(".widget-gridbox", has_text="replaced").wait_for(timeout=30_000)
        end = "t2.stop(); t2.wait(60); elegantpod.shutdown(pclient)"
    else:  # the dashboard that was just clicked, as it renders
        shot = cell.locator(".jp-OutputArea-output").last
        end = "tp.stop(); tp.wait(60); elegantpod.shutdown(pclient)"
    shot.scroll_into_view_if_needed()
    shot.screenshot(path=str(artifacts / "dashboard.png"))
    shot.locator(".lm-TabBar-tab", has_text="Curves").click()
    page.wait_for_timeout(1500)
    shot.screenshot(path=str(artifacts / "dashboard_curves.png"))
    run_cell(page, end)
    assert (artifacts / "dashboard.png").stat().st_size > 10_000
    assert (artifacts / "dashboard_curves.png").stat().st_size > 10_000


def _tournament_on_the_gateway(page, hub):
    # the gateway is found from the environment the hub gave this server
    run_cell(
        page,
        "gclient = elegantpod.cluster(gateway=True, worker_cores=1, n_workers=1); "
        "print('GWCLUSTER=' + gclient.cluster.name)",
    )
    out = page.locator(".jp-OutputArea-output", has_text="GWCLUSTER=").last
    out.wait_for(timeout=180_000)
    name = out.inner_text().split("GWCLUSTER=", 1)[1].split()[0]
    # the cluster is alice's: she sees it, bob neither sees nor reaches it
    alice, bob = _gateway(hub, hub.user_token("alice")), _gateway(hub, hub.user_token("bob"))
    try:
        assert name in [c.name for c in alice.list_clusters()]
        assert bob.list_clusters() == []
        with pytest.raises(Exception) as refused:  # the gateway answers bob 403 (or 404)
            bob.connect(name)
        assert getattr(refused.value, "status", 404) in (403, 404), refused.value
        with contextlib.suppress(Exception):
            bob.stop_cluster(name)  # must not touch a cluster that is not bob's
        assert name in [c.name for c in alice.list_clusters()]
        run_cell(
            page,
            "tg = elegantpod.Tournament('CartPole-v1', algos=['ppo'], pods=1, max_steps=8192, "
            "segment_steps=4096, store=elegantpod.workdir('gateway-run'), client=gclient); "
            "sg = tg.start().wait(); "
            "print('GWRESULT=', sg['status'], sg['pods_failed'], sg['env_steps_total'])",
        )
        done = page.locator(".jp-OutputArea-output", has_text="GWRESULT=").last
        done.wait_for(timeout=180_000)
        status, failed, steps = done.inner_text().split("GWRESULT=", 1)[1].split()[:3]
        assert (status, failed) == ("finished", "0") and int(steps) > 0, done.inner_text()
        _assert_clusters_listen_on_loopback(hub)
        run_cell(page, "elegantpod.shutdown(gclient); print('GW' + 'SHUTDOWN')")
        page.locator(".jp-OutputArea-output", has_text="GWSHUTDOWN").last.wait_for(timeout=120_000)
        assert wait_until(lambda: alice.list_clusters() == [], timeout=60)
    finally:
        for gw in (alice, bob):
            close_gateway(gw)


def _assert_clusters_listen_on_loopback(hub):
    """The gateway's scheduler, workers and nannies listen on 127.0.0.1 only (a worker
    without ``--host`` listened on 0.0.0.0 and [::])."""
    import psutil

    listening = set()
    for proc in psutil.Process(hub.processes[1].pid).children(recursive=True):
        with contextlib.suppress(psutil.Error):
            conns = getattr(proc, "net_connections", None) or proc.connections
            for conn in conns("inet"):
                if conn.status == psutil.CONN_LISTEN:
                    listening.add((" ".join(proc.cmdline()[1:3]), conn.laddr.ip))
    assert any("worker" in cmd for cmd, _ in listening), listening
    assert all(ip == "127.0.0.1" for _, ip in listening), listening
