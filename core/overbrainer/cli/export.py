"""``overbrainer export``: a run's model as GGUF for llama.cpp and Ollama."""

from __future__ import annotations

import click

from overbrainer.cli.complete import complete_run_id
from overbrainer.cli.context import current_app

QUANTIZE_TYPES = (
    "Q4_K_M",
    "Q4_K_S",
    "Q5_K_M",
    "Q5_K_S",
    "Q6_K",
    "Q8_0",
    "Q3_K_M",
    "Q2_K",
    "F16",
    "BF16",
    "auto",
)


@click.command()
@click.argument("run_id", required=False, shell_complete=complete_run_id)
@click.option(
    "--quantize",
    type=click.Choice(QUANTIZE_TYPES, case_sensitive=False),
    help="llama.cpp quantization type (default: export.quantize, Q4_K_M); auto: the smallest "
    "of Q4_K_M, Q5_K_M, Q6_K, Q8_0 within --max-drift.",
)
@click.option("--ollama", "ollama", metavar="NAME", help="Create this Ollama model from the GGUF.")
@click.option(
    "--keep-machine",
    "--keep-pod",
    "keep_machine",
    is_flag=True,
    help="Keep a machine made for this export, such as a pod (a later command reuses it); "
    "--keep-pod is the same.",
)
@click.option(
    "--verify",
    "verify",
    type=click.IntRange(min=0),
    default=8,
    show_default=True,
    metavar="N",
    help="Check the GGUF against the merged model on the first N eval prompts (0: not).",
)
@click.option(
    "--max-drift",
    type=click.FloatRange(min=0),
    metavar="X",
    help="Fail past this mean log-probability drift (nats a token) from the merged model.",
)
def export(  # noqa: PLR0917 - click passes each option
    run_id: str | None,
    quantize: str | None,
    ollama: str | None,
    keep_machine: bool,
    verify: int,
    max_drift: float | None,
) -> None:
    """Export RUN_ID's model to a GGUF file and an Ollama Modelfile, on its target.

    RUN_ID may be `latest` (the default) or any unique prefix of an id.

    The GGUF is checked against the merged model on the first eval prompts (greedy): token
    agreement and mean log-probability drift land in export.json.

    Example: overbrainer export latest --quantize Q8_0 --ollama my-child
    """
    from overbrainer.after.export import check_ollama_name, export_run
    from overbrainer.redact import escape_controls

    app = current_app()
    run_id = app.runs.resolve(run_id)
    if ollama is not None:
        check_ollama_name(ollama)
    with app.lock():
        export_run(
            app.project,
            app.plugins.hook,
            app.runs,
            run_id,
            quantize=quantize.upper() if quantize else None,
            ollama=ollama,
            keep_machine=keep_machine,
            verify=verify,
            max_drift=max_drift,
            echo=lambda line: click.echo(escape_controls(line)),
        )
