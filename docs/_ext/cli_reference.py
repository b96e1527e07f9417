"""``{cli-reference}``: the command line's reference, generated from its argument parser.

The reference cannot drift from the code: each subcommand's ``--help`` text, as
``elegantpod <command> --help`` prints it at 88 columns, becomes a heading and a literal
block. The guide around it (``guides/cli.md``) says what the options are for.
"""

from __future__ import annotations

import argparse
import os

from docutils import nodes
from sphinx.util.docutils import SphinxDirective


def _help(parser: argparse.ArgumentParser) -> str:
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "88"  # argparse reads it for its width
    try:
        return parser.format_help()
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old


class CliReference(SphinxDirective):
    """One section per subcommand of ``elegantpod``, in the parser's order."""

    def run(self) -> list[nodes.Node]:
        from elegantpod.cli.args import parser

        top = parser()
        found = [nodes.literal_block(text=_help(top), language="text")]
        for action in top._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    title = f"elegantpod {name}"
                    section = nodes.section(ids=[f"elegantpod-{name}"], names=[title])
                    section += nodes.title(text=title)
                    section += nodes.literal_block(text=_help(sub), language="text")
                    found.append(section)
        return found


def setup(app):
    """Register the directive."""
    app.add_directive("cli-reference", CliReference)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
