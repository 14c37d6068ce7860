"""Jinja's immutable sandbox with bounded work, for templates read back from a cache file (suites/lm_eval_compiled.py).

The sandbox keeps a template away from Python's internals, not from work: `{% for i in range(100000) %}{% for j in
range(100000) %}...` runs 10**10 steps, `'x' * 10**9` allocates a gigabyte. A worker process per render (what a
server-supplied chat template gets, verifier/wire/dualpath.py) would cost more than the gsm8k run it serves, so the
bounds are counted inside the render instead:
- loop steps: every `{% for %}` draws its items through a counter, and `range()` is charged its length when called
  (so `range(100000)|join` counts too); nested loops multiply into one budget of MAX_STEPS per render;
- output: the rendered text is cut off at MAX_CHARS, checked as it is generated;
- amplifiers: `*`, `%` and `**` on their operands, and the filters and string methods that pad or repeat
  (`center`, `indent`, `ljust`, `rjust`, `zfill`, `expandtabs`, `replace`, `join`, `format`) are refused when their
  result would exceed MAX_CHARS.
Over any bound, rendering raises `TemplateBudget`, a one-line usage error naming the bound. The budget is per
thread (each render in one thread at a time), reset at the start of each render.
"""

from __future__ import annotations

import re
import threading
from typing import Any, Callable

from jinja2 import nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

from verifier.errors import UsageError

MAX_STEPS = 100_000
"""Loop items (and range() lengths) per render: lm-eval's templates loop over a doc's few choices, if at all."""
MAX_CHARS = 4 * 2**20
"""Characters of rendered text, and of any one string an operator, filter or method makes: a compiled task file is
at most 4 MiB (lm_eval_compiled.MAX_FILE), and a prompt longer than that is no gsm8k prompt."""
MAX_EXPONENT = 4096
"""`a ** b` for |b| above this is refused: an integer of more digits than Python converts to text anyway."""
_STEP_NAME = "verifier_counted_steps"
"""The global every for-loop's items are drawn through (a name no lm-eval template uses)."""
_PERCENT_WIDTH = re.compile(r"%[-+ #0]*(?:\*|\d{5,})|%[-+ #0]*\d*\.(?:\*|\d{5,})")
"""A %-format field of a width or precision of 5+ digits (or `*`): `'%999999999d' % 1` allocates a gigabyte."""


class TemplateBudget(UsageError):
    """A template that renders past a bound of this module."""


class _Budget(threading.local):
    steps = 0


_BUDGET = _Budget()


def _spend(n: int) -> None:
    _BUDGET.steps += n
    if _BUDGET.steps > MAX_STEPS:
        raise TemplateBudget(f"a cached template takes more than {MAX_STEPS} loop steps to render (an edited cache file? "
                             "remove it from $VERIFIER_CACHE_DIR to compile it again)")


def _too_long(what: str) -> TemplateBudget:
    return TemplateBudget(f"a cached template makes {what} longer than {MAX_CHARS} characters (an edited cache file? "
                          "remove it from $VERIFIER_CACHE_DIR to compile it again)")


def _counted(iterable: Any) -> Any:
    """A loop's items, each charged one step."""
    for item in iterable:
        _spend(1)
        yield item


def _range(*args: int) -> range:
    r = range(*args)
    _spend(len(r))
    return r


def _size(x: Any) -> int:
    return len(x) if isinstance(x, (str, list, tuple)) else 0


def _check_binop(op: str, left: Any, right: Any) -> None:
    if op == "*":
        if isinstance(right, int) and _size(left) * right > MAX_CHARS or isinstance(left, int) and _size(right) * left > MAX_CHARS:
            raise _too_long("a repetition")
    elif op == "**":
        if isinstance(right, (int, float)) and abs(right) > MAX_EXPONENT:
            raise TemplateBudget(f"a cached template raises to a power above {MAX_EXPONENT}")
    elif op == "%" and isinstance(left, str) and _PERCENT_WIDTH.search(left):
        raise _too_long("a %-format field")


_PADDING = {"center", "ljust", "rjust", "zfill", "expandtabs"}
"""str methods whose first argument is the length (or tab size) of what they return."""


