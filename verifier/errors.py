"""Errors any layer may raise; only the CLI maps them to exit codes."""


class UsageError(Exception):
    """Bad input: one line on stderr, exit 2, nothing half-written."""
