"""Built-in k-means implementations, grouped by where they run: cpu/, gpu/ and distributed/ hold
our own rows, peers/ the libraries of others. One module or folder per family.

Each module defines `Implementation` subclasses (see `kmbench.protocol`); the
registry in `kmbench.registry` lists them. Native sources live beside their adapter.
"""
