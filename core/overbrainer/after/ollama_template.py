"""The chat template of a run, written in Ollama's Go template syntax for its Modelfile.

Ollama reads ``TEMPLATE`` (Go ``text/template``, fed ``.Messages`` with ``.Role``,
``.Content`` and ``.Thinking``) and ``PARAMETER stop``; without them it guesses from the GGUF
and, for a template it does not know, falls back to the bare prompt. The format is not named
from the model: the Jinja template renders probe conversations, the text around each marker
gives each role's wrapping (what ChatML, Llama 3, Gemma, Mistral, Phi and DeepSeek all are),
and the result is kept only when it renders a set of other conversations exactly as the
Jinja template does.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from overbrainer.after.chat_template import ChatTemplate

Message = dict[str, str]

SYSTEM, USER, ASSISTANT = "SYSMARK7", "USERMARK1", "ASSTMARK1"
USER2, THINK = "USERMARK2", "THINKMARK9"


class Untranslatable(Exception):
    """The template renders through no pattern this module can write as a Go template."""


@dataclass(frozen=True)
class ChatFormat:
    """How a template wraps each message, as Ollama's template will."""

    bos: str
    system: tuple[str, str] | None
    """Prefix and suffix of a system message of its own; None when it is merged."""
    merged_system: tuple[str, str] | None
    """``(first|last, separator)``: the system text put before that user message's."""
    default_system: str | None
    """The system text the template renders when the conversation has none."""
    user: tuple[str, str]
    assistant: tuple[str, str]
    thinking: tuple[str, str] | None
    """Around the reasoning of an earlier assistant turn, when the template keeps it."""
    generation: str
    trims: bool = False
    """Whether the template trims each message's whitespace (a Go template cannot: Ollama's
    rendering keeps it)."""

    def render(self, messages: Sequence[Message]) -> str:
        """The text this format gives ``messages`` with the assistant's turn opened."""
        out = [self.bos]
        system = next((m["content"] for m in messages if m["role"] == "system"), None)
        if self.trims:
            messages = [dict(m, content=m["content"].strip()) for m in messages]
            system = system.strip() if system is not None else None
        rest = [m for m in messages if m["role"] != "system"]
        if system is None:
            system = self.default_system
        users = [i for i, m in enumerate(rest) if m["role"] == "user"]
        merge_at = None
        if self.merged_system is not None and system is not None and users:
            merge_at = users[0] if self.merged_system[0] == "first" else users[-1]
        elif system is not None and self.system is not None:
            out += [self.system[0], system, self.system[1]]
        for index, message in enumerate(rest):
            if message["role"] == "user":
                content = message["content"]
                if index == merge_at and self.merged_system is not None:
                    content = f"{system}{self.merged_system[1]}{content}"
                out += [self.user[0], content, self.user[1]]
            else:
                out.append(self.assistant[0])
                thinking = message.get("thinking")
                if self.thinking is not None and thinking:
                    out += [self.thinking[0], thinking, self.thinking[1]]
                out += [message["content"], self.assistant[1]]
        out.append(self.generation)
        return "".join(out)

    def stops(self, eos: str) -> list[str]:
        """The ``PARAMETER stop`` values: the end of an assistant turn and the opening of
        the next user turn (its leading special token)."""
        found = []
        for text in (self.assistant[1].strip(), eos):
            if text and text not in found:
                found.append(text)
        opening = re.match(r"<[^<>\s]+>|\[[A-Za-z_]+\]", self.user[0].strip())
        if opening and opening.group(0) not in found:
            found.append(opening.group(0))
        return found


def _jinja(template: ChatTemplate) -> Any:
    from jinja2.exceptions import TemplateError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise TemplateError(message)

    def strftime_now(fmt: str) -> str:
        return datetime.now(UTC).strftime(fmt)

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"]
    )  # as transformers renders it
    env.filters["tojson"] = lambda value, **kw: json.dumps(value, ensure_ascii=False, **kw)
    env.globals.update(raise_exception=raise_exception, strftime_now=strftime_now)
    compiled = env.from_string(template.source)

    def render(messages: Sequence[Message], generation: bool = True) -> str:
        turns = [
            {"role": m["role"], "content": m["content"], "reasoning_content": m["thinking"]}
            if m.get("thinking")
            else {"role": m["role"], "content": m["content"]}
            for m in messages
        ]
        return str(
            compiled.render(
                messages=turns,
                add_generation_prompt=generation,
                tools=None,
                bos_token=template.bos_token,
                eos_token=template.eos_token,
            )
        )

    return render


def _between(text: str, start: str, end: str) -> str:
    i = text.index(start) + len(start)
    return text[i : text.index(end, i)]


def _after(text: str, marker: str) -> str:
    return text[text.index(marker) + len(marker) :]


