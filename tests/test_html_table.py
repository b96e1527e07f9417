"""The one table writer: hostile text stays text, markup passes only when marked."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest

from elegantpod.html_table import Markup, escape, table, td, th, tr

HOSTILE = [
    '<img src=x onerror="alert(1)">',
    "<script>alert(2)</script>",
    '"><svg onload=alert(3)>',
    "a & b 'c'",
]


class Parsed(HTMLParser):
    """The tags (with attributes) and text a browser's parser would see."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def test_hostile_text_in_every_place_stays_text():
    h = HOSTILE
    page = table(
        [th(h[0], class_="name"), h[1]],
        [[td(h[2], class_="name"), h[3]], tr([h[0], h[1]], title=h[2])],
        id=h[3],
    )
    parsed = Parsed(page)
    tags = [t for t, _ in parsed.tags]
    assert tags == ["table", "thead", "tr", "th", "th", "tbody"] + ["tr", "td", "td"] * 2
    assert parsed.text == [h[0], h[1], h[2], h[3], h[0], h[1]]  # each cell's exact text
    assert parsed.tags[0] == ("table", {"id": h[3]})
    assert parsed.tags[-3] == ("tr", {"title": h[2]})
    assert "<script>" not in page and "<img" not in page and "<svg" not in page


def test_markup_goes_in_as_it_is_and_everything_else_is_escaped():
    bold = Markup("<b>1.5</b>")
    page = table(None, [[bold, "<b>1.5</b>"]])
    assert page == (
        "<table><tbody><tr><td><b>1.5</b></td><td>&lt;b&gt;1.5&lt;/b&gt;</td></tr></tbody></table>"
    )
    assert isinstance(page, Markup)  # a table can sit in another table's cell
    assert table(None, [[page]]).count("<table>") == 2


def test_escape_is_idempotent_on_markup_only():
    once = escape("<a & b>")
    assert once == "&lt;a &amp; b&gt;" and isinstance(once, Markup)
    assert escape(once) == once  # marked: not escaped twice
    assert escape(str(once)) == "&amp;lt;a &amp;amp; b&amp;gt;"  # plain text: escaped
    assert escape(None) == "None" and escape(3) == "3"


def test_attributes_keep_their_order_and_drop_none():
    page = table(
        ["a"], [tr([td("x", colspan=2, style="color:red")], class_=None)], class_="m", id="t"
    )
    assert page.startswith('<table class="m" id="t"><thead><tr><th>a</th></tr></thead>')
    assert '<tr><td colspan="2" style="color:red">x</td></tr>' in page
    assert td("x", data_row=1).attrs == (("data-row", "1"),)


@pytest.mark.parametrize("name", ["onclick x", "1a", "a>b", "Upper"])
def test_an_attribute_name_that_is_not_one_is_refused(name):
    with pytest.raises(ValueError, match="not an HTML attribute name"):
        td("x", **{name: "1"})
