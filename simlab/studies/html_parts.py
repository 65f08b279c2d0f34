"""The pieces every report page is made of (:mod:`simlab.studies.report_html` for runs, sweeps and what-ifs,
:mod:`simlab.studies.plan_report` for plans): the document with its style, the provenance line, an embedded
figure and a table whose gain cells are coloured."""

from __future__ import annotations

import base64
import html
from pathlib import Path
from typing import Any, Iterable, Optional

import pandas as pd

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; padding: 0 1em; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ddd; }
.meta { color: #555; font-size: 0.85em; } code { font-size: 0.95em; word-break: break-all; }
figure { margin: 1em 0; } img { max-width: 100%; border: 1px solid #eee; }
figcaption { font-size: 0.85em; color: #555; }
table { border-collapse: collapse; font-size: 0.8em; margin: 0.5em 0 1.5em; }
.table-scroll { overflow-x: auto; max-width: 100%; }
th, td { border: 1px solid #ddd; padding: 0.2em 0.5em; text-align: right; }
th { background: #f4f4f4; } td.text, th.text { text-align: left; }
.gain-up { color: #1a7f37; } .gain-down { color: #b42318; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; background: #f7f7f7; padding: 0.5em; font-size: 0.8em; }
.question { font-size: 1.05em; } .verdict { font-size: 1.05em; line-height: 1.45; }
.warning { color: #8a4b00; background: #fff6e5; padding: 0.4em 0.6em; }
"""


def page_html(title: str, body: list[str]) -> str:
    from simlab.common.version import __version__

    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"generator\" content=\"simlab {__version__}\"><title>{html.escape(title)}</title>"
            f"<style>{STYLE}</style></head>\n<body>\n<h1>{html.escape(title)}</h1>\n" + "\n".join(body) +
            "\n</body></html>\n")


def opening_html(question: str, setting: str, verdict: str, warnings: list[str]) -> list[str]:
    """A study page's first lines: its question and what was simulated, the answer in bold, then each caution."""
    out = [f"<p class=\"question\">{html.escape(question)}" + (f"<br>{html.escape(setting)}" if setting else "")
           + "</p>", f"<p class=\"verdict\"><b>{html.escape(verdict)}</b></p>"]
    return out + [f"<p class=\"warning\"><b>Caution:</b> {html.escape(w)}</p>" for w in warnings]


def meta_html(command: Optional[str], scenario_file: Optional[str], sha256: str) -> str:
    from simlab.common.version import __version__

    parts = [f"made by <code>{html.escape(command or '(library call)')}</code>"]
    if scenario_file:
        parts.append(f"scenario <code>{html.escape(Path(scenario_file).name)}</code>")
    parts.append(f"scenario SHA-256 <code>{sha256}</code>")
    parts.append(f"report by simlab {__version__}")
    return "<p class=\"meta\">" + "<br>".join(parts) + "</p>"


def figure_html(name: str, caption: str, payload: bytes) -> str:
    data = base64.b64encode(payload).decode("ascii")
    return (f"<figure><img alt=\"{html.escape(caption)}\" src=\"data:image/png;base64,{data}\">"
            f"<figcaption>{html.escape(caption)} ({html.escape(name)})</figcaption></figure>")


def table_html(header: list[str], rows: Iterable[list[Any]], text_columns: int = 1) -> str:
    head = "".join(f"<th class=\"{'text' if i < text_columns else ''}\">{html.escape(h)}</th>"
                   for i, h in enumerate(header))
    body = []
    for row in rows:
        cells = []
        for i, value in enumerate(row):
            css = "text" if i < text_columns else ""
            if isinstance(value, GainCell):
                css, value = value.css, str(value)
            cells.append(f"<td class=\"{css}\">{html.escape(str(value))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<div class=\"table-scroll\"><table><tr>{head}</tr>\n" + "\n".join(body) + "</table></div>"


class GainCell:
    def __init__(self, value: Optional[float]) -> None:
        self.value = None if value is None or pd.isna(value) else float(value)

    @property
    def css(self) -> str:
        return "" if self.value is None else ("gain-up" if self.value > 0.005 else
                                              "gain-down" if self.value < -0.005 else "")

    def __str__(self) -> str:
        return "–" if self.value is None else f"{self.value:+.1%}"
