"""The JSON exporter: the store it read, Lloyd's cells (`cells`, the cells frame of
kmbench.report.report) and, where the store holds them, the task suites' cells by task
(`assign`, `batched`), one object per cell."""

from __future__ import annotations

import json

from kmbench.report.contents import Contents
from kmbench.report.csv import frames


def render(contents: Contents) -> str:
    found = frames(contents)
    payload = {"source": contents.source, "cells": json.loads(found.pop("lloyd").to_json(orient="records"))
               if "lloyd" in found else []}
    payload.update({task: json.loads(frame.to_json(orient="records")) for task, frame in found.items()})
    return json.dumps(payload, indent=2) + "\n"
