"""What makes ``distill = "logits"`` impossible, found before anything is paid.

``config check`` lists these problems, ``providers check`` adds what the parent's probe
shows (logprobs it returns, tokens the child's vocabulary names), and ``answers`` refuses to
start on any of them: answers without usable logprobs would be paid for, then excluded.
"""

from __future__ import annotations

import re

from overbrainer.config.model import Settings
from overbrainer.errors import UserError
from overbrainer.pipeline.kd_teacher import online_problems
from overbrainer.pipeline.logits import Unnamed, named
from overbrainer.pipeline.vocab import load_vocabulary
from overbrainer.providers.completion import Completion

_REASONING_MODELS = re.compile(r"^(?:o\d|gpt-5)")
"""OpenAI's reasoning models, which refuse ``logprobs`` (o1, o3, o4-mini, gpt-5...)."""

SAME_FAMILY = (
    "logit distillation needs the child to share the parent's tokenizer: make the child a "
    "model of the parent's family (a smaller model of the same series, e.g. Qwen3-0.6B for "
    "a Qwen3 parent), or set training.distill = \"text\""
)


def logits_problems(settings: Settings) -> list[str]:
    """Why the parent cannot teach the child its logits, as ``config check`` lists it."""
    training = settings.training
    if training is None or training.distill != "logits":
        return []
    role = settings.roles.parent
    head = 'training.distill = "logits"'
    found = []
    provider = settings.providers.get(role.provider)
    if provider is not None and provider.protocol == "anthropic":
        found.append(
            f"{head}, but roles.parent is on providers.{role.provider}, which speaks the "
            "anthropic protocol: it returns no logprobs. Make the parent an openai-protocol "
            "server of an open-weights model (vLLM, SGLang, llama.cpp's server)"
        )
    base = role.model.lower().rsplit("/", 1)[-1]
    if _REASONING_MODELS.match(base):
        found.append(
            f"{head}, but `{role.model}` is an OpenAI reasoning model: OpenAI refuses "
            "logprobs for them. Make the parent a model that returns its top_logprobs"
        )
    if role.batch and training.kd_offline:
        found.append(
            f"{head} does not ask a batch for logprobs yet: set roles.parent.batch = false"
        )
    found += online_problems(settings)
    found += tokenizer_problems(settings)
    return found


def tokenizer_problems(settings: Settings) -> list[str]:
    """The child's tokenizer not on this machine, or not the parent's (when
    ``training.kd.parent_tokenizer`` names it)."""
    training = settings.training
    assert training is not None
    try:
        child = load_vocabulary(training.base_model, "training.base_model")
        if training.kd.parent_tokenizer is None:
            return []
        parent = load_vocabulary(training.kd.parent_tokenizer, "training.kd.parent_tokenizer")
    except UserError as error:
        return [error.message]
    differences = parent.differences(child)
    if not differences:
        return []
    return [
        f"the parent's tokenizer ({parent.source}) is not the child's "
        f"({child.source}): {'; '.join(differences)}. {SAME_FAMILY}"
    ]


def probe_problem(settings: Settings, completion: Completion) -> str | None:
    """What the parent's probe reply shows against distilling its logits: none returned,
    fewer than ``top_k`` per token, or tokens the child's vocabulary does not name."""
    training = settings.training
    if training is None or training.distill != "logits":
        return None
    role = settings.roles.parent
    who = f"{role.provider}/{role.model}"
    top_k = training.kd.top_k
    positions = completion.logprobs
    if not positions:
        return (
            f"training.distill = \"logits\", but the probe's reply from {who} carried no "
            "logprobs: the server ignores `logprobs`/`top_logprobs`. Make the parent a "
            "server that returns them (vLLM, SGLang, llama.cpp's server)"
        )
    given = min(len(position.top) for position in positions)
    if given < top_k:
        return (
            f"training.kd.top_k = {top_k}, but {who} returned {given} candidates per token: "
            f"lower top_k to {given}, or raise the server's limit (vLLM: --max-logprobs; "
            "llama.cpp's server caps n_probs)"
        )
    try:
        vocab = load_vocabulary(training.base_model, "training.base_model")
    except UserError as error:
        return error.message
    try:
        named(vocab, top_k, "probe", completion)
    except Unnamed as problem:
        return (
            f"the parent's tokens are not the child's ({who} against training.base_model "
            f"= {training.base_model!r}): {problem}. {SAME_FAMILY}"
        )
    return None
