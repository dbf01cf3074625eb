"""The training estimate's parts: a model's size from its name, a GPU type's class, and the
throughput table as docs/configuration.md documents it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from overbrainer.model_size import model_billions
from overbrainer.plan.training import CLASSES, SIZES, THROUGHPUT, gpu_class

DOCS = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


@pytest.mark.parametrize(("name", "size"), [
    ("Qwen/Qwen3-0.6B", 0.6), ("meta-llama/Llama-3.1-8B-Instruct", 8.0),
    ("HuggingFaceTB/SmolLM2-135M", 0.135), ("./models/tiny", None),
    # A context of a million tokens is no size: plan read this as a 0.001B model.
    ("Qwen/Qwen2.5-7B-Instruct-1M", 7.0),
    ("Qwen/Qwen3-30B-A3B", 30.0), ("mistralai/Mixtral-8x7B-v0.1", 56.0),
    ("/models/Qwen2.5", None), ("/snapshots/a3b9f01c7e", None),
])  # fmt: skip
def test_a_model_s_size_from_its_name(name, size):
    assert model_billions(name) == size


@pytest.mark.parametrize(("gpu", "cls"), [
    ("NVIDIA H100 80GB HBM3", "H100"), ("NVIDIA L40S", "L40S"), ("NVIDIA L40", "L40S"),
    ("NVIDIA RTX A6000", "A40"), ("NVIDIA GeForce RTX 4090", "RTX 4090"),
    ("NVIDIA RTX A4000", None),
])  # fmt: skip
def test_a_gpu_type_s_class(gpu, cls):
    assert gpu_class(gpu) == cls


def test_the_documented_table_is_the_table():
    text = DOCS.read_text(encoding="utf-8")
    header = "| GPU (name contains) | " + " | ".join(f"<= {size}B" for size in SIZES) + " |"
    assert header in text
    rows = re.findall(r"^\| ([^|]+) \| (\d+(?: \| \d+)+) \|$", text, re.MULTILINE)
    documented = {name: tuple(float(n) for n in speeds.split(" | ")) for name, speeds in rows}
    by_class: dict[str, list[str]] = {}
    for key, cls in CLASSES:
        by_class.setdefault(cls, []).append(key)
    for cls, speeds in THROUGHPUT.items():
        names = ", ".join(sorted(by_class[cls], key=lambda k: k not in cls))
        assert documented.get(names) == speeds, cls