def _common_turn_end(one: str, other: str) -> str:
    """The longest common start of ``one`` and ``other``, never cut inside a special token
    (``<|end|>``, ``[INST]``): where a turn ends when two renderings continue differently."""
    size = 0
    for a, b in zip(one, other, strict=False):
        if a != b:
            break
        size += 1
    common = one[:size]
    for opening, closing in (("<", ">"), ("[", "]")):
        if common.rfind(opening) > common.rfind(closing):
            common = common[: common.rfind(opening)]
    return common


def _system_wrapping(
    render: Any, head: str, bos: str, user_prefix: str
) -> tuple[tuple[str, str] | None, tuple[str, str] | None, str | None]:
    """How the template places a system message: its own wrapping, or merged into a user
    message, and the system text it renders when there is none."""
    user, user2, asst = (
        {"role": "user", "content": USER},
        {"role": "user", "content": USER2},
        {"role": "assistant", "content": ASSISTANT},
    )
    default_block = head[len(bos) :]
    system: tuple[str, str] | None = None
    merged: tuple[str, str] | None = None
    default: str | None = None
    try:
        with_system = render([{"role": "system", "content": SYSTEM}, user, asst, user2], False)
    except Exception:  # noqa: BLE001 - a template that refuses a system message
        with_system = None
    if with_system is not None and SYSTEM in with_system:
        before = with_system[: with_system.index(SYSTEM)]
        if before.endswith(user_prefix) and before[: len(before) - len(user_prefix)] == head:
            separator = _between(with_system, SYSTEM, USER)
            merged = ("first", separator)
        elif USER in before:
            merged = ("last", _between(with_system, SYSTEM, USER2))
        else:
            if not before.startswith(bos):
                raise Untranslatable("the system message comes before the start token")
            prefix = before[len(bos) :]
            rest = _between(with_system, SYSTEM, USER)
            if not rest.endswith(user_prefix):
                raise Untranslatable("the system message is not followed by the first user turn")
            suffix = rest[: len(rest) - len(user_prefix)]
            system = (prefix, suffix)
            if default_block:
                if not (default_block.startswith(prefix) and default_block.endswith(suffix)):
                    raise Untranslatable("its default system message cannot be placed")
                default = default_block[len(prefix) : len(default_block) - len(suffix)]
    if default_block and system is None:
        raise Untranslatable("it renders text before the first message that is no system turn")
    return system, merged, default


def _infer(render: Any, bos_token: str) -> ChatFormat:
    user, user2, asst = (
        {"role": "user", "content": USER},
        {"role": "user", "content": USER2},
        {"role": "assistant", "content": ASSISTANT},
    )
    two_turns = render([user, asst, user2], False)
    opened = render([user, asst, user2], True)
    user_end = _after(render([user], False), USER)
    answer_end = _after(render([user, asst], False), ASSISTANT)
    after_user = _between(opened, USER, ASSISTANT)
    user_suffix = _common_turn_end(user_end, after_user)
    assistant_prefix = after_user[len(user_suffix) :]
    tail = _after(opened, USER2)
    if not tail.startswith(user_suffix):
        raise Untranslatable("a user message is not wrapped the same way each time")
    generation = tail[len(user_suffix) :]
    after_answer = _between(opened, ASSISTANT, USER2)
    assistant_suffix = _common_turn_end(answer_end, after_answer)
    user_prefix = after_answer[len(assistant_suffix) :]
    head = two_turns[: two_turns.index(USER)]
    if not head.endswith(user_prefix):
        raise Untranslatable("the first user message is wrapped differently from the others")
    head = head[: len(head) - len(user_prefix)]
    bos = bos_token if bos_token and head.startswith(bos_token) else ""

    system, merged, default = _system_wrapping(render, head, bos, user_prefix)
    thinking = None
    reasoned = render([user, dict(asst, thinking=THINK), user2], False)
    if THINK in reasoned:
        inside = _between(reasoned, USER, ASSISTANT)
        if not inside.startswith(user_suffix + assistant_prefix):
            raise Untranslatable("the reasoning of an earlier answer is not inside its turn")
        inside = inside[len(user_suffix + assistant_prefix) :]
        start = inside.index(THINK)
        thinking = (inside[:start], inside[start + len(THINK) :])
    padded = render([{"role": "user", "content": f" {USER} "}], False)
    return ChatFormat(
        trims=f" {USER} " not in padded,
        bos=bos,
        system=system,
        merged_system=merged,
        default_system=default,
        user=(user_prefix, user_suffix),
        assistant=(assistant_prefix, assistant_suffix),
        thinking=thinking,
        generation=generation,
    )


