"""Chat templates of real models (tests/after/chat_templates), for the template tests."""

from __future__ import annotations

from pathlib import Path

TEMPLATES = Path(__file__).parents[1] / "after" / "chat_templates"
