"""Every dashboard view of a hostile store, rendered in headless Chromium: no script runs.

A store can come from a shared bucket or a colleague. Its strings (errors, lineage
values) reach HTML that runs in the user's notebook page, where a script can send code to
the kernel. The ipywidgets ``HTML`` view assigns its value with ``innerHTML``; the page
here does the same for every HTML widget of the dashboard, and also loads everything
as one document (where ``<script>`` would run too), then checks that no payload fired.
"""

import pytest

from elegantpod import Tournament
from elegantpod.tournament.core.field_checks import StateError
from elegantpod.widgets.dashboard import Dashboard
from elegantpod.widgets.html import leaderboard_html, lineage_html, schedule_html
from tests.helpers import CHROMIUM, need_chromium
from tests.tournament.store.test_hostile_store import entry, make_store, record

PAYLOADS = [
    '<img src=x onerror="window.__pwned=(window.__pwned||0)+1;alert(1)">',
    "<script>window.__pwned=(window.__pwned||0)+1;alert(2)</script>",
    '<svg onload="window.__pwned=(window.__pwned||0)+1;alert(3)">',
    '"><iframe srcdoc="<script>parent.__pwned=1</script>"></iframe>',
]


def html_widgets(widget):
    """Every ipywidgets HTML widget under ``widget`` (the dashboard's HTML views)."""
    import ipywidgets as W

    found = [widget] if isinstance(widget, W.HTML) else []
    for child in getattr(widget, "children", ()):
        found += html_widgets(child)
    return found


def render(values):
    """Load ``values`` in Chromium both ways; return (dialogs, pwned counter, texts)."""
    from playwright.sync_api import sync_playwright

    dialogs = []
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu"],
            headless=True,
        )
        try:
            page = browser.new_page()
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            # as the ipywidgets HTML view does it
            page.set_content("<html><body></body></html>")
            page.evaluate(
                """vals => { for (const v of vals) {
                    const d = document.createElement('div'); d.className = 'view';
                    d.innerHTML = v; document.body.appendChild(d); } }""",
                values,
            )
            page.wait_for_timeout(500)
            pwned = page.evaluate("window.__pwned || 0")
            texts = page.locator(".view").all_inner_texts()
            # as one trusted output document, where <script> runs as well
            page.set_content("<html><body>" + "".join(values) + "</body></html>")
            page.wait_for_timeout(500)
            pwned += page.evaluate("window.__pwned || 0")
        finally:
            browser.close()
    return dialogs, pwned, texts


@pytest.fixture(scope="module")
def chromium():
    need_chromium()


def test_the_harness_catches_an_unescaped_payload(chromium):
    dialogs, pwned, _ = render([PAYLOADS[0]])
    assert pwned >= 1 and dialogs  # so a zero below means the views escaped it


def test_every_view_of_a_hostile_store_runs_no_script(chromium, tmp_path):
    hostile = PAYLOADS
    make_store(
        tmp_path / "s",
        pods=[
            record("p000", status="failed", error=" ".join(hostile)),
            record(
                "p001",
                parent="p000",
                mutation={"lr": [hostile[0], hostile[1]], "gamma": [hostile[2], hostile[3]]},
            ),
        ],
        leaderboard=[entry("p001", parent="p000", mutation={"lr": [hostile[3], 0.1]})],
    )
    t = Tournament.resume(tmp_path / "s")
    d = Dashboard(t, refresh_seconds=0)
    # a hostile text typed into the dashboard comes back in an error message
    d.new_hparams.value = f"{hostile[0]}=1"
    d.add_button.click()
    assert "unknown hyperparameter" in d.message.value
    values = [w.value for w in html_widgets(d.widget)]
    values += [t._repr_html_(), t.leaderboard._repr_html_(), t.pods._repr_html_()]
    assert any("onerror" in v for v in values)  # the payloads are there, as text
    dialogs, pwned, texts = render(values)
    assert dialogs == [] and pwned == 0
    page_text = "\n".join(texts)
    assert "<img src=x onerror=" in page_text  # shown to the user as the text it is
    assert "p000" in page_text and "failed" in page_text


def test_a_hostile_mutation_name_never_reaches_a_view(tmp_path):
    # The critical finding: a mutation key holding HTML. It is refused on load now, and a
    # mutation policy cannot produce one either.
    make_store(tmp_path / "s", pods=[record(mutation={PAYLOADS[0]: [1, 2]})], leaderboard=[])
    with pytest.raises(StateError, match="is not a hyperparameter of ppo"):
        Tournament.resume(tmp_path / "s")

    def policy(hparams, space, rng, config):
        return dict(hparams), {PAYLOADS[0]: [1, 2]}

    t = Tournament("CartPole-v1", pods=2, store=tmp_path / "t", mutation_policy=policy)
    t.add_pod()  # the first ppo pod takes the base hyperparameters as they are
    with pytest.raises(ValueError, match="mutation_policy returned a bad mutation"):
        t.population.fill()  # the generator's next pod explores around the base


def test_the_html_templates_escape_every_field_keys_included(chromium):
    # The templates on their own, with hostile text in every field (mutation names
    # included, which the loader refuses): the escaping does not rely on that check.
    import pandas as pd

    h = PAYLOADS
    edges = [
        {
            "pod": h[0],
            "parent": h[1],
            "algo": h[2],
            "mutation": {h[0]: [h[1], h[2]], h[3]: [1, 2]},
            "status": h[3],
            "error": h[0],
            "why": h[1],
        }
    ]
    board = pd.DataFrame(
        [
            {
                "rank": 1,
                "pod": h[0],
                "algo": h[1],
                "score_mean": 1.0,
                "score_std": 0.1,
                "env_steps": 5,
                "steps_per_second": 2.0,
                "status": h[2],
                "hparams": {"lr": h[3]},
                "parent": h[3],
            }
        ]
    )
    phases = [
        {
            "pod": h[0],
            "from_steps": 0,
            "to_steps": 10,
            "from_time": 0.0,
            "to_time": 1.0,
            "segments": h[1],
            "score": h[2],
            "hparams": {h[3]: h[0]},
            "changes": {h[0]: [h[1], h[2]], h[3]: [1, 2]},
            "origin": h[2],
        }
    ]
    dialogs, pwned, texts = render(
        [lineage_html(edges), leaderboard_html(board, title=h[0]), schedule_html(phases, h[1])]
    )
    assert dialogs == [] and pwned == 0
    assert h[0] in "".join(texts)
