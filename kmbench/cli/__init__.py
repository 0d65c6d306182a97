"""The command line: parses, calls the harness, prints. app.py holds the application and the
entry point, options.py how options are read and checked, output.py what is printed,
commands.py the commands, in_memory.py those of the plans on data made in memory (scale,
out-of-core), compare.py the comparison of two stores; they are imported here so that their
commands register on the app."""

from kmbench.cli import commands, compare, in_memory  # noqa: F401  (registers the commands)
from kmbench.cli.app import app, main

__all__ = ["app", "main"]
