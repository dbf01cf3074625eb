"""The textual application: five views over the project, and the commands it runs."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.css.query import NoMatches
from textual.widgets import DataTable, Footer, RichLog, Static, TabbedContent, TabPane, Tree

from overbrainer.charts.describe import curve_lines, curves_of, trained_on_logits
from overbrainer.charts.series import metrics_path
from overbrainer.charts.terminal import progress_line
from overbrainer.job.layout import MACHINE_FILE
from overbrainer.pipeline.history import HISTORY, execution_lines, read_history
from overbrainer.redact import redact
from overbrainer.runs.store import RunStore
from overbrainer.tui.commands import CommandRunner, Job
from overbrainer.tui.data import (
    Dataset,
    RecordCache,
    answer_text,
    data_key,
    excluded_reason,
    fit_label,
    machine_block,
    read_config,
    read_dataset,
    runs_by_state,
    stage_lines,
    training_line,
)
from overbrainer.tui.dialogs import Confirm, Help

SEEDED_LINES = 20
"""The stage runs of the project's history the Logs view opens with."""
VIEWS = ("project", "dataset", "pipeline", "training", "logs")
LEVELS = ("error", "warning", "info", "debug", "trace")
STAGES = ("subtopics", "questions", "answers", "split")
WORK = (*STAGES, "train", "export", "compare")
"""Commands of which one runs at a time: each takes the project lock, most of them cost."""
MIN_SIZE = (80, 24)
SMALL_HEIGHT = 30
MIN_CHART_ROWS = 3
"""Below this many rows the runs table and the loss chart shrink, so the chart fits."""


def _mtime(path: Path) -> int | None:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return None