CHECKS: tuple[tuple[Message, ...], ...] = (
    ({"role": "user", "content": "Hello there.\nHow are you?"},),
    (
        {"role": "system", "content": "You answer in one word."},
        {"role": "user", "content": "Colour of the sky?"},
    ),
    (
        {"role": "user", "content": "Name a prime."},
        {"role": "assistant", "content": "Seven.", "thinking": "Small ones: 2, 3, 5, 7."},
        {"role": "user", "content": "Another one?\n\n"},
    ),
    (
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": " Hello! "},
        {"role": "user", "content": "Bye"},
        {"role": "assistant", "content": "Goodbye.", "thinking": "They leave."},
        {"role": "user", "content": "{{ .Content }} and {% raw %}"},
    ),
)
"""Conversations the derived format must render exactly as the Jinja template does."""


def chat_format(template: ChatTemplate) -> ChatFormat:
    """The format of ``template``, checked against it; :class:`Untranslatable` says why not."""
    from jinja2.exceptions import TemplateError

    try:
        render = _jinja(template)
        found = _infer(render, template.bos_token)
    except TemplateError as error:
        raise Untranslatable(f"it does not render: {error}") from None
    except ValueError:  # a marker missing from what it rendered
        raise Untranslatable("it leaves out part of a conversation") from None
    for messages in CHECKS:
        try:
            expected = render(messages)
        except TemplateError as error:
            refuses_system = found.system is None and found.merged_system is None
            if refuses_system and any(m["role"] == "system" for m in messages):
                continue  # it refuses a system message; the derived one leaves it out
            raise Untranslatable(f"it does not render: {error}") from None
        if found.render(messages) != expected:
            raise Untranslatable("it renders a conversation in a way no pattern here matches")
    return found


def _literal(text: str) -> str:
    """``text`` as Go template text inside a Modelfile's triple quotes (a quote at either
    end would run into them)."""
    if "{{" in text or '"""' in text or text.startswith('"') or text.endswith('"'):
        return "{{ " + json.dumps(text, ensure_ascii=False) + " }}"
    return text


def go_template(found: ChatFormat) -> str:
    """``found`` in Ollama's Go template syntax, over ``.Messages`` (BOS left out: Ollama's
    tokenizer adds it)."""
    lit = _literal
    parts = []
    if found.merged_system is not None:
        parts.append('{{ $system := "" }}')
        parts.append('{{ range .Messages }}{{ if eq .Role "system" }}{{ $system = .Content }}')
        parts.append("{{ end }}{{ end }}")
        if found.merged_system[0] == "last":
            parts.append("{{ $last := 0 }}{{ range $i, $m := .Messages }}")
            parts.append('{{ if eq $m.Role "user" }}{{ $last = $i }}{{ end }}{{ end }}')
    elif found.system is not None and found.default_system is not None:
        parts.append(
            '{{ if or (not .Messages) (ne (index .Messages 0).Role "system") }}'
            f"{lit(found.system[0] + found.default_system + found.system[1])}{{{{ end }}}}"
        )
    parts.append("{{ range $i, $m := .Messages }}")
    if found.system is not None:
        parts.append(
            f'{{{{ if eq $m.Role "system" }}}}{lit(found.system[0])}{{{{ $m.Content }}}}'
            f"{lit(found.system[1])}{{{{ else "
        )
    else:
        parts.append("{{ ")
    parts.append(f'if eq $m.Role "user" }}}}{lit(found.user[0])}')
    if found.merged_system is not None:
        if found.merged_system[0] == "first":
            parts.append(
                f"{{{{ if $system }}}}{{{{ $system }}}}{lit(found.merged_system[1])}"
                '{{ $system = "" }}{{ end }}'
            )
        else:
            parts.append(
                f"{{{{ if and $system (eq $i $last) }}}}{{{{ $system }}}}"
                f"{lit(found.merged_system[1])}{{{{ end }}}}"
            )
    parts.append(f"{{{{ $m.Content }}}}{lit(found.user[1])}")
    parts.append(f'{{{{ else if eq $m.Role "assistant" }}}}{lit(found.assistant[0])}')
    if found.thinking is not None:
        parts.append(
            f"{{{{ if $m.Thinking }}}}{lit(found.thinking[0])}{{{{ $m.Thinking }}}}"
            f"{lit(found.thinking[1])}{{{{ end }}}}"
        )
    parts.append(f"{{{{ $m.Content }}}}{lit(found.assistant[1])}{{{{ end }}}}{{{{ end }}}}")
    parts.append(lit(found.generation))
    return "".join(parts)


@dataclass(frozen=True)
class OllamaChat:
    """What a Modelfile says of the chat format: ``TEMPLATE`` and the stops, or why not."""

    template: str | None
    stops: tuple[str, ...]
    problem: str | None


def ollama_chat(template: ChatTemplate | None) -> OllamaChat:
    """The Modelfile's chat lines for ``template`` (None: the model has none)."""
    if template is None:
        return OllamaChat(None, (), "the model has no chat template")
    try:
        found = chat_format(template)
    except Untranslatable as why:
        return OllamaChat(None, (), f"the chat template of {template.where} cannot be "
                          f"written for Ollama: {why}")  # fmt: skip
    return OllamaChat(go_template(found), tuple(found.stops(template.eos_token)), None)
