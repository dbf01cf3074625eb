"""The TUI's dialogs: a yes/no question before an action, and the keys of a view."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import ModalScreen
from textual.widgets import Static


class Confirm(ModalScreen[bool]):
    """A yes/no question; anything but ``y`` answers no."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "yes"),
        Binding("n,escape,enter", "answer(False)", "no"),
    ]

    def __init__(self, question: str, destructive: bool = False) -> None:
        super().__init__()
        self.question = question
        self.destructive = destructive

    def compose(self) -> ComposeResult:
        style = "bold red" if self.destructive else "bold"
        yield Static(Text.assemble((self.question, style), "  [y/N]"), id="question")

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)


class Help(ModalScreen[None]):
    """The keys of the view the TUI is on."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,question_mark,q", "close", "close")]

    def __init__(self, lines: list[str]) -> None:
        super().__init__()
        self.lines = lines

    def compose(self) -> ComposeResult:
        yield Static(Text("\n".join(self.lines)), id="help")

    def action_close(self) -> None:
        self.dismiss(None)
