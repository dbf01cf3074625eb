"""The online mode of logit distillation: what can be the trainer's teacher.

With ``[training.kd] mode = "online"`` Axolotl's online teacher (0.19,
``axolotl.integrations.kd.collator_online_teacher``) sends each packed batch's token ids to
a server and reads the parent's top-k logprobs of every position back: vLLM's
``POST /v1/completions`` (``prompt`` a list of token-id lists, ``echo``,
``prompt_logprobs = top_k``; ``choices[i].prompt_logprobs``, a dict of token id to
``{"logprob": ...}`` per position, None first) or SGLang's ``POST /generate``
(``input_ids``, ``return_logprob``, ``top_logprobs_num``, ``logprob_start_len = 0``;
``meta_info.input_top_logprobs``, ``[logprob, id, text]`` rows). llama-cpp-python's server
takes text prompts only and returns no prompt logprobs by id, so it cannot teach online.
The parent must be served on the training target: the job reaches it on that machine's
loopback, which is where the serve listens.
"""

from __future__ import annotations

from overbrainer.config.model import Settings

ONLINE_SERVERS = {"vllm": "vllm", "sglang": "sglang"}
"""The engines that answer Axolotl's online teacher, and its ``kd_online_server`` for each."""


def online_problems(settings: Settings, target: str | None = None) -> list[str]:
    """Why the trainer cannot ask the parent during the run (``mode = "online"``), for a
    run on ``target`` (default ``training.target``): empty when it can."""
    training = settings.training
    if training is None or not training.kd_online:
        return []
    head = 'training.kd.mode = "online"'
    where = target or training.target
    role = settings.roles.parent
    provider = settings.providers.get(role.provider)
    found = []
    if not training.sample_packing:
        found.append(
            f"{head} needs training.sample_packing = true: Axolotl's online teacher (0.19) "
            "asks the parent for packed batches only"
        )
    if provider is None or provider.serve is None:
        found.append(
            f"{head} asks the parent during the run, so it must be served on the training "
            f"target: roles.parent is on providers.{role.provider}, which is not served. Give "
            f'it serve = {{ target = "{where}", engine = "vllm", model = ... }} (docs/serving.md), '
            'or set mode = "offline"'
        )
        return found
    serve = provider.serve
    if serve.target != where:
        found.append(
            f"{head}: the parent is served on target `{serve.target}` (providers."
            f"{role.provider}.serve.target) and the run trains on `{where}`: the trainer "
            "reaches the parent on its own machine's loopback. Serve it on "
            f'`{where}`, or set mode = "offline"'
        )
    if serve.engine not in ONLINE_SERVERS:
        why = (
            "llama-cpp-python's server takes text prompts only and returns no prompt "
            "logprobs by token id"
            if serve.engine == "llama.cpp"
            else "Axolotl's online teacher speaks only vLLM's and SGLang's requests"
        )
        found.append(
            f"{head}: providers.{role.provider}.serve.engine = {serve.engine!r} cannot "
            f"score the trainer's tokens ({why}). Serve the parent with "
            f'{" or ".join(repr(e) for e in ONLINE_SERVERS)}, or set mode = "offline"'
        )
    return found
