"""The jinja environment a project's templates render in, and the bounds of one render.

jinja's immutable sandbox keeps a template from code and files (no attribute starting
with ``_``, no method that changes a value, no ``include``); the bounds keep it from this
machine's memory and time, since a project may come from anyone:

- a render makes at most ``MADE_LIMIT`` characters in all (what it outputs, what a loop or
  a macro writes into a captured block, the text ``~``, ``+``, ``*``, ``%`` or a filter
  builds), a prompt at most ``OUTPUT_LIMIT``, no value at most ``OUTPUT_LIMIT`` either;
- it takes at most ``STEP_LIMIT`` loop steps and calls, and ``SECONDS`` of time;
- an integer has at most ``INT_BITS`` bits (``**`` and ``*`` past that are refused).

Each bound is checked before the value is made, never after: a template asking for
``"a" * 10**10`` is refused in microseconds. jinja applies these hooks: intercepted
operators, ``call`` (every call, macros included), ``finalize`` (every ``{{ }}``), each
filter wrapped; the template's tree is rewritten so that each loop step and macro call is
charged its literal text, and ``~`` checked before it joins.
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from typing import Any, NoReturn

import jinja2
import jinja2.sandbox
import jinja2.visitor
from jinja2 import nodes

OUTPUT_LIMIT = 4 << 20
"""The largest prompt a template may render, and the largest value it may make (4 Mi
characters: more than any model reads)."""
MADE_LIMIT = 64 << 20
"""The characters a render may make in all."""
STEP_LIMIT = 1_000_000
"""The loop steps and calls of a render."""
SECONDS = 10.0
"""The longest a render may take."""
INT_BITS = 1 << 16
"""The widest integer a template may make (65,536 bits: about 20,000 digits)."""
TOO_LARGE = f"the prompt would be larger than {OUTPUT_LIMIT >> 20} Mi characters"
VALUE_TOO_LARGE = f"a value larger than {OUTPUT_LIMIT >> 20} Mi characters is not made"

Refused = jinja2.sandbox.SecurityError
"""What a bound raises: a ``TemplateError``, shown as the template's error."""

_CHARGE = "__overbrainer_charge"
_CONCAT = "__overbrainer_concat"
_FORMAT_NUMBER = re.compile(r"\d+")
_WIDTH_FROM_ARGUMENT = re.compile(r"%[^a-zA-Z%]*\*|\{[^{}]*\{")
"""``%*d`` and ``{0:{1}}``: a width given by an argument, which the format string hides."""


class Budget:
    """What one render has made and done so far."""

    def __init__(self) -> None:
        self.made = 0
        self.steps = 0
        self.deadline = time.monotonic() + SECONDS

    def charge(self, made: int = 0, steps: int = 1) -> None:
        """Count ``steps`` and ``made`` characters; refused past a bound."""
        self.made += made
        self.steps += steps
        if self.made > MADE_LIMIT:
            raise Refused(f"the template would make more than {MADE_LIMIT >> 20} Mi characters")
        if self.steps > STEP_LIMIT:
            raise Refused(f"the template takes more than {STEP_LIMIT:,} loop steps and calls")
        if self.steps & 0x3FF == 0 and time.monotonic() > self.deadline:
            raise Refused(f"the template takes longer than {SECONDS:g} s")


_budget: ContextVar[Budget | None] = ContextVar("template_budget", default=None)


def _current() -> Budget:
    # A filter folded while jinja compiles runs outside a render: its own bounds hold.
    return _budget.get() or Budget()


