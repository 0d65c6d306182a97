"""The figures published in the reference documents, each with its source document."""

from __future__ import annotations

import json
from functools import lru_cache
from importlib.resources import files

from kmbench.data.records import LloydRecord


@lru_cache(maxsize=1)
def tables() -> dict:
    return json.loads(files("kmbench.report").joinpath("published.json").read_text())


def table(key: str) -> dict:
    return tables()[key]


def matches(record: LloydRecord, protocol: dict) -> bool:
    """Does a Lloyd record measure the configuration a published table used?"""
    data, params = record.dataset, record.params
    return (
        data.generator == protocol["generator"]
        and data.d == protocol["d"]
        and data.parameters.get("centers") == protocol["centers"]
        and params.k == protocol["k"]
        and params.iterations == protocol["iterations"]
        and params.stop == protocol.get("stop", "iterations")
    )
