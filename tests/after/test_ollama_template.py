"""The Modelfile's TEMPLATE, rendered by Go's own text/template with the data Ollama passes,
gives each family's training format: the same text as its Jinja chat template."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from tests.helpers.chat_templates import TEMPLATES
from tests.helpers.tools import need

from overbrainer.after.chat_template import ChatTemplate, without_training_tags
from overbrainer.after.ollama_template import CHECKS, chat_format, go_template, ollama_chat

HELPER = Path(__file__).parent / "render_go_template.go"

FAMILIES = {
    # file: (bos, eos, the stops the Modelfile gets)
    "chatml": ("", "<|im_end|>", ["<|im_end|>", "<|im_start|>"]),
    "qwen2": ("", "<|im_end|>", ["<|im_end|>", "<|im_start|>"]),
    "qwen3": ("", "<|im_end|>", ["<|im_end|>", "<|im_start|>"]),
    "chatml_reasoning": ("", "<|im_end|>", ["<|im_end|>", "<|im_start|>"]),
    "llama3": ("<|begin_of_text|>", "<|eot_id|>", ["<|eot_id|>", "<|start_header_id|>"]),
    "llama31": ("<|begin_of_text|>", "<|eot_id|>", ["<|eot_id|>", "<|start_header_id|>"]),
    "gemma": ("<bos>", "<eos>", ["<end_of_turn>", "<eos>", "<start_of_turn>"]),
    "mistral": ("<s>", "</s>", ["</s>", "[INST]"]),
    "phi3": ("<s>", "<|endoftext|>", ["<|end|>", "<|endoftext|>", "<|user|>"]),
    "deepseek_r1": (
        "<｜begin▁of▁sentence｜>",
        "<｜end▁of▁sentence｜>",
        ["<｜end▁of▁sentence｜>", "<｜User｜>"],
    ),
}

CONVERSATIONS = (
    *CHECKS,
    (
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "What is 2 + 2?"},
        {"role": "assistant", "content": "4", "thinking": "Two and two make four."},
        {"role": "user", "content": "And 3 + 3?"},
    ),
    ({"role": "user", "content": 'Quotes """ and {{ braces }} survive.'},),
)


@pytest.fixture(scope="session")
def go_renderer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Go helper, built once per session."""
    go = need("go")
    out = tmp_path_factory.mktemp("go-template") / "render"
    cache = out.parent / "cache"
    env = {"GOCACHE": str(cache), "GOPATH": str(out.parent / "gopath"), "HOME": str(out.parent),
           "PATH": str(Path(go).parent), "GOFLAGS": "-mod=mod", "GO111MODULE": "off"}  # fmt: skip
    subprocess.run([go, "build", "-o", str(out), str(HELPER)], check=True, env=env, timeout=300)
    return out


def go_render(renderer: Path, template: str, messages: tuple[dict[str, str], ...]) -> str:
    """What Ollama's template gives ``messages``: .Messages, .System, .Prompt, .Response."""
    system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
    users = [m["content"] for m in messages if m["role"] == "user"]
    data = {
        "Messages": [
            {"Role": m["role"], "Content": m["content"], "Thinking": m.get("thinking", "")}
            for m in messages
        ],
        "System": system,
        "Prompt": users[-1] if users else "",
        "Response": "",
    }
    done = subprocess.run(
        [str(renderer)],
        input=json.dumps({"template": template, "data": data}),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def template_of(name: str) -> ChatTemplate:
    bos, eos, _stops = FAMILIES[name]
    source = (TEMPLATES / f"{name}.jinja").read_text()
    return ChatTemplate(without_training_tags(source), bos, eos, f"{name}.jinja")


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_the_go_template_renders_each_family_as_its_jinja_template(go_renderer, name):
    template = template_of(name)
    found = chat_format(template)
    go = go_template(found)
    from overbrainer.after.ollama_template import _jinja

    jinja = _jinja(template)
    for conversation in CONVERSATIONS:
        messages = conversation
        if found.trims:  # Llama 3 and Gemma trim each message; Go templates cannot
            messages = tuple(dict(m, content=m["content"].strip()) for m in conversation)
        expected = jinja(messages)
        assert found.bos + go_render(go_renderer, go, messages) == expected, messages


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_the_stops_are_the_end_of_a_turn_and_the_opening_of_the_next(name):
    chat = ollama_chat(template_of(name))
    assert chat.problem is None
    assert list(chat.stops) == FAMILIES[name][2]


def test_a_template_that_trims_messages_is_known_to():
    assert chat_format(template_of("llama3")).trims
    assert not chat_format(template_of("chatml")).trims


def test_reasoning_kept_in_training_is_rendered_from_ollamas_thinking():
    found = chat_format(template_of("chatml_reasoning"))
    assert found.thinking == ("<think>\n", "\n</think>\n\n")
    go = go_template(found)
    assert "{{ if $m.Thinking }}<think>\n{{ $m.Thinking }}\n</think>\n\n{{ end }}" in go


def test_reasoning_the_template_drops_from_earlier_turns_is_dropped_there_too():
    assert chat_format(template_of("qwen3")).thinking is None
    assert chat_format(template_of("deepseek_r1")).generation == "<｜Assistant｜><think>\n"


def test_a_template_of_no_known_pattern_is_said_so():
    chat = ollama_chat(ChatTemplate((TEMPLATES / "numbered.jinja").read_text(), "", "", "x.jinja"))
    assert chat.template is None
    assert chat.problem is not None
    assert chat.problem.startswith("the chat template of x.jinja cannot be written for Ollama: ")


def test_a_template_that_does_not_render_is_said_so():
    chat = ollama_chat(ChatTemplate("{{ messages[0].nope() }}", "", "", "y.jinja"))
    assert chat.problem is not None
    assert "cannot be written for Ollama: it does not render" in chat.problem


def test_no_template_is_said_so():
    assert ollama_chat(None).problem == "the model has no chat template"


def test_the_target_script_strips_the_training_tags_as_the_core_does():
    import importlib.util

    from overbrainer.after import target

    spec = importlib.util.spec_from_file_location(
        "export_gguf", Path(target.__file__).parent / "export_gguf.py"
    )
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    for source in (
        (TEMPLATES / "chatml_reasoning.jinja").read_text(),
        "a{% generation %}b{% endgeneration %}c{%- generation -%} d {%- endgeneration %}",
    ):
        assert script.without_training_tags(source) == without_training_tags(source)
    assert without_training_tags("a{% generation %}b{% endgeneration %}c") == "abc"
    assert without_training_tags("{%- generation -%}x{%- endgeneration %}") == (
        "{%- if true -%}x{%- endif %}"
    )
