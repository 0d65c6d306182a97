"""The command line: parses, calls the harness, prints. app.py holds the application and the
entry point, options.py how options are read and checked, output.py what is printed,
commands.py the commands (imported here so that they register on the app)."""

from kmbench.cli import commands  # noqa: F401  (registers the commands)
from kmbench.cli.app import app, main

__all__ = ["app", "main"]
