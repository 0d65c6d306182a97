"""Errors the user can fix. The CLI turns them into one sentence and exit code 2."""


class UsageError(ValueError):
    """Bad input (a file, an option, a parameter): the message names it and says what is wrong."""


class ImplementationError(RuntimeError):
    """An implementation could not build or run; the cell becomes `error`, the run goes on."""