def size(value: Any) -> int:
    """The characters ``value`` holds as text, its items' included (a list of one long
    string repeated is that string many times once printed or joined)."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return 1 + (value.bit_length() * 3 // 10 if isinstance(value, int) else 24)
    if isinstance(value, Mapping):
        return len(value) + sum(size(k) + size(v) for k, v in value.items())
    if isinstance(value, list | tuple | set | frozenset):
        return len(value) + sum(map(size, value))
    return 0


def _made(total: int) -> None:
    """Refuse to make a value of ``total`` characters past ``OUTPUT_LIMIT``; count it."""
    if total > OUTPUT_LIMIT:
        raise Refused(VALUE_TOO_LARGE)
    _current().charge(total, steps=0)


def _int(bits: int) -> None:
    if bits > INT_BITS:
        raise Refused(f"an integer wider than {INT_BITS:,} bits is not computed")


def _formatted(fmt: str, args: Any) -> None:
    """Check a ``%`` or ``format`` format: no width from an argument, and the text it can
    make (its widths written out, its arguments) within bounds."""
    if _WIDTH_FROM_ARGUMENT.search(fmt):
        raise Refused("a width taken from an argument is not computed")
    widths = sum(int(n) if len(n) < 12 else 1 << 40 for n in _FORMAT_NUMBER.findall(fmt))
    _made(len(fmt) + widths + size(args))


def _binop(operator: str, left: Any, right: Any) -> None:
    """Refuse ``left operator right`` when what it makes passes a bound."""
    texts = (str, list, tuple)
    if operator == "*":
        for seq, times in ((left, right), (right, left)):
            if isinstance(seq, texts) and isinstance(times, int):
                _made(size(seq) * max(times, 0))
        if isinstance(left, int) and isinstance(right, int):
            _int(left.bit_length() + right.bit_length())
    elif operator == "**" and isinstance(left, int) and isinstance(right, int):
        if abs(right) > 10_000:
            raise Refused("a power past 10,000 is not computed")
        _int(left.bit_length() * abs(right))
    elif operator == "+" and isinstance(left, texts) and isinstance(right, texts):
        _made(size(left) + size(right))
    elif operator == "%" and isinstance(left, str):
        _formatted(left, right)


def _concat(*parts: Any) -> str:
    """``~``: the parts as text, joined once their sizes are known to be within bounds."""
    texts = [part if isinstance(part, str) else str(_finalized(part)) for part in parts]
    _made(sum(map(len, texts)))
    return "".join(texts)


def _finalized(value: Any) -> Any:
    """Every ``{{ value }}`` output (or captured): its size counted, never past the bound."""
    _made(size(value))
    return value


def _charge(literal: int) -> str:
    """A loop step or a macro call, with the literal text its body writes."""
    _current().charge(literal)
    return ""


_WIDTH_METHODS = frozenset({"center", "ljust", "rjust", "zfill"})


def _method(obj: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Refuse a string method whose result would pass the bounds."""
    # The sandbox hands str.format out wrapped (``functools.wraps``): the method is inside.
    method = getattr(obj, "__wrapped__", obj)
    owner = getattr(method, "__self__", None)
    name = getattr(method, "__name__", "")
    if not isinstance(owner, str):
        return
    if name in _WIDTH_METHODS and args and isinstance(args[0], int):
        _made(len(owner) + args[0])
    elif name == "expandtabs":
        tab = args[0] if args and isinstance(args[0], int) else kwargs.get("tabsize", 8)
        _made(len(owner) + owner.count("\t") * max(tab if isinstance(tab, int) else 8, 0))
    elif name == "replace" and len(args) >= 2:
        _replaced(owner, args[0], args[1])
    elif name == "join" and args:
        items = list(args[0]) if not isinstance(args[0], list | tuple | str) else args[0]
        _made(size(items) + len(owner) * len(items))
    elif name in ("format", "format_map"):
        _formatted(owner, (args, kwargs))


def _replaced(text: Any, old: Any, new: Any) -> None:
    if isinstance(text, str) and isinstance(old, str) and isinstance(new, str):
        count = len(text) + 1 if not old else text.count(old)
        _made(len(text) + count * len(new))


# What a filter's arguments may make, checked before it runs (its result is checked after).
def _pre_center(value: Any, width: Any = 80, *_: Any, **__: Any) -> None:
    if isinstance(width, int):
        _made(size(value) + width)


def _pre_indent(value: Any, width: Any = 4, *_: Any, **__: Any) -> None:
    lines = str(value).count("\n") + 1 if isinstance(value, str) else 1
    each = width if isinstance(width, int) else len(str(width))
    _made(size(value) + lines * max(each, 0))


def _pre_join(value: Any, d: Any = "", *_: Any, **__: Any) -> None:
    if isinstance(value, list | tuple | str):
        _made(size(value) + len(str(d)) * len(value))


def _pre_replace(value: Any, old: Any = "", new: Any = "", *_: Any, **__: Any) -> None:
    _replaced(value, old, new)


def _pre_format(value: Any, *args: Any, **kwargs: Any) -> None:
    if isinstance(value, str):
        _formatted(value, (args, kwargs))


def _pre_wordwrap(value: Any, width: Any = 79, breaks: Any = True, wrapstring: Any = None,
                  *_: Any, **kwargs: Any) -> None:  # fmt: skip
    wrap = kwargs.get("wrapstring", wrapstring)
    _made(size(value) * (1 + len(str(wrap or "\n"))))
    # textwrap cuts a long word a piece at a time, copying the rest each time: quadratic.
    longest = max(map(len, str(value).split()), default=0)
    if longest * longest // max(width if isinstance(width, int) else 1, 1) > 100_000_000:
        raise Refused("a word this long is not wrapped")


def _pre_batch(value: Any, linecount: Any = 1, fill_with: Any = None, *_: Any, **__: Any) -> None:
    if fill_with is not None and isinstance(linecount, int):
        _made(size(value) + linecount * max(size(fill_with), 1))


def _pre_slice(value: Any, slices: Any = 1, *_: Any, **__: Any) -> None:
    if isinstance(slices, int) and slices > jinja2.sandbox.MAX_RANGE:
        raise Refused(f"more than {jinja2.sandbox.MAX_RANGE:,} slices are not made")


