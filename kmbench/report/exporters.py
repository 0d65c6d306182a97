"""The exporters by format. Each is one module with `render(contents) -> str` (contents:
kmbench.report.contents.Contents) and renders every task of the store (Lloyd, assign, batched):

    markdown  kmbench.report.markdown   the tables people read; also the scaling and
                                        out-of-core views of the plans' Lloyd records
    csv       kmbench.report.csv        one row per cell
    json      kmbench.report.json       the same cells, by task
    html      kmbench.report.html       (issue 34) one self-contained page: its render goes in
                                        FORMATS beside the others

`kmbench report --format` takes the names of FORMATS.
"""

from __future__ import annotations

from kmbench.report import csv, json, markdown

FORMATS = {"markdown": markdown.render, "csv": csv.render, "json": json.render}
