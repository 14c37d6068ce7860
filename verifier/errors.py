"""Errors any layer may raise. Only `verifier.cli.main` turns them into exit codes and stderr lines."""

from __future__ import annotations


class UsageError(Exception):
    """Bad input: one line on stderr, exit 2, nothing half-written."""
