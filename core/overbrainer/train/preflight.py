"""Before ``run`` pays for a dataset: can its training target train at all?

A first ``run`` of a new project (``init`` writes ``[targets.local]`` with no venv) used to
pay for every stage, then fail at training for want of Axolotl. The target is made ready
here instead (reached, Axolotl found or installed, its setup run), as training would make
it, before the first request; and a base model too large for a CPU target is a warning.
"""

from __future__ import annotations

from loguru import logger
from pydantic import BaseModel, SecretStr

from overbrainer.config.secrets import resolve_secret
from overbrainer.errors import UserError
from overbrainer.job.interface import Executor
from overbrainer.job.localhost import job_environment
from overbrainer.job.spec import TargetInfo
from overbrainer.model_size import model_billions
from overbrainer.train import model_check
from overbrainer.train.axolotl import is_local_path
from overbrainer.train.distill import check_distill
from overbrainer.train.executors import holding
from overbrainer.train.model_check import Found
from overbrainer.train.new_run import target_of
from overbrainer.train.prepare import resolve_base_model
from overbrainer.train.workspace import Workspace

CPU_BILLIONS = 0.5
"""From this size (in billions of parameters, read from the model's name) a CPU trains for
hours an epoch: the quickstart's tiny model trains 20 steps in about 30 s."""


def check_training_target(
    ws: Workspace, said: set[str] | None = None, found: set[str] | None = None
) -> BaseModel | None:
    """Make the training target ready, or raise a ``UserError`` saying what to set, with
    nothing paid for yet; warn when it trains on a CPU a base model sized for a GPU. The
    target's settings made ready (``train``'s ``prepared``: its setup runs once a ``run``),
    None without ``[training]``. ``found``: the base models a ``watch`` found already on
    their target (with its settings then), not probed again each cycle (a probe opens the
    target's shell, and the Hub token may be a command that asks for a password)."""
    training = ws.settings.training
    if training is None:
        return None
    check_distill(training)
    name = training.target
    target = target_of(ws.settings, name)
    key = f"{name}\0{training.base_model}\0{target.model_dump_json()}"
    probe = found is None or key not in found
    try:
        with holding(ws.project, ws.hook, name, target) as held:
            info = ws.hook.describe_target(executor=held.executor)
            ws.hook.prepare_target(executor=held.executor)
            where = _base_model_found(ws, held.executor, info) if probe else None
    except UserError as error:
        raise UserError(
            f"training.target `{name}` cannot train: {error}; nothing was paid for yet"
        ) from None
    if where is not None:
        try:
            model_check.check(where, training.base_model, name)
        except UserError as error:
            raise UserError(f"{error}; nothing was paid for yet") from None
    if found is not None:
        found.add(key)
    size = model_billions(training.base_model)
    if info is not None and info.cpu and size is not None and size >= CPU_BILLIONS:
        _warn_once(
            said,
            f"target `{name}` trains on a CPU: {training.base_model} ({size:g}B parameters) "
            "would take hours an epoch there; set training.base_model to a tiny model (as "
            "examples/quickstart does) or training.target to a GPU target",
        )
    return target


def _warn_once(said: set[str] | None, message: str) -> None:
    """Warn, unless ``said`` (a ``watch``'s warnings so far) holds ``message`` already."""
    if said is not None:
        if message in said:
            return
        said.add(message)
    logger.warning(message)


def _base_model_found(ws: Workspace, executor: Executor, info: TargetInfo | None) -> Found | None:
    """Where the job will find the base model: probed on the target's host when it gives a
    shell without making a machine, else on this machine; None when neither can tell (a
    container runtime, whose cache is its image's)."""
    training = ws.settings.training
    assert training is not None
    local = info is not None and info.local_paths
    base_model = resolve_base_model(training, ws.project_dir, local)
    token = model_check.token_text(_token(ws))
    if info is None or not info.per_run:
        try:
            shell = ws.hook.open_shell(executor=executor, purpose="check", keep_machine=False)
        except UserError as error:
            logger.debug(f"base model not checked on target `{training.target}`: {error}")
            return None
        if shell is not None:
            done = shell.host.run(
                model_check.probe_script(shell.python, base_model),
                input=(token + "\n").encode(),
                timeout=model_check.PROBE_TIMEOUT_S + 30,
            )
            return model_check.parse(done.text())
    if is_local_path(base_model):
        return None  # a directory on a machine not made yet
    return model_check.probe_here(base_model, job_environment(ws.project.env), token)


def _token(ws: Workspace) -> SecretStr | None:
    token = ws.settings.hf_token
    return None if token is None else resolve_secret(token, "hf_token", ws.project.env)
