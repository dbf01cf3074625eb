"""Before ``run`` pays: can the training target load the base model?

Training reads ``base_model`` on the target, from a directory, the Hugging Face cache or the
Hub; a model none of those gives fails the job after every answer was paid for. The probe
here looks where the job will: on the target's own host (its cache, its ``HF_ENDPOINT``,
its ``HF_HUB_OFFLINE``) when the target gives a shell, else from this machine for a target
that makes its machine per run (a pod reaches the Hub as this machine does, or better).
The probe is stdlib Python, so it runs before Axolotl's venv is of any use; the token goes
on its stdin, never on a command line.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass

from loguru import logger
from pydantic import SecretStr

from overbrainer.errors import UserError

PROBE_TIMEOUT_S = 20.0
"""The Hub's answer to one small request; a longer wait is reported as unreachable."""

PROBE = r"""
import json, os, pathlib, sys, urllib.error, urllib.parse, urllib.request
model = sys.argv[1]
token = sys.stdin.readline().strip()
def say(**found):
    print(json.dumps(found))
    sys.exit(0)
if model.startswith(("/", ".", "~")):
    path = pathlib.Path(model).expanduser()
    say(where="dir", ok=(path / "config.json").is_file(), exists=path.is_dir())
env = os.environ
cache = env.get("HF_HUB_CACHE") or os.path.join(
    env.get("HF_HOME") or os.path.join(
        env.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "huggingface"), "hub")
snapshots = pathlib.Path(cache) / ("models--" + model.replace("/", "--")) / "snapshots"
try:
    if any((found / "config.json").exists() for found in snapshots.iterdir()):
        say(where="cache", ok=True)
except OSError:
    pass
truthy = ("1", "true", "yes", "on")
if env.get("HF_HUB_OFFLINE", "").lower() in truthy or env.get(
        "TRANSFORMERS_OFFLINE", "").lower() in truthy:
    say(where="offline", ok=False, cache=cache)
endpoint = (env.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")
request = urllib.request.Request(
    endpoint + "/api/models/" + urllib.parse.quote(model, safe="/"), method="GET")
if token:
    request.add_header("Authorization", "Bearer " + token)
try:
    with urllib.request.urlopen(request, timeout=float(sys.argv[2])) as answer:
        say(where="hub", ok=True, status=answer.status, endpoint=endpoint)
except urllib.error.HTTPError as error:
    say(where="hub", ok=False, status=error.code, endpoint=endpoint, token=bool(token))
except Exception as error:
    reason = str(getattr(error, "reason", error))[:200]
    say(where="unreachable", ok=False, endpoint=endpoint, reason=reason, cache=cache)
"""


@dataclass(frozen=True)
class Found:
    """What the probe saw: ``where`` it looked last, and whether the model is there."""

    where: str
    ok: bool
    facts: dict[str, object]


def probe_script(python: str, base_model: str, timeout: float = PROBE_TIMEOUT_S) -> str:
    """The ``sh`` script that runs the probe with ``python`` (``python3`` when that one is
    missing: the venv may not exist before ``install`` runs)."""
    return (
        f"P={shlex.quote(python)}\n"
        'command -v "$P" >/dev/null 2>&1 || P=python3\n'
        f'exec "$P" -c {shlex.quote(PROBE)} {shlex.quote(base_model)} {timeout:g}\n'
    )


def probe_here(base_model: str, env: Mapping[str, str], token: str) -> Found:
    """The probe run on this machine, with ``env`` as its environment."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, base_model, f"{PROBE_TIMEOUT_S:g}"],
        input=(token + "\n").encode(),
        capture_output=True,
        env=dict(env),
        timeout=PROBE_TIMEOUT_S + 10,
        check=False,
    )
    return parse(done.stdout.decode("utf-8", "replace"))


def parse(output: str) -> Found:
    """The probe's last line of output; ``where="?"`` when it printed none."""
    for line in reversed(output.strip().splitlines()):
        try:
            facts = json.loads(line)
        except ValueError:
            continue
        if isinstance(facts, dict) and "where" in facts:
            return Found(str(facts["where"]), bool(facts.get("ok")), facts)
    return Found("?", False, {})


def token_text(token: SecretStr | None) -> str:
    """The token for the probe's stdin: one line, or nothing."""
    value = token.get_secret_value() if token is not None else ""
    return "" if "\n" in value or "\r" in value else value


def check(found: Found, base_model: str, target: str) -> None:
    """Raise a ``UserError`` naming what to do when ``found`` says the job could not load
    ``base_model`` on ``target``; log where it was found otherwise."""
    facts = found.facts
    head = f"training.base_model `{base_model}` cannot be loaded on target `{target}`"
    if found.ok:
        logger.debug(f"base model {base_model}: found ({found.where}) for target `{target}`")
        return
    if found.where == "dir":
        what = "has no config.json" if facts.get("exists") else "does not exist"
        raise UserError(f"{head}: the directory {what} there")
    if found.where == "offline":
        raise UserError(
            f"{head}: it is not in the Hugging Face cache ({facts.get('cache')}) and "
            "HF_HUB_OFFLINE is set; download it there first, or set training.base_model to a "
            "local directory"
        )
    if found.where == "hub":
        status = facts.get("status")
        if status == 404:
            raise UserError(
                f"{head}: {facts.get('endpoint')} has no such model (404); check its name"
            )
        if status in (401, 403):
            why = (
                "the token (OVERBRAINER_HF_TOKEN) has no access to it: accept its licence on "
                "the Hub, or use a token that has"
                if facts.get("token")
                else "it is gated or private: set OVERBRAINER_HF_TOKEN to a token with access"
            )
            raise UserError(f"{head}: {facts.get('endpoint')} answered {status}; {why}")
        logger.warning(
            f"base model {base_model}: {facts.get('endpoint')} answered {status}; "
            "training may fail to download it"
        )
        return
    if found.where == "unreachable":
        raise UserError(
            f"{head}: it is not in the Hugging Face cache ({facts.get('cache')}) and "
            f"{facts.get('endpoint')} cannot be reached ({facts.get('reason')}); download it "
            "there first, or set training.base_model to a local directory"
        )
    logger.warning(
        f"cannot check base model {base_model} on target `{target}`: the probe gave no answer"
    )
