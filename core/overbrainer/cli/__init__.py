"""The ``overbrainer`` command line.

Subcommands live one group a module and are imported only when used, so ``overbrainer
--help`` costs little more than click itself.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

import click

from overbrainer import __version__

if TYPE_CHECKING:
    from types import FrameType

    from overbrainer.cli.context import App

COMMANDS = {
    "init": "overbrainer.cli.init:init",
    "config": "overbrainer.cli.config:config",
    "completion": "overbrainer.cli.completion:completion",
    "runs": "overbrainer.cli.runs:runs",
    "plugins": "overbrainer.cli.plugins:plugins",
    "providers": "overbrainer.cli.providers:providers",
    "subtopics": "overbrainer.cli.stages:subtopics",
    "questions": "overbrainer.cli.stages:questions",
    "answers": "overbrainer.cli.stages:answers",
    "batches": "overbrainer.cli.batches:batches",
    "split": "overbrainer.cli.stages:split",
    "run": "overbrainer.cli.run:run",
    "plan": "overbrainer.cli.plan:plan",
    "train": "overbrainer.cli.train:train",
    "watch": "overbrainer.cli.watch:watch",
    "history": "overbrainer.cli.history:history",
    "log": "overbrainer.cli.log:log",
    "migrate": "overbrainer.cli.migrate:migrate",
    "dataset": "overbrainer.cli.dataset:dataset",
    "tui": "overbrainer.cli.tui:tui",
    "export": "overbrainer.cli.export:export",
    "push": "overbrainer.cli.push:push",
    "compare": "overbrainer.cli.compare:compare",
    "serve": "overbrainer.cli.serve:serve",
}


SUMMARIES = {
    "init": "Create a project: overbrainer.toml, .env.example and the prompt templates.",
    "config": "Inspect the configuration.",
    "completion": "Print the completion script of SHELL: commands, options, run ids and topics.",
    "runs": "List training runs and read their logs.",
    "plugins": "List the installed overbrainer plugins.",
    "providers": "Try the providers the roles use.",
    "subtopics": "Ask the generator for the subtopics each topic is missing.",
    "questions": "Ask the generator for the questions each subtopic is missing.",
    "answers": "Ask the parent to answer every question that has no answer yet.",
    "batches": "List the project's batches: live and past, with their provider's progress.",
    "split": "Split the usable answers into data/train.jsonl and data/eval.jsonl.",
    "run": "Run subtopics, questions, answers and split, then train when [training] exists.",
    "plan": "What each stage still to run, training, export and compare will cost.",
    "train": "Fine-tune the child model on a target and follow the run.",
    "watch": "Run the stages and training now, then again after each change.",
    "history": "Runs, items, tokens and cost per stage, and their total.",
    "log": "Show the prompts and replies of the last stages, newest last.",
    "migrate": "Bring the project's files to the format this overbrainer writes.",
    "dataset": "Import your own data, or change the dataset by hand.",
    "tui": "Browse the project, its dataset, pipeline, runs and logs in a terminal UI.",
    "export": "Export RUN_ID's model to a GGUF file and an Ollama Modelfile, on its target.",
    "push": "Push RUN_ID's output/ (and its GGUF) to the Hugging Face Hub with a model card.",
    "compare": "Compare the child (its GGUF, served on the run's target) with its parent.",
    "serve": "Keep a served provider up across commands, end it, or see what is up.",
}
"""The first paragraph of each command's help, so ``--help`` lists the commands without
importing them (a test holds these equal to the commands' own)."""

DEFERRED_LOGGING = frozenset({"runs"})
"""Groups that configure logging themselves: ``runs ls`` lists without importing loguru
(a quarter of its start-up) unless it warns."""

STARTING_IN_STAGE = frozenset({"subtopics", "questions", "answers"})
"""Commands whose start-up goes on into their stage (aiohttp, the stage's module): the
garbage collector stays held until the stage's requests begin (see ``collector``)."""


class CliError(click.ClickException):
    """A user error as the command line prints it: ``error: <message>``, exit 1."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code  # type: ignore[misc]  # click declares it on the class

    def show(self, file: Any = None) -> None:
        from overbrainer.redact import escape_controls, redact

        # A message may quote what a server said, which can hold a secret, or a name
        # from a file, which can hold terminal escapes.
        message = escape_controls(redact(self.format_message()), keep="\n")
        click.echo(f"error: {message}", err=True)


PROJECT_DIR_FLAGS = ("-C", "--project-dir")


def hoist_project_dir(args: list[str]) -> list[str]:
    """``args`` with ``-C DIR`` (or ``--project-dir``) moved first, wherever it was: the
    reference tool takes it after the subcommand too (``overbrainer history -C x``)."""
    front: list[str] = []
    rest: list[str] = []
    index = 0
    while index < len(args):
        arg = args[index]
        if arg == "--":
            rest += args[index:]
            break
        if arg in PROJECT_DIR_FLAGS and index + 1 < len(args):
            front += args[index : index + 2]
            index += 2
            continue
        if arg.startswith("--project-dir=") or (arg.startswith("-C") and len(arg) > 2):
            front.append(arg)
        else:
            rest.append(arg)
        index += 1
    return front + rest


class LazyGroup(click.Group):
    """A group whose subcommands are imported on first use, turning user errors into
    ``error: …`` lines."""

    def __init__(self, *args: Any, lazy: dict[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = lazy or {}

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if ctx.parent is None:
            args = hoist_project_dir(args)
        return super().parse_args(ctx, args)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """As click lists them, with the summaries of commands not imported yet."""
        names = self.list_commands(ctx)
        if not names:
            return
        extra: dict[str, str] = {}
        if ctx.parent is None:  # the plugins' commands, as the last load of them left them
            from overbrainer.plugincmds import remembered

            extra = {k: v for k, v in remembered().items() if k not in names}
            names = sorted([*names, *extra])
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows = []
        for name in names:
            if name in extra or (
                name in self.lazy and name not in self.commands and name in SUMMARIES
            ):
                summary = click.Command(name, help=extra.get(name) or SUMMARIES[name])
                rows.append((name, summary.get_short_help_str(limit)))
                continue
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy and cmd_name not in self.commands:
            module, _, attr = self.lazy[cmd_name].partition(":")
            self.add_command(getattr(importlib.import_module(module), attr), cmd_name)
        found = super().get_command(ctx, cmd_name)
        if found is None and ctx.parent is None:
            found = self._plugin_commands(ctx).get(cmd_name)
        return found

    def _plugin_commands(self, ctx: click.Context) -> dict[str, click.Command]:
        """The commands plugins add (``register_commands``), loaded only for a name the
        core does not know: ``--help`` stays free of plugins. They are not kept on the
        group, which outlives one command in a process that runs several. The plugins are
        the project's (its ``.env`` may choose them, as for every other command), and the
        command goes on with the same ones."""
        app = _app(ctx)
        ctx.meta[_APP] = app
        found: dict[str, click.Command] = {}

        def register(command: object) -> None:
            if not isinstance(command, click.Command):
                raise TypeError(f"register_commands takes a click command, not {command!r}")
            if command.name and command.name not in self.commands and command.name not in self.lazy:
                found.setdefault(command.name, command)

        app.plugins.hook.register_commands(register=register)
        return found

    def invoke(self, ctx: click.Context) -> Any:
        from overbrainer.errors import DetachedRun, Stopped, TransientError, UserError, signal_of

        try:
            return super().invoke(ctx)
        except DetachedRun as detached:
            from overbrainer.redact import escape_controls

            click.echo(escape_controls(detached.message))
            ctx.exit(0)
        except Stopped as stopped:
            from overbrainer.redact import escape_controls, redact

            click.echo(escape_controls(redact(stopped.message), keep="\n"), err=True)
            ctx.exit(stopped.exit_code)
        except UserError as error:
            raise CliError(error.message, error.exit_code) from None
        except TransientError as error:  # a plugin's: a busy scheduler, a dropped link
            raise CliError(f"{error} (it may pass: try again)", 1) from None
        except KeyboardInterrupt as interrupt:
            # Ctrl-C or SIGTERM that no step handled: 130 or 143, as a shell reports them.
            raise CliError("interrupted", 128 + signal_of(interrupt)) from None


@click.group(
    cls=LazyGroup,
    lazy=COMMANDS,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.option(
    "-C",
    "--project-dir",
    type=click.Path(file_okay=False),  # a str: pathlib is imported by commands, not --help
    default=".",
    show_default=True,
    help="The project directory.",
)
@click.version_option(__version__, "-V", "--version", prog_name="overbrainer")
@click.pass_context
def cli(ctx: click.Context, project_dir: str) -> None:
    """Distill a large parent LLM into a small open-weights child model.

    Topics become subtopics, questions, and the parent's answers with their reasoning;
    the answers are split into train and eval sets and a child model is fine-tuned with
    Axolotl on a target: this machine, a machine over SSH, or a Runpod GPU pod.
    """
    from overbrainer.errors import UserError
    from overbrainer.logs import configure_logging, log_level

    try:
        if ctx.invoked_subcommand in DEFERRED_LOGGING:
            log_level()  # checked now; configured by the group, or on the first warning
        else:
            configure_logging()
    except UserError as error:
        raise CliError(error.message) from None
    ctx.obj = ctx.meta.pop(_APP, None) or _app(ctx)
    if ctx.invoked_subcommand not in STARTING_IN_STAGE:
        from overbrainer.collector import release

        release()


_APP = "overbrainer.app"
"""Where ``ctx.meta`` keeps the project a plugin's command was looked up in, for the group
to go on with."""


def _app(ctx: click.Context) -> App:
    """The project of ``-C`` (given, or searched for upwards from the current directory)."""
    from pathlib import Path

    from overbrainer.cli.context import App

    source = ctx.get_parameter_source("project_dir")
    explicit = source is not None and source.name != "DEFAULT"
    return App(Path(ctx.params.get("project_dir") or "."), explicit=explicit)


def _terminate(signum: int, frame: FrameType | None) -> None:
    from overbrainer.errors import Terminated

    raise Terminated


def main() -> None:
    """The console script. SIGTERM is raised as ``Terminated``, a ``KeyboardInterrupt``,
    so that it stops a command the way Ctrl-C does, cleanly."""
    import signal

    from overbrainer.collector import hold

    hold()
    signal.signal(signal.SIGTERM, _terminate)
    cli(prog_name="overbrainer")
