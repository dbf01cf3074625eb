"""Projects that answer in batch (OpenAI's and Anthropic's batch APIs, on the loopback fake), and
what the tests of batches read back from them."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.fake_provider import Seen
from tests.helpers.pipeline_data import PIPELINE_CONFIG, lines, seed_questions

BATCH_CONFIG = PIPELINE_CONFIG.replace(
    'model = "parent-model"\nreasoning = true\n',
    'model = "parent-model"\nreasoning = true\nbatch = true\n',
).replace("[pipeline]\n", "[pipeline]\nbatch_poll_s = 0.02\n")
# Claude hides its raw reasoning: asked for, every answer would be excluded.
ANTHROPIC_CONFIG = BATCH_CONFIG.replace('protocol = "openai"', 'protocol = "anthropic"').replace(
    "reasoning = true\nbatch", "batch"
)
CONFIGS = {"openai": BATCH_CONFIG, "anthropic": ANTHROPIC_CONFIG}
# parent-model: $3 and $4 a million tokens; 10 in and 20 out an answer.
SIX_ONLINE = 6 * (10 * 3e-6 + 20 * 4e-6)


def as_protocol(project_dir: Path, protocol: str) -> None:
    (project_dir / "overbrainer.toml").write_text(CONFIGS[protocol])


def six(project_dir: Path) -> list[dict]:
    """Six questions of one subtopic: one batch's worth."""
    return seed_questions(project_dir, {("ownership", "moves"): [f"q{i}" for i in range(6)]})


def ledger(project_dir: Path) -> str:
    """The batch ledger's text; empty before the first batch."""
    path = project_dir / ".overbrainer" / "batches.jsonl"
    return path.read_text() if path.exists() else ""


def answered(project_dir: Path) -> list[str]:
    return sorted(record["id"] for record in lines(project_dir, "answers.jsonl"))


def is_poll(seen: Seen) -> bool:
    """Whether ``seen`` asked how a batch is doing (either API's)."""
    return seen.method == "GET" and seen.path.startswith(("batches/", "messages/batches/"))