def _pre_sum(value: Any, attribute: Any = None, start: Any = 0, *_: Any, **kwargs: Any) -> None:
    if not isinstance(kwargs.get("start", start), int | float):
        raise Refused("only numbers are summed")


_PRE: dict[str, Callable[..., None]] = {
    "center": _pre_center,
    "indent": _pre_indent,
    "join": _pre_join,
    "replace": _pre_replace,
    "format": _pre_format,
    "wordwrap": _pre_wordwrap,
    "batch": _pre_batch,
    "slice": _pre_slice,
    "sum": _pre_sum,
}


def _bounded_filter(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` with a step counted, its arguments checked first (``_PRE``), and its
    result's size after. jinja's ``pass_context``-style marks are kept (``wraps``)."""
    check = _PRE.get(name)
    passed = hasattr(function, "jinja_pass_arg")

    @functools.wraps(function)
    def bounded(*args: Any, **kwargs: Any) -> Any:
        _current().charge()
        value_args = args[1:] if passed else args
        if check is not None and value_args:
            check(*value_args, **kwargs)
        result = function(*args, **kwargs)
        if isinstance(result, str | list | tuple):
            _made(size(result))
        return result

    return bounded


class _NoOtherFiles(jinja2.BaseLoader):
    """What ``include``, ``import`` and ``extends`` load from: nothing."""

    def get_source(self, environment: jinja2.Environment, template: str) -> NoReturn:
        raise jinja2.TemplateNotFound(template, "a template cannot include or import another")


class BoundedEnvironment(jinja2.sandbox.ImmutableSandboxedEnvironment):
    """jinja's immutable sandbox with the bounds of this module."""

    intercepted_binops = frozenset({"*", "**", "+", "%"})

    def __init__(self) -> None:
        # Prompts are plain text sent to a model: there is no HTML to escape.
        super().__init__(
            undefined=jinja2.StrictUndefined,
            keep_trailing_newline=True,
            autoescape=False,
            loader=_NoOtherFiles(),
            finalize=_finalized,
        )
        del self.globals["lipsum"]  # lipsum(10**9): text without end, of no use in a prompt
        self.globals[_CHARGE] = _charge
        self.globals[_CONCAT] = _concat
        self.filters = {name: _bounded_filter(name, f) for name, f in self.filters.items()}

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        _binop(operator, left, right)
        return super().call_binop(context, operator, left, right)

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        _current().charge()
        _method(__obj, args, kwargs)
        result = super().call(__context, __obj, *args, **kwargs)
        if isinstance(result, str | list | tuple):
            _made(size(result))
        return result


class _Charged(jinja2.visitor.NodeTransformer):
    """The tree rewritten: each loop body, macro and call block first charges a step and
    the literal text it writes; ``~`` goes through ``_concat``."""

    def visit_Concat(self, node: nodes.Concat) -> nodes.Node:
        parts = [self.visit(part) for part in node.nodes]
        return nodes.Call(nodes.Name(_CONCAT, "load"), parts, [], None, None, lineno=node.lineno)

    def visit_For(self, node: nodes.For) -> nodes.Node:
        self.generic_visit(node)
        node.body = [_charging(node.body, node.lineno), *node.body]
        return node

    def visit_Macro(self, node: nodes.Macro) -> nodes.Node:
        self.generic_visit(node)
        node.body = [_charging(node.body, node.lineno), *node.body]
        return node

    def visit_CallBlock(self, node: nodes.CallBlock) -> nodes.Node:
        self.generic_visit(node)
        node.body = [_charging(node.body, node.lineno), *node.body]
        return node


def _charging(body: list[nodes.Node], lineno: int) -> nodes.Output:
    literal = sum(
        len(data.data) for child in body for data in child.find_all(nodes.TemplateData)
    ) + sum(len(child.data) for child in body if isinstance(child, nodes.TemplateData))
    call = nodes.Call(nodes.Name(_CHARGE, "load"), [nodes.Const(literal)], [], None, None)
    return nodes.Output([call.set_lineno(lineno)], lineno=lineno)


@functools.cache
def environment() -> BoundedEnvironment:
    """The one environment templates are parsed, checked and compiled in."""
    return BoundedEnvironment()


def compiled(tree: nodes.Template, name: str) -> jinja2.Template:
    """The template of ``tree`` (as ``environment().parse`` gave it) with its charges."""
    env = environment()
    code = env.compile(_Charged().visit(tree), name=name, filename=name)
    return env.template_class.from_code(env, code, env.make_globals(None))


def render(template: jinja2.Template, variables: dict[str, Any]) -> str:
    """``template`` rendered within the bounds (a ``SecurityError`` past one)."""
    token = _budget.set(Budget())
    try:
        return "".join(_parts(template, variables))
    finally:
        _budget.reset(token)


def _parts(template: jinja2.Template, variables: dict[str, Any]) -> Iterator[str]:
    total = 0
    for part in template.generate(**variables):
        total += len(part)
        if total > OUTPUT_LIMIT:
            raise Refused(TOO_LARGE)
        yield part

