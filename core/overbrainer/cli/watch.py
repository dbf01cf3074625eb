"""``overbrainer watch``: ``run`` again after every change to the project's inputs."""

from __future__ import annotations

import click

from overbrainer.cli.context import current_app


@click.command()
def watch() -> None:
    """Run the stages and training now, then again after each change.

    Watches overbrainer.toml, .env, prompts/ and data/. Each cycle does only what the change
    needs (new topics get their subtopics, training reruns only when its inputs changed) and
    prints one line. An edit that breaks the configuration prints its errors and waits for
    the next one. A change during a training follows [watch] on_change: "wait" (the
    default) lets it finish, "snapshot" stops it with a snapshot. Ctrl-C stops watching; a
    training in progress keeps running (`overbrainer train attach RUN_ID`).

    Example: cd my-project && overbrainer watch
    """
    from overbrainer.watch.loop import Loop

    app = current_app()
    Loop(
        project_dir=app.project_dir,
        env=app.env,
        kinds=app.plugins.kinds,
        sections=app.plugins.sections,
        settings=app.settings,
        hook=app.plugins.hook,
        runs=app.runs,
        lock=app.lock,
        echo=app.workspace().echo,
    ).run()
