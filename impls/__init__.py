"""Built-in k-means implementations, grouped by where they run: cpu/, gpu/ and distributed/ hold
our own rows, peers/ the libraries of others. One module or folder per family.

Each module defines `Implementation` subclasses (see `kmbench.protocol`); the
registry in `kmbench.registry` lists them. Native sources live beside their adapter.
"""

import importlib.util


def installed(*modules: str) -> bool:
    """Whether each top-level module is installed, found without importing it: `kmbench list`
    asks every row whether it can run, and importing scikit-learn and Dask to answer took seconds."""
    return all(importlib.util.find_spec(name) is not None for name in modules)
