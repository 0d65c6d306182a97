"""The Typer application, its consoles and shared options, and the entry point: one sentence and
exit code 2 for a UsageError (`friendly`), kmbench's own warnings as one line."""

from __future__ import annotations

import functools
import logging
import os
import warnings
from importlib.metadata import version

import typer
from rich.console import Console
from rich.markup import escape

from kmbench.data import datasets, results
from kmbench.errors import UsageError
from kmbench.protocol import environment

# Typer 0.29's rich help labels every option with its type, flags too ("--force <bool>"),
# which reads as if they took a value: a flag shows no type, as in click's plain help.
# Older Typer shows no type there (and has no such method): nothing to change.
_option_type = getattr(typer.core.TyperOption, "display_type_rich", None)
if _option_type is not None:
    typer.core.TyperOption.display_type_rich = lambda self, ctx: None if self.is_flag else _option_type(self, ctx)

app = typer.Typer(
    help="Benchmark k-means implementations fairly: the same data, initial centroids and "
    "iteration count for everyone, the same timed region, and every result checked against a "
    "float64 reference.",
    no_args_is_help=True,
    add_completion=False,
)
gen_app = typer.Typer(help="Generate a dataset into the cache (reused when the parameters repeat).",
                      no_args_is_help=True)
app.add_typer(gen_app, name="gen-data")


def _print_version(asked: bool) -> None:
    if asked:
        commit = environment.git_commit()
        typer.echo(f"kmbench {version('kmbench')}" + (f" (commit {commit})" if commit else ""))
        raise typer.Exit()


@app.callback()
def _options(
    _version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                  help="Print kmbench's version (and the checkout's commit) and exit."),
):
    pass
# Off a terminal (a log, a pipe) rich would cut tables at 80 columns: there, lines are as wide
# as they need to be.
LOGGED_WIDTH = 10_000
console = Console(width=None if Console().is_terminal else LOGGED_WIDTH)
errors = Console(stderr=True, width=None if Console(stderr=True).is_terminal else LOGGED_WIDTH)

STATUS_STYLE = {"ok": "green", "mismatch": "bold red", "approximate": "magenta", "error": "red", "skipped": "yellow"}
# Help and messages go through rich markup, which would take "[default: ...]" or
# "kmbench[plot]" for a style tag and drop it: every bracket is escaped.
DataDir = typer.Option(None, "--data-dir", help=escape("Dataset cache folder, also where oracle results are cached [default: $KMBENCH_DATA or ./datasets]."))
Store = typer.Option(None, "--store", help=escape("Record store [default: $KMBENCH_RESULTS or results/records.jsonl]."))
Scheduler = typer.Option(None, "--scheduler", help=escape(
    "Measure on this running Dask cluster: tcp://127.0.0.1:PORT on this machine, tls://HOST:PORT over the network "
    "(Dask's TLS configuration; docs/usage.md). Each cell goes to a worker, one cell per host at a time, and its "
    "record comes back to --store; the Dask rows run on the whole cluster, one at a time. "
    "[default: every cell here; $KMBENCH_DASK_SCHEDULER, if set, is the cluster of the Dask rows alone]"))


_python_show_warning = warnings.showwarning


def friendly(command):
    """Turn a UsageError into one sentence on stderr and exit code 2; a record store that refused
    the records measured (kept elsewhere, kmbench.data.results.keep) into one sentence and exit 1."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        before = results.diverted()
        try:
            command(*args, **kwargs)
            status = 0
        except UsageError as exc:
            errors.print(f"[bold red]Error:[/] {escape(str(exc))}", highlight=False)
            raise typer.Exit(2) from None
        except typer.Exit as exc:
            status = exc.exit_code
        refused = {store: kept for store, kept in results.diverted().items() if store not in before}
        for store, (fallback, why) in refused.items():
            errors.print(f"[bold red]Error:[/] the record store {escape(str(store))} could not be written ({escape(why)}); "
                         f"this run's records are in {escape(str(fallback))}: make the store writable and append them "
                         f"(cat {escape(str(fallback))} >> {escape(str(store))}).", highlight=False)
        if status or refused:
            raise typer.Exit(status or 1)

    return wrapper


def _show_warning(message, category, filename, lineno, file=None, line=None):
    """kmbench's own warnings (damaged caches, skipped store lines) as one line on stderr;
    other libraries' warnings as Python shows them."""
    if issubclass(category, (results.StoreWarning, datasets.CacheWarning)):
        errors.print(f"[yellow]Warning:[/] {escape(str(message))}", highlight=False)
    else:
        _python_show_warning(message, category, filename, lineno, file, line)


def main():
    warnings.showwarning = _show_warning
    # Libraries' INFO lines (sklearnex's "running accelerated version", Dask's start-up) are
    # not the user's business; their warnings still show.
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    # distributed sets its own logger to INFO when imported (its config's `logging` key), under
    # the root's WARNING: its config says warning instead, unless the user's environment says.
    os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "warning")
    app()
