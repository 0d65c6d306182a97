"""The figures published in the reference documents, each with its source document."""

from __future__ import annotations

import json
from functools import lru_cache
from importlib.resources import files


@lru_cache(maxsize=1)
def tables() -> dict:
    return json.loads(files("kmbench.report").joinpath("published.json").read_text())


def table(key: str) -> dict:
    return tables()[key]


def matches(record: dict, protocol: dict) -> bool:
    """Does a record measure the configuration a published table used?"""
    data, params = record.get("dataset", {}), record.get("params", {})
    parameters = data.get("parameters", {})
    return (
        data.get("generator") == protocol["generator"]
        and data.get("d") == protocol["d"]
        and parameters.get("centers") == protocol["centers"]
        and params.get("k") == protocol["k"]
        and params.get("iterations") == protocol["iterations"]
        and params.get("stop", "iterations") == protocol.get("stop", "iterations")
    )
