"""Built-in k-means implementations, one module or folder per family.

Each module defines `Implementation` subclasses (see `kmbench.protocol`); the
registry in `kmbench.registry` lists them. Native sources live beside their adapter.
"""
