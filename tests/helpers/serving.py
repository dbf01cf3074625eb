"""Served-provider helpers: a stand-in engine venv (``tests/helpers/fake_engine.py`` behind
``bin/vllm`` and ``bin/python``), a project whose roles use a provider served from it on a
target, and the watchdogs a test started (stopped by their process groups)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

from tests.helpers.pipeline_data import TEST_PROMPTS, seed_questions

from overbrainer.after.toolchain import toolchain_dir

FAKE_ENGINE = Path(__file__).parent / "fake_engine.py"
TINY_GGUF = Path(__file__).parent / "tiny_gguf.py"
MODEL = "Qwen/Qwen3-0.6B"

SERVED_CONFIG = """\
[project]
name = "Served"

[[topics]]
name = "ownership"
subtopics = 1
questions_per_subtopic = 2

[providers.big]
protocol = "openai"
serve = {{ target = "{target}", engine = "{engine}", model = "{model}"{more} }}

[targets.{target}]
kind = "{kind}"
venv = "{venv}"
pass_env = ["FAKE_ENGINE_DELAY"]

[roles.generator]
provider = "big"
model = "{model}"

[roles.parent]
provider = "big"
model = "{model}"

[pipeline]
concurrency = 2
max_retries = 0
"""


LLAMA_CONFIG = """\
[project]
name = "Served llama"

[[topics]]
name = "ownership"
subtopics = 1
questions_per_subtopic = {questions}

[providers.local_llama]
protocol = "openai"

[providers.local_llama.serve]
target = "{target}"
engine = "llama.cpp"
model = "{model}"
args = ["--n_ctx", "512"]

[targets.{target}]
kind = "{kind}"
venv = "{venv}"
{more}
[roles.generator]
provider = "local_llama"
model = "{model}"

[roles.parent]
provider = "local_llama"
model = "{model}"
max_tokens = {max_tokens}
temperature = 0
"""


def llama_toolchain() -> Path:
    """The llama.cpp toolchain ``export`` builds, where ``.ci/run`` puts it:
    ``OVERBRAINER_LLAMA_CPP``, else the default directory of the pinned release. Read it
    at import: a test's environment (its own HOME) is not the machine's."""
    return Path(toolchain_dir(dict(os.environ))).expanduser()


def write_tiny_gguf(toolchain: Path, model: Path, timeout: float) -> Path:
    """A tiny random Llama at ``model`` (``tests/helpers/tiny_gguf.py``, in the
    toolchain's python, its ``gguf`` package from the vendored llama.cpp)."""
    subprocess.run(
        [str(toolchain / "bin" / "python"), str(TINY_GGUF), str(model)], check=True,
        timeout=timeout, env={**os.environ, "PYTHONPATH": str(toolchain / "llama.cpp" / "gguf-py")},
    )  # fmt: skip
    return model


def write_llama_project(
    directory: Path, toolchain: Path, model: Path, questions: list[str], *,
    target: str = "box", kind: str = "local", max_tokens: int = 12, more: str = "",
) -> Path:  # fmt: skip
    """A project whose parent is ``model`` served by the llama.cpp ``toolchain`` on
    ``target`` (``more``: lines of its table), its ``questions`` asked already."""
    directory.mkdir(parents=True)
    (directory / "overbrainer.toml").write_text(LLAMA_CONFIG.format(
        questions=len(questions), target=target, kind=kind, model=model,
        venv=toolchain, max_tokens=max_tokens, more=more,
    ))  # fmt: skip
    (directory / "prompts").mkdir()
    for name, text in TEST_PROMPTS.items():
        (directory / "prompts" / name).write_text(text)
    seed_questions(directory, {("ownership", "moves"): questions})
    return directory


def make_engine_venv(directory: Path) -> Path:
    """A venv whose ``bin/vllm`` and ``bin/python -m sglang.launch_server`` are the
    stand-in engine (other ``python`` uses: this interpreter, which finds an empty
    ``sglang`` package there, as the check before a serve looks for it)."""
    bin_dir = directory / "bin"
    bin_dir.mkdir(parents=True)
    site = directory / "site"
    (site / "sglang").mkdir(parents=True)
    (site / "sglang" / "__init__.py").write_text("")
    python, fake = sys.executable, FAKE_ENGINE
    (bin_dir / "vllm").write_text(f'#!/bin/sh\nexec {python} {fake} vllm "$@"\n')
    (bin_dir / "python").write_text(
        "#!/bin/sh\n"
        f'if [ "$1 $2" = "-m sglang.launch_server" ]; then exec {python} {fake} sglang "$@"; fi\n'
        f'PYTHONPATH={site}${{PYTHONPATH:+:$PYTHONPATH}} exec {python} "$@"\n'
    )
    for program in bin_dir.iterdir():
        program.chmod(0o755)
    return directory


def write_served_project(
    directory: Path, venv: Path, *, target: str = "box", kind: str = "local",
    engine: str = "vllm", more: str = "",
) -> Path:  # fmt: skip
    directory.mkdir(parents=True, exist_ok=True)
    config = SERVED_CONFIG.format(
        target=target, kind=kind, engine=engine, model=MODEL, more=more, venv=venv
    )
    (directory / "overbrainer.toml").write_text(config, encoding="utf-8")
    prompts = directory / "prompts"
    prompts.mkdir(exist_ok=True)
    for name, text in TEST_PROMPTS.items():
        (prompts / name).write_text(text, encoding="utf-8")
    return directory


def watchdog_pids(root: Path) -> list[int]:
    """The pids of the watchdogs under ``root``: their pid files while their serve is up,
    the stand-in engine's process group (its watchdog's pid) after it ended."""
    pids = set()
    for pid_file in root.rglob(".serve/*/watchdog.pid"):
        with contextlib.suppress(ValueError, OSError):
            pids.add(int(pid_file.read_text()))
    for record in engine_records(root, "argv.json"):
        with contextlib.suppress(ValueError, OSError, KeyError):
            pids.add(int(json.loads(record.read_text())["pgid"]))
    return sorted(pids)


def engine_records(root: Path, name: str) -> list[Path]:
    """The stand-in engine's files called ``name`` under ``root`` (``engine-records/ID/``:
    they outlive the serve's directory)."""
    return list(root.rglob(f"engine-records/*/{name}"))


def running(pid: int) -> bool:
    """Whether ``pid``'s process group still has a process (a zombie is not one)."""
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return False
    with contextlib.suppress(OSError):
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        if state == "Z":
            return False
    return True


def engine_argv(root: Path) -> list[str]:
    """The argv the stand-in engine was started with (its ``argv.json``)."""
    (found,) = engine_records(root, "argv.json")
    return list(json.loads(found.read_text())["argv"])


def group_members(pgid: int) -> list[int]:
    """The live processes (zombies left out) of process group ``pgid``: an engine outlives
    its killed watchdog in the watchdog's group."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if fields[0] != "Z" and int(fields[2]) == pgid:
                found.append(int(entry.name))
    return found


def serving(model: Path) -> list[int]:
    """The live processes whose command line names ``model`` (the engine's)."""
    found = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError, IndexError):
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            if state != "Z" and str(model).encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
    return found