def tree_nodes(node: Any) -> list[Any]:
    """Every node under ``node``, in the order of the tree's lines."""
    found = []
    for child in node.children:
        found.append(child)
        found.extend(tree_nodes(child))
    return found


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
        "t  start a run (train, asks)   e  export the run (export, asks)",
        "C  compare the run with the parent (compare --run, asks)",
    ],
    "logs": [
        "f  lowest level shown: error, warning, info, debug, trace",
        "x  export the lines shown to .overbrainer/logs-<time>.log",
    ],
}
GLOBAL_HELP = ["1-5  views   R  reload   ?  this help   q  quit   ctrl+p  commands"]


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
    #tree { overflow-x: hidden; }
    #help { width: 80; height: auto; border: thick $accent; padding: 1 2; background: $panel; }
    Help { align: center middle; }
    #question { width: 64; height: auto; border: thick $error; padding: 1 2; background: $panel; }
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
        Binding("s", "stop_run", "stop"),  # a snapshot stop: the help says so
        Binding("c", "cancel", "cancel"),
        Binding("a", "attach", "attach"),
        Binding("t", "train", "train"),
        Binding("e", "export_run", "export"),
        Binding("C", "compare", "compare"),
        Binding("f", "level", "level"),
        Binding("x", "export", "export"),
    ]
    VIEW_KEYS: ClassVar[dict[str, tuple[str, ...]]] = {
        "dataset": ("delete",),
        "pipeline": ("run_stages", "cancel"),
        "training": ("stop_run", "cancel", "attach", "train", "export_run", "compare"),
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
        self._data_key: Any = None
        self._errors: dict[str, str] = {}
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
                yield RichLog(id="stage-log", max_lines=200, wrap=True)
            with TabPane("4 Training", id="training"), Vertical():
                yield DataTable(id="runs", cursor_type="row")
                yield VerticalScroll(Static(id="curves"))
            with TabPane("5 Logs", id="logs"), Vertical():
                yield Static(id="level")
                yield RichLog(id="log", max_lines=5000, wrap=True)
        # Compact, the palette's key in the help: the training view's keys fit in 80 columns.
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        table = self.query_one("#runs", DataTable)
        table.add_columns("run", "state", "target", "created")
        self.load_all()
        self._show_level()
        self._seed_logs()
        self.set_interval(self.refresh_s, lambda: self._closing_safe(self.refresh_live))
        self._check_size()

    def on_resize(self) -> None:
        self._check_size()
        self.call_after_refresh(self._label_questions)
        self.draw_curves()

    def _check_size(self) -> None:
        small = self.size.width < MIN_SIZE[0] or self.size.height < MIN_SIZE[1]
        self.screen.set_class(small, "too-small")
        self.query_one("#runs").styles.height = self._runs_height

    @property
    def _runs_height(self) -> int:
        return 5 if self.size.height < SMALL_HEIGHT else 8

    # Views and keys.

    @property
    def view(self) -> str:
        return self.query_one(TabbedContent).active

    def action_view(self, name: str) -> None:
        # Focus off the pane left first: TabbedContent brings back the pane that holds the
        # focus, so a view with nothing to focus (Project, Pipeline) never showed.
        self.set_focus(None)
        self.query_one(TabbedContent).active = name

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "view":  # not from behind a dialog
            return self.screen is self.screen_stack[0]
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
        """Read the dataset again and rebuild the tree, the cursor kept on the same item (its
        detail drawn anew) or, when that item is gone, the detail cleared."""
        self._data_key = data_key(self.project_dir)
        self.dataset = read_dataset(self.project_dir)
        tree = self.query_one("#tree", Tree)
        selected = self._item_key(tree.cursor_node.data if tree.cursor_node else None)
        tree.clear()
        tree.show_root = False
        tree.root.expand()
        if self.dataset.problem:
            tree.root.add_leaf(Text(self.dataset.problem, style="red"))
            self.show_detail(None)
            return
        found = None
        for topic in self.dataset.topics:
            topic_node = tree.root.add(Text(topic.name), data=("topic", topic), expand=True)
            for subtopic in topic.subtopics:
                node = topic_node.add(Text(subtopic.name), data=("subtopic", subtopic), expand=True)
                for question in subtopic.questions:
                    node.add_leaf(
                        Text(f"[{question.status}] {question.text}"), data=("question", question)
                    )
        for line, node in enumerate(tree_nodes(tree.root)):  # all expanded: one a line
            if selected is not None and self._item_key(node.data) == selected:
                found = node
                tree.move_cursor_to_line(line)
        self.show_detail(found.data if found is not None else None)
        self.call_after_refresh(self._label_questions)

    @staticmethod
    def _item_key(data: Any) -> tuple[str, str] | None:
        if not data:
            return None
        kind, item = data
        return kind, item.name if kind == "topic" else item.id

    def _label_questions(self) -> None:
        """Each question in the width of the tree, its middle elided when too long, so that
        questions with the same start stay apart."""
        with contextlib.suppress(NoMatches):
            tree = self.query_one("#tree", Tree)
            # the guides of the topic and the subtopic, "[a] " and the cursor's end
            width = tree.scrollable_content_region.width - 2 * tree.guide_depth - 5
            if width <= 0:
                return
            for node in tree_nodes(tree.root):
                if node.data and node.data[0] == "question":
                    question = node.data[1]
                    node.set_label(Text(f"[{question.status}] {fit_label(question.text, width)}"))

    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted[Any]) -> None:
        self.show_detail(event.node.data)

    def show_detail(self, data: Any) -> None:
        try:
            detail = self.query_one("#detail", Static)
        except NoMatches:  # a refresh's highlight while the screen is taken down (quitting)
            return
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
            if item.status == "x" and item.answer is not None:
                status += f" ({excluded_reason(item.answer)})"
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
        widget = self.query_one("#curves", Static)
        run_id = self.selected_run()
        if run_id is None:
            widget.update("no run yet: start one with `overbrainer train`")
            return
        store = RunStore(self.project_dir)
        metrics = metrics_path(store.run_dir(run_id))
        # its state too: a run that stops writes no more metrics, but is no longer running
        state = self.query_one("#runs", DataTable).get_row(run_id)[1]
        key: tuple[object, ...]
        try:
            stat = metrics.stat()
            key = (run_id, state, stat.st_size, stat.st_mtime_ns, self.size)
        except OSError:
            key = (run_id, state, None, None, self.size)
        key += (_mtime(store.run_dir(run_id) / MACHINE_FILE),)
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
            widget.update(Text(f"{head}\nno metrics yet{machine_block(store.run_dir(run_id))}"))
            return
        # The gauges get what the smallest chart leaves, in two lines when that is too few.
        machine = machine_block(store.run_dir(run_id), self._around_chart - MIN_CHART_ROWS)
        # the sparklines' label and range take about 36 columns beside the chart's width
        width = max(min(self.size.width - 36, 100), 20)
        height = self._chart_height(machine.count("\n"))
        kd = trained_on_logits(store.run_dir(run_id))
        body = "\n".join(curve_lines(curves, width, height, kd=kd))
        elapsed = (
            curves.last_time - curves.started
            if curves.last_time is not None
            and curves.started is not None
            and not record.state.ended
            else None
        )
        progress = progress_line(curves.step, curves.max_steps, elapsed)
        widget.update(
            Text(f"{head}\n{progress}\n{body}{machine}", no_wrap=True, overflow="crop")
        )

    @property
    def _around_chart(self) -> int:
        """Rows under the tabs, the runs table and the footer, less the 8 lines drawn
        around the chart."""
        return self.size.height - 3 - self._runs_height - 8

    def _chart_height(self, machine_rows: int) -> int:
        """Rows of the loss chart: what is left once the lines around it and the
        ``machine_rows`` of gauges under it are drawn, 3 to 10."""
        return min(max(self._around_chart - machine_rows, MIN_CHART_ROWS), 10)

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
        """Every ``refresh_s``: runs and curves; the dataset when its files changed (a stat
        of three files); the pipeline while a command runs."""
        self.load_runs()
        if data_key(self.project_dir) != self._data_key:
            self.load_dataset()
        if self.runner.running():
            self.load_pipeline()

    # Commands.

    def run_command(self, name: str, args: list[str]) -> Job:
        self._errors.pop(name, None)
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

    def action_train(self) -> None:
        line = training_line(self.project_dir)
        self._paid("train", ["train"], f"start a training run? {line}; it may cost")

    def action_export_run(self) -> None:
        run_id = self.selected_run()
        if run_id is None:
            self.notify("no run to export", severity="warning")
            return
        self._paid("export", ["export", run_id], f"export run {run_id} to GGUF? it may cost")

    def action_compare(self) -> None:
        run_id = self.selected_run()
        if run_id is None:
            self.notify("no run to compare", severity="warning")
            return
        self._paid(
            "compare",
            ["compare", "--run", run_id],
            f"compare run {run_id} with its parent? it costs",
        )

    def _paid(self, name: str, args: list[str], question: str) -> None:
        """Run a command that may cost (a pod, the parent's tokens) after a ``y``; refused
        while another of `WORK` runs: it would only find the project locked."""
        busy = [job.name for job in self.runner.running() if job.name in WORK]
        if busy:
            self.notify(f"✗ {busy[0]} is running: {name} waits for it to end", severity="warning")
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self.run_command(name, args)

        self.push_screen(Confirm(question), answered)

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
        log = self.query_one("#log", RichLog)
        log.clear()
        for level, text in self.log_entries:
            if self._shown(level):
                log.write(Text(text))

    def action_export(self) -> None:
        """The lines shown, in a new ``.overbrainer/logs-<UTC time>.log``."""
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

    def _seed_logs(self) -> None:
        """The project's last stage runs, from its history: the view tells what happened
        before the TUI opened, not only what it runs."""
        try:
            entries = read_history(self.project_dir)
        except Exception as error:  # noqa: BLE001 - a bad history is a line here, not a crash
            self.add_log("warning", f"cannot read {HISTORY}: {error}")
            return
        if not entries:
            self.add_log("info", "no stage has run here yet: what the TUI runs shows here")
            return
        shown = entries[-SEEDED_LINES:]
        self.add_log("info", f"the last {len(shown)} of {len(entries)} stage runs ({HISTORY}):")
        for line in execution_lines(shown):
            self.add_log("info", f"  {line}")

    def add_log(self, level: str, text: str) -> None:
        level = level if level in LEVELS else "info"
        self.log_entries.append((level, text))
        if self._shown(level):
            with contextlib.suppress(NoMatches):  # not mounted yet: shown on `f`
                self.query_one("#log", RichLog).write(Text(text))

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
        if level == "error":
            self._errors[name] = text
        if name in STAGES:
            self.query_one("#stage-log", RichLog).write(Text(text))

    def _exit_from_thread(self, job: Job, code: int) -> None:
        with contextlib.suppress(RuntimeError):  # the app is gone
            self.call_from_thread(self._closing_safe, self._exited, job, code)

    def _closing_safe(self, call: Callable[..., None], *args: object) -> None:
        """``call``, unless the app is closing: its widgets are gone by then, and a command
        stopped on quit or a last timer tick has nothing left to update."""
        with contextlib.suppress(NoMatches):
            call(*args)

    def _exited(self, job: Job, code: int) -> None:
        self.add_log("info" if code == 0 else "error", f"{job.name}: exited with code {code}")
        if code != 0:  # where the user is, not only in the Logs view
            error = self._errors.pop(job.name, f"exited with code {code}")
            self.notify(f"✗ {error.removeprefix('error: ')}", severity="error", timeout=10)
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
