"""The textual application: five views over the project, and the commands it runs."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.css.query import NoMatches
from textual.screen import ModalScreen
from textual.widgets import DataTable, Footer, Log, Static, TabbedContent, TabPane, Tree

from overbrainer.tui.commands import CommandRunner, Job
from overbrainer.tui.data import (
    Dataset,
    RecordCache,
    answer_text,
    read_config,
    read_dataset,
    runs_by_state,
    stage_lines,
)

VIEWS = ("project", "dataset", "pipeline", "training", "logs")
LEVELS = ("error", "warning", "info", "debug", "trace")
STAGES = ("subtopics", "questions", "answers", "split")
MIN_SIZE = (80, 24)


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


HELP: dict[str, list[str]] = {
    "project": ["R  reload the configuration and the data"],
    "dataset": [
        "up/down  select      left/right, enter  collapse / expand",
        "d  delete the subtopic or question (asks; it goes to data/rejected.jsonl)",
    ],
    "pipeline": ["r  run subtopics, questions, answers, split", "c  stop the running stage"],
    "training": [
        "up/down  select a run",
        "s  snapshot stop (train stop)   c  cancel (train cancel, asks)",
        "a  attach (train attach): follow it from here",
    ],
    "logs": [
        "f  lowest level shown: error, warning, info, debug, trace",
        "x  export the lines shown to .overbrainer/logs-<time>.log",
    ],
}
GLOBAL_HELP = ["1-5  views   R  reload   ?  this help   q  quit"]


class OverbrainerApp(App[None]):
    """``overbrainer tui``. ``refresh_s``: how often the runs and the pipeline are read
    again (the dataset only while a command of the TUI runs)."""

    TITLE = "overbrainer"
    CSS = """
    #too-small { display: none; height: 100%; content-align: center middle; }
    Screen.too-small #too-small { display: block; }
    Screen.too-small TabbedContent { display: none; }
    .pane-left { width: 1fr; }
    .pane-right { width: 1fr; }
    #runs { height: 8; }
    #help { width: 80; height: auto; border: thick $accent; padding: 1 2; background: $panel; }
    Help { align: center middle; }
    #question { width: 60; height: 5; border: thick $error; padding: 1 2; background: $panel; }
    Confirm { align: center middle; }
    .problem { color: $error; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("1", "view('project')", "Project", show=False),
        Binding("2", "view('dataset')", "Dataset", show=False),
        Binding("3", "view('pipeline')", "Pipeline", show=False),
        Binding("4", "view('training')", "Training", show=False),
        Binding("5", "view('logs')", "Logs", show=False),
        Binding("q", "quit", "quit"),
        Binding("R", "reload", "reload"),
        Binding("question_mark", "help", "help"),
        Binding("d", "delete", "delete"),
        Binding("r", "run_stages", "run stages"),
        Binding("s", "stop_run", "snapshot stop"),
        Binding("c", "cancel", "cancel"),
        Binding("a", "attach", "attach"),
        Binding("f", "level", "level"),
        Binding("x", "export", "export"),
    ]
    VIEW_KEYS: ClassVar[dict[str, tuple[str, ...]]] = {
        "dataset": ("delete",),
        "pipeline": ("run_stages", "cancel"),
        "training": ("stop_run", "cancel", "attach"),
        "logs": ("level", "export"),
    }

    def __init__(
        self,
        project_dir: Path,
        refresh_s: float = 2.0,
        runner: Callable[..., CommandRunner] = CommandRunner,
    ) -> None:
        super().__init__()
        self.project_dir = project_dir
        self.refresh_s = refresh_s
        self.runner = runner(project_dir, self._line_from_thread, self._exit_from_thread)
        self.log_entries: list[tuple[str, str]] = []
        self.level = "info"
        self.dataset = Dataset()
        self.chain: list[str] = []
        self.chain_done: list[str] = []
        self._run_ids: list[str] = []
        self._chart_key: Any = None
        self.records = RecordCache(project_dir)

    # Layout.

    def compose(self) -> ComposeResult:
        yield Static(f"terminal too small: {MIN_SIZE[0]}x{MIN_SIZE[1]} at least", id="too-small")
        with TabbedContent(initial="project"):
            with TabPane("1 Project", id="project"), Horizontal():
                yield VerticalScroll(Static(id="config"), classes="pane-left")
                yield VerticalScroll(Static(id="summary"), classes="pane-right")
            with TabPane("2 Dataset", id="dataset"), Horizontal():
                yield Tree("dataset", id="tree", classes="pane-left")
                yield VerticalScroll(Static(id="detail"), classes="pane-right")
            with TabPane("3 Pipeline", id="pipeline"), Vertical():
                yield Static(id="chain")
                yield Static(id="stages")
                yield Log(id="stage-log", max_lines=200)
            with TabPane("4 Training", id="training"), Vertical():
                yield DataTable(id="runs", cursor_type="row")
                yield VerticalScroll(Static(id="curves"))
            with TabPane("5 Logs", id="logs"), Vertical():
                yield Static(id="level")
                yield Log(id="log", max_lines=5000)
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#runs", DataTable)
        table.add_columns("run", "state", "target", "created")
        self.load_all()
        self._show_level()
        self.set_interval(self.refresh_s, self.refresh_live)
        self._check_size()

    def on_resize(self) -> None:
        self._check_size()

    def _check_size(self) -> None:
        small = self.size.width < MIN_SIZE[0] or self.size.height < MIN_SIZE[1]
        self.screen.set_class(small, "too-small")

    # Views and keys.

    @property
    def view(self) -> str:
        return self.query_one(TabbedContent).active

    def action_view(self, name: str) -> None:
        self.query_one(TabbedContent).active = name

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        views = [view for view, actions in self.VIEW_KEYS.items() if action in actions]
        return not views or self.view in views

    FOCUS: ClassVar[dict[str, str]] = {"dataset": "#tree", "training": "#runs", "logs": "#log"}

    def on_tabbed_content_tab_activated(self) -> None:
        focus = self.FOCUS.get(self.view)
        if focus is not None:
            self.query_one(focus).focus()
        self.refresh_bindings()

    def action_help(self) -> None:
        self.push_screen(Help([f"{self.view} view", *HELP.get(self.view, []), "", *GLOBAL_HELP]))

    def action_reload(self) -> None:
        self.load_all()
        self.notify("reloaded", timeout=3)

    # Reading.

    def load_all(self) -> None:
        self.load_project()
        self.load_dataset()
        self.load_runs()
        self.load_pipeline()

    def load_project(self) -> None:
        config = read_config(self.project_dir)
        if config.problems:
            text = Text("overbrainer.toml cannot be used:\n", style="bold red")
            for problem in config.problems:
                text.append(f"✗ {problem}\n", style="red")
        else:
            text = Text("\n".join(config.lines))
        self.query_one("#config", Static).update(text)
        from overbrainer.runs.store import RunStore

        lines = ["cost and tokens by stage", *stage_lines(self.project_dir), ""]
        counts = self.dataset.counts or read_dataset(self.project_dir).counts
        if counts:
            lines.append(
                "dataset: {subtopics} subtopics, {questions} questions, {answers} answers "
                "({excluded} excluded); split {train} train, {eval} eval".format(**counts)
            )
        try:
            records = RunStore(self.project_dir).list()
        except Exception as error:  # noqa: BLE001 - shown, never fatal
            records = []
            lines.append(f"runs: {error}")
        lines.append(f"runs: {runs_by_state(records)}")
        self.query_one("#summary", Static).update(Text("\n".join(lines)))

    def load_dataset(self) -> None:
        self.dataset = read_dataset(self.project_dir)
        tree = self.query_one("#tree", Tree)
        tree.clear()
        tree.show_root = False
        tree.root.expand()
        if self.dataset.problem:
            tree.root.add_leaf(Text(self.dataset.problem, style="red"))
            return
        for topic in self.dataset.topics:
            topic_node = tree.root.add(Text(topic.name), data=("topic", topic), expand=True)
            for subtopic in topic.subtopics:
                node = topic_node.add(Text(subtopic.name), data=("subtopic", subtopic), expand=True)
                for question in subtopic.questions:
                    node.add_leaf(
                        Text(f"[{question.status}] {question.text}"), data=("question", question)
                    )

    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted[Any]) -> None:
        data = event.node.data
        detail = self.query_one("#detail", Static)
        if not data:
            detail.update("")
            return
        kind, item = data
        if kind == "topic":
            detail.update(Text(f"topic {item.name}\n{len(item.subtopics)} subtopics"))
        elif kind == "subtopic":
            detail.update(
                Text(
                    f"subtopic {item.name}\nid {item.id}\n{len(item.questions)} questions\n\n"
                    "d: delete it with its questions and answers"
                )
            )
        else:
            status = {"a": "answered", "x": "excluded", " ": "unanswered"}[item.status]
            text = Text(f"{item.text}\n\nid {item.id}\nstatus {status}\n")
            if item.answer is not None:
                meta = item.answer.get("meta", {})
                text.append(
                    f"model {meta.get('model')}, tokens {meta.get('input_tokens')} in, "
                    f"{meta.get('output_tokens')} out\n"
                )
                reasoning, content = answer_text(item.answer)
                text.append(f"── reasoning ──\n{reasoning}\n── answer ──\n{content}\n")
            text.append("\nd: delete it with its answer")
            detail.update(text)

    def load_runs(self) -> None:
        table = self.query_one("#runs", DataTable)
        try:
            records = self.records.records()
        except Exception:  # noqa: BLE001 - a broken runs/ is shown in Project
            records = []
        rows = [(r.id, r.state.value, r.target, r.created) for r in records]
        ids = [row[0] for row in rows]
        if ids != self._run_ids or any(
            table.get_row(run_id)[1] != row[1] for run_id, row in zip(ids, rows, strict=True)
        ):
            selected = self.selected_run()
            table.clear()
            for row in rows:
                table.add_row(*row, key=row[0])
            self._run_ids = ids
            if selected in ids:
                table.move_cursor(row=ids.index(selected))
            elif ids:
                table.move_cursor(row=len(ids) - 1)
        self.draw_curves()

    def selected_run(self) -> str | None:
        table = self.query_one("#runs", DataTable)
        if not self._run_ids or table.cursor_row is None:
            return None
        index = min(max(table.cursor_row, 0), len(self._run_ids) - 1)
        return self._run_ids[index]

    def on_data_table_row_highlighted(self) -> None:
        self.draw_curves()

    def draw_curves(self) -> None:
        from overbrainer.charts.describe import curve_lines, curves_of
        from overbrainer.charts.series import metrics_path
        from overbrainer.charts.terminal import progress_line
        from overbrainer.runs.store import RunStore

        widget = self.query_one("#curves", Static)
        run_id = self.selected_run()
        if run_id is None:
            widget.update("no run yet: start one with `overbrainer train`")
            return
        store = RunStore(self.project_dir)
        metrics = metrics_path(store.run_dir(run_id))
        key: tuple[str, int | None, int | None, int]
        try:
            stat = metrics.stat()
            key = (run_id, stat.st_size, stat.st_mtime_ns, self.size.width)
        except OSError:
            key = (run_id, None, None, self.size.width)
        if key == self._chart_key:
            return  # nothing new: no redraw, no CPU
        self._chart_key = key
        try:
            record = store.load(run_id)
        except Exception as error:  # noqa: BLE001 - shown
            widget.update(Text(str(error)))
            return
        curves = curves_of(store, record)
        following = [j for j in self.runner.running("attach") if run_id in j.args]
        head = f"{'● ' if following else ''}{run_id}  {record.state.value}"
        if curves is None:
            widget.update(Text(f"{head}\nno metrics yet"))
            return
        width = max(min(self.size.width - 20, 100), 20)
        body = "\n".join(curve_lines(curves, width))
        elapsed = (
            curves.last_time - curves.started
            if curves.last_time is not None
            and curves.started is not None
            and not record.state.ended
            else None
        )
        progress = progress_line(curves.step, curves.max_steps, elapsed)
        widget.update(Text(f"{head}\n{progress}\n{body}"))

    def load_pipeline(self) -> None:
        self.query_one("#stages", Static).update(
            Text("\n".join(["cost and tokens by stage", *stage_lines(self.project_dir)]))
        )
        marks = []
        for stage in STAGES:
            if stage in self.chain_done:
                marks.append(f"{stage} ✓")
            elif self.runner.running(stage):
                marks.append(f"{stage} ●")
            else:
                marks.append(stage)
        self.query_one("#chain", Static).update(
            "run  " + " → ".join(marks) + "    r: run the stages   c: cancel"
        )

    def refresh_live(self) -> None:
        """Every ``refresh_s``: runs and curves; the rest only while a command runs."""
        self.load_runs()
        if self.runner.running():
            self.load_pipeline()
            if self.view == "dataset":
                self.load_dataset()

    # Commands.

    def run_command(self, name: str, args: list[str]) -> Job:
        self._line(name, "info", f"$ overbrainer {' '.join(args)}")
        return self.runner.start(name, args)

    def action_delete(self) -> None:
        node = self.query_one("#tree", Tree).cursor_node
        if node is None or not node.data or node.data[0] == "topic":
            self.notify("select a subtopic or a question", severity="warning")
            return
        kind, item = node.data
        what = (
            f"subtopic {item.name!r} with its questions and answers"
            if kind == "subtopic"
            else "this question and its answer"
        )

        def answered(yes: bool | None) -> None:
            if yes:
                self.run_command("dataset", ["dataset", "rm", item.id])

        self.push_screen(Confirm(f"delete {what}?", destructive=True), answered)

    def action_run_stages(self) -> None:
        if self.runner.running():
            self.notify("a command is running", severity="warning")
            return
        self.chain = list(STAGES)
        self.chain_done = []
        self._next_stage()

    def _next_stage(self) -> None:
        if self.chain:
            stage = self.chain.pop(0)
            self.run_command(stage, [stage])
        self.load_pipeline()

    def action_stop_run(self) -> None:
        run_id = self.selected_run()
        if run_id:
            self.run_command("stop", ["train", "stop", run_id])

    def action_attach(self) -> None:
        run_id = self.selected_run()
        if run_id and not self.runner.running("attach"):
            self.run_command("attach", ["train", "attach", run_id])

    def action_cancel(self) -> None:
        if self.view == "pipeline":
            jobs = [job for job in self.runner.running() if job.name in STAGES]
            if jobs:
                self.chain = []
                self.runner.stop_all()
            return
        run_id = self.selected_run()
        if run_id is None:
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self.run_command("cancel", ["train", "cancel", run_id])

        self.push_screen(Confirm(f"cancel run {run_id}?", destructive=True), answered)

    # Logs.

    def action_level(self) -> None:
        self.level = LEVELS[(LEVELS.index(self.level) + 1) % len(LEVELS)]
        self._show_level()
        log = self.query_one("#log", Log)
        log.clear()
        for level, text in self.log_entries:
            if self._shown(level):
                log.write_line(text)

    def action_export(self) -> None:
        """The lines shown, in a new ``.overbrainer/logs-<UTC time>.log``."""
        from datetime import UTC, datetime

        from overbrainer.redact import redact

        name = f"logs-{datetime.now(UTC):%Y%m%dT%H%M%SZ}.log"
        path = self.project_dir / ".overbrainer" / name
        text = "".join(f"{redact(t)}\n" for level, t in self.log_entries if self._shown(level))
        try:
            path.parent.mkdir(exist_ok=True)
            with path.open("x", encoding="utf-8") as file:
                file.write(text)
        except OSError as error:
            self.notify(f"✗ cannot export the logs: {error.strerror or error}", severity="error")
            return
        self.notify(f"✓ logs exported to .overbrainer/{name}", timeout=10)

    def _show_level(self) -> None:
        self.query_one("#level", Static).update(f"level {self.level} and above   f: change")

    def _shown(self, level: str) -> bool:
        return LEVELS.index(level) <= LEVELS.index(self.level)

    def add_log(self, level: str, text: str) -> None:
        level = level if level in LEVELS else "info"
        self.log_entries.append((level, text))
        if self._shown(level):
            with contextlib.suppress(NoMatches):  # not mounted yet: shown on `f`
                self.query_one("#log", Log).write_line(text)

    def log_sink(self, level: str, text: str) -> None:
        """Where the TUI's own log lines go, from whichever thread logs them."""
        if self._thread_id == threading.get_ident() or not self.is_running:
            self.add_log(level, text)
        else:
            with contextlib.suppress(RuntimeError):
                self.call_from_thread(self.add_log, level, text)

    def _line_from_thread(self, name: str, level: str, text: str) -> None:
        self.call_from_thread(self._line, name, level, text)

    def _line(self, name: str, level: str, text: str) -> None:
        self.add_log(level, text)
        if name in STAGES:
            self.query_one("#stage-log", Log).write_line(text)

    def _exit_from_thread(self, job: Job, code: int) -> None:
        with contextlib.suppress(RuntimeError):  # the app is gone
            self.call_from_thread(self._exited, job, code)

    def _exited(self, job: Job, code: int) -> None:
        self.add_log("info" if code == 0 else "error", f"{job.name}: exited with code {code}")
        if job.name in STAGES:
            if code == 0:
                self.chain_done.append(job.name)
                self._next_stage()
            else:
                self.chain = []
                self.load_pipeline()
        if job.name == "dataset":
            self.load_dataset()
            self.load_project()
        self.load_runs()

    async def action_quit(self) -> None:
        self.runner.stop_all()
        self.exit()
