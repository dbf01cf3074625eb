"""``[pipeline] select = "agree"``: of a question's answers, keep those whose final result
is the one most of them reach (self-consistency); the others are likely wrong.

An answer's final result is, by the first rule that finds one: the last ``\\boxed{…}``; the
last "answer is X" / "answer: X" where X is a number or a choice letter (A to J, a
capital, in brackets or ending its line); the last
fenced code block (its lines, each stripped, blank ones dropped). A number is compared by
value (``1,000``, ``1000.0`` and ``$1000`` agree). An answer with none of these has no
checkable result: it is kept, as is every answer of a question where no result is more
common than every other (a tie: nothing to vote off).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

_BOXED = re.compile(r"\\boxed\{((?:[^{}]|\{[^{}]*\})*)\}")
_STATED = re.compile(
    # a letter in capitals, in brackets or ending its line ("the answer is a borrow" is no
    # choice), or a number
    r"(?i:answer)\s*(?:is|:)\s*[*_]*\s*"
    r"(?:\(([A-J])\)|([A-J])(?=[.)*_]*[ \t]*$)|\$?(-?[\d,]*\.?\d+))",
    re.MULTILINE,
)
_FENCE = re.compile(r"```[^\n`]*\n(.*?)```", re.DOTALL)
_NUMBER = re.compile(r"-?\$?[\d,]*\.?\d+%?")


def final_result(text: str) -> str | None:
    """The checkable result ``text`` ends on, normalised (module docstring), or None."""
    boxed = _BOXED.findall(text)
    if boxed:
        return _normal(boxed[-1])
    stated = _STATED.findall(text)
    if stated:
        return _normal("".join(stated[-1]))
    fenced = _FENCE.findall(text)
    if fenced:
        lines = (line.strip() for line in fenced[-1].splitlines())
        return "code:" + "\n".join(line for line in lines if line)
    return None


def _normal(value: str) -> str:
    """A number by its value, a letter in capitals, any other text without spaces."""
    value = value.strip()
    if _NUMBER.fullmatch(value):
        digits = value.replace(",", "").replace("$", "").rstrip("%")
        try:
            number = float(digits)
        except ValueError:
            return value
        return str(int(number)) if number.is_integer() else repr(number)
    if len(value) == 1:
        return value.upper()
    return "".join(value.split())


def majority(results: Sequence[str | None]) -> str | None:
    """The result more of ``results`` reach than any other, or None (a tie, or no result)."""
    counts = Counter(result for result in results if result is not None).most_common(2)
    if not counts or (len(counts) == 2 and counts[0][1] == counts[1][1]):
        return None
    return counts[0][0]


def disagreeing(results: Sequence[str | None]) -> tuple[str | None, list[int]]:
    """The majority's result, and the positions of the results that reach another one."""
    found = majority(results)
    if found is None:
        return None, []
    return found, [i for i, result in enumerate(results) if result not in (None, found)]
