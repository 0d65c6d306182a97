"""The exporters by format. Each is one module with `render(contents) -> str` (contents:
kmbench.report.contents.Contents) and renders every task of the store (Lloyd, assign, batched):

    markdown  kmbench.report.markdown   the tables people read; also the scaling and
                                        out-of-core views of the plans' Lloyd records
    csv       kmbench.report.csv        one row per cell
    json      kmbench.report.json       the same cells, by task
    html      kmbench.report.html       one self-contained page (plotly, inlined): charts,
                                        floors and quality against time of the Lloyd records

`kmbench report --format` takes the names of FORMATS.
"""

from __future__ import annotations

from kmbench.report import csv, html, json, markdown

FORMATS = {"markdown": markdown.render, "csv": csv.render, "json": json.render, "html": html.render}