def _check_call(obj: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    owner = getattr(obj, "__self__", None)
    name = getattr(obj, "__name__", "")
    if not isinstance(owner, str):
        return
    if name in _PADDING and args and isinstance(args[0], int) and args[0] * (len(owner) if name == "expandtabs" else 1) > MAX_CHARS:
        raise _too_long(f"a str.{name}")
    if name == "replace" and len(args) >= 2 and isinstance(args[0], str) and isinstance(args[1], str):
        if (owner.count(args[0]) if args[0] else len(owner) + 1) * len(args[1]) > MAX_CHARS:
            raise _too_long("a str.replace")
    if name == "join" and args and _size(owner) * max(0, _items(args[0]) - 1) > MAX_CHARS:
        raise _too_long("a str.join")


def _items(x: Any) -> int:
    return len(x) if hasattr(x, "__len__") else 0


def _bounded_filter(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """A padding or repeating filter whose result is checked before it is made (its width or its pieces)."""

    def bounded(*args: Any, **kwargs: Any) -> Any:
        # Filters that take the environment or eval context get it first; the value is the first str/list after it.
        values = [a for a in args if not hasattr(a, "filters") and not hasattr(a, "environment")]
        value = values[0] if values else None
        if name in ("center", "indent"):
            width = values[1] if len(values) > 1 else kwargs.get("width", 4 if name == "indent" else 80)
            if isinstance(width, int) and width * max(1, str(value).count("\n") + 1) > MAX_CHARS:
                raise _too_long(f"the {name} filter's result")
        elif name == "replace" and len(values) >= 3 and isinstance(values[1], str) and isinstance(values[2], str):
            text = str(value)
            if (text.count(values[1]) if values[1] else len(text) + 1) * len(values[2]) > MAX_CHARS:
                raise _too_long("the replace filter's result")
        elif name == "join":
            items = list(value) if value is not None else []
            sep = values[1] if len(values) > 1 and isinstance(values[1], str) else kwargs.get("d", "")
            if len(sep) * max(0, len(items) - 1) + sum(len(str(i)) for i in items) > MAX_CHARS:
                raise _too_long("the join filter's result")
            args = tuple(items if a is value else a for a in args)
        elif name == "format" and isinstance(value, str) and _PERCENT_WIDTH.search(value):
            raise _too_long("the format filter's result")
        return fn(*args, **kwargs)

    for attr in ("jinja_pass_arg",):  # keep how Jinja calls it (environment / context first)
        if hasattr(fn, attr):
            setattr(bounded, attr, getattr(fn, attr))
    return bounded


class BoundedSandbox(ImmutableSandboxedEnvironment):
    """The immutable sandbox, with the bounds of this module's doc. Compile with `template`, render with `render`
    (which resets the budget)."""

    intercepted_binops = frozenset({"*", "%", "**"})

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.globals["range"] = _range
        self.globals[_STEP_NAME] = _counted
        for name in ("center", "indent", "replace", "join", "format"):
            if name in self.filters:
                self.filters[name] = _bounded_filter(name, self.filters[name])

    def call_binop(self, context: Any, operator_: str, left: Any, right: Any) -> Any:
        _check_binop(operator_, left, right)
        return super().call_binop(context, operator_, left, right)

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805 - Jinja's signature
        _check_call(__obj, args, kwargs)
        return super().call(__context, __obj, *args, **kwargs)

    def template(self, source: str) -> Any:
        """`from_string(source)`, with every for-loop's items drawn through the step counter (its syntax tree is
        changed before it is compiled: `{% for x in xs %}` iterates `verifier_counted_steps(xs)`)."""
        tree = self.parse(source)
        for loop in tree.find_all(nodes.For):
            loop.iter = nodes.Call(nodes.Name(_STEP_NAME, "load"), [loop.iter], [], None, None)
        return self.from_string(tree)


def render(template: Any, **values: Any) -> str:
    """`template.render(**values)` within the budget: steps reset, output cut at MAX_CHARS as it is generated."""
    _BUDGET.steps = 0
    out: list[str] = []
    size = 0
    for piece in template.generate(**values):
        size += len(piece)
        if size > MAX_CHARS:
            raise _too_long("its output")
        out.append(piece)
    return "".join(out)

