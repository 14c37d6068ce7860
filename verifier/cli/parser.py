"""The command line's one argparse class, and the rule that every hint is true for the command that prints it.

- `Parser`: `allow_abbrev=False` (a prefix such as `--conc 4` is an error, not a silent `--concurrency`), and
  every usage error is ONE line on stderr (no usage block), with "did you mean" for flags, commands and choices.
- Hints: a UsageError carries its ways out as `hints` (clauses such as "use --resume DIR"); `render` keeps only
  those whose flags exist on the parser of the command that prints them, so `gate` never says "use --resume".
  A flag inside backticks after `verifier CMD` belongs to CMD (`verifier run --resume DIR` is true anywhere).
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from typing import Any, Iterable, NoReturn

FLAG = re.compile(r"(?<![\w-])--[A-Za-z][\w-]*")
FOREIGN = re.compile(r"`verifier ([a-z][a-z-]*)([^`]*)`")


class Parser(argparse.ArgumentParser):
    """argparse with no abbreviations and one-line errors."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        kw.setdefault("allow_abbrev", False)
        super().__init__(*args, **kw)

    def error(self, message: str) -> NoReturn:
        line = " ".join(explain(self, message).split())
        self.exit(2, f"{self.prog}: error: {line}\n")


def explain(p: argparse.ArgumentParser, message: str) -> str:
    """argparse's message with a "did you mean" where one is close."""
    m = re.match(r"unrecognized arguments: (.*)", message)
    if m:
        flags = [t.split("=", 1)[0] for t in m.group(1).split() if t.startswith("-")]
        guesses = [g for f in flags for g in _close(f, option_strings(p))[:1]]
        if guesses:
            return f"{message}; did you mean {' '.join(guesses)}? (see {p.prog} --help)"
        return f"{message} (see {p.prog} --help)"
    m = re.match(r"argument ([^:]+): invalid choice: '([^']*)' \(choose from (.*)\)", message, re.S)
    if m:
        choices = re.findall(r"'([^']*)'", m.group(3))
        what = "command" if m.group(1) in ("cmd", "{" + ",".join(choices) + "}") or m.group(1).endswith("_cmd") else f"{m.group(1)} value"
        guesses = _close(m.group(2), choices)
        tail = f"did you mean {guesses[0]}?" if guesses else f"choose from {', '.join(choices)}"
        return f"unknown {what} {m.group(2)!r}; {tail}"
    return message


def _close(word: str, options: Iterable[str]) -> list[str]:
    options = list(options)
    prefix = [o for o in options if o.startswith(word) and word.startswith("--") and len(word) > 3]
    return sorted(prefix)[:1] or difflib.get_close_matches(word, options, n=1, cutoff=0.6)


def option_strings(p: argparse.ArgumentParser) -> set[str]:
    return {s for act in p._actions for s in act.option_strings}


def subparsers(p: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for act in p._actions:
        if isinstance(act, argparse._SubParsersAction):
            return dict(act.choices)
    return {}


def command_parser(root: argparse.ArgumentParser, a: argparse.Namespace) -> argparse.ArgumentParser:
    """The parser of the (sub)command `a` was parsed by: `verifier gate` -> gate's, `verifier testbed serve` -> serve's."""
    p = root
    for dest in ("cmd", "testbed_cmd"):
        name = getattr(a, dest, None)
        if name and name in subparsers(p):
            p = subparsers(p)[name]
    return p


def foreign_flags(text: str) -> list[tuple[str, str]]:
    """(command, flag) for the flags inside `verifier CMD ...` backticks."""
    return [(cmd, f) for cmd, rest in FOREIGN.findall(text) for f in FLAG.findall(rest)]


def own_flags(text: str) -> list[str]:
    """The flags a text names for the command that prints it (not those quoted for another command)."""
    return FLAG.findall(FOREIGN.sub("", text))


def untrue(text: str, p: argparse.ArgumentParser, root: argparse.ArgumentParser | None = None) -> list[str]:
    """The flags `text` names that do not exist where it says (on `p`, or on the quoted command)."""
    have = option_strings(p)
    bad = [f for f in own_flags(text) if f not in have]
    if root is not None:
        cmds = subparsers(root)
        for cmd, f in foreign_flags(text):
            target = cmds.get(cmd)
            if target is None or (f not in option_strings(target) and not _nested_has(target, f)):
                bad.append(f"{f} (on verifier {cmd})")
    return bad


def _nested_has(p: argparse.ArgumentParser, flag: str) -> bool:
    return any(flag in option_strings(q) for q in subparsers(p).values())


def render(message: str, hints: Iterable[str], p: argparse.ArgumentParser) -> str:
    """The error line: the message, then the hints that are true for this command's parser."""
    kept = [h for h in hints if not untrue(h, p)]
    return message + (f"; {' or '.join(kept)}" if kept else "")


def check_line(line: str, p: argparse.ArgumentParser, root: argparse.ArgumentParser) -> None:
    """With VERIFIER_CHECK_HINTS set (the test suite sets it), a printed line naming a flag its command lacks is a
    bug, reported loudly instead of misleading a user."""
    bad = untrue(line, p, root)
    if bad:
        print(f"verifier: internal error: message names {', '.join(bad)}, which `{p.prog}` does not have: {line}",
              file=sys.stderr)
        raise SystemExit(1)
