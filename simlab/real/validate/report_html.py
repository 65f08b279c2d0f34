"""``simlab report`` on a validation folder: ``report.html`` (self-contained: the per-arm table of real against
simulated with errors and sampling noise, and the figure embedded) beside ``validation.png``."""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path

from simlab.real.validate.compare import BOUNDED, COMPARED

VALIDATION_FILE = "validation.json"


def is_validation_folder(folder: Path) -> bool:
    return (Path(folder) / VALIDATION_FILE).is_file()


def write_validation_report(folder: Path) -> Path:
    """Redraw ``validation.png`` and write ``report.html`` in ``folder``; returns the page's path."""
    from simlab.common.outputs import write_file_atomic
    from simlab.common.version import __version__
    from simlab.real.validate.plots import render_validation_png

    folder = Path(folder)
    document = json.loads((folder / VALIDATION_FILE).read_text(encoding="utf-8"))
    png = render_validation_png(document)
    write_file_atomic(folder / "validation.png", png)
    title = f"{document.get('scenario', {}).get('name', 'validation')}: real against simulated"
    rows = []
    for arm, part in document["arms"].items():
        for key in COMPARED:
            real, sim, err = part["real"].get(key), part["simulated"].get(key), part["error"].get(key)
            noise = part.get("noise", {}).get(key)
            rows.append("<tr>" + "".join(f"<td>{html.escape(str(cell))}</td>" for cell in (
                arm, key, _fmt(real), _fmt(sim), _fmt(err, percent=True),
                _fmt(noise, percent=True) if key in BOUNDED else "", _fmt(part["bounds"].get(key), percent=True)
                if key in BOUNDED else "")) + "</tr>")
    settings = html.escape(json.dumps(document.get("settings", {}), indent=1))
    page = (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<meta name=\"generator\" content=\"simlab {__version__}\"><title>{html.escape(title)}</title>"
        "<style>body{font-family:system-ui,sans-serif;margin:2em auto;padding:0 1em;max-width:1200px}"
        "table{border-collapse:collapse;font-size:.85em}td,th{border:1px solid #ddd;padding:.2em .5em;"
        "text-align:right}img{max-width:100%}pre{white-space:pre-wrap;overflow-wrap:anywhere}</style>"
        f"</head><body><h1>{html.escape(title)}</h1>"
        "<p>error = (simulated − real) / real; noise = its standard error from the runs' sample sizes; bound = the "
        "larger of the 5 % target and 4 noise (docs/validation.md).</p>"
        "<table><tr><th>arm</th><th>metric</th><th>real</th><th>simulated</th><th>error</th><th>noise</th>"
        f"<th>bound</th></tr>{''.join(rows)}</table>"
        f"<img alt=\"real against simulated\" src=\"data:image/png;base64,{base64.b64encode(png).decode()}\">"
        f"<h2>settings</h2><pre>{settings}</pre></body></html>\n"
    )
    return write_file_atomic(folder / "report.html", page)


def _fmt(value, *, percent: bool = False) -> str:
    if value is None:
        return "–"
    if isinstance(value, list):
        return ", ".join(_fmt(v, percent=percent) for v in value)
    return f"{value:+.1%}" if percent else f"{value:,.4g}"


__all__ = ["is_validation_folder", "write_validation_report"]
