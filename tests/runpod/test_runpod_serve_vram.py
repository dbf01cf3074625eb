"""The VRAM ``gpu_types = "auto"`` gives a serve's pod, from the served model's name
(``serve_vram``): the rules docs/runpod.md states, each against its 16-bit twin."""

from __future__ import annotations

import pytest

from overbrainer_runpod.pods import serve_vram


def total(model: str, gpus: int = 1) -> int:
    found = serve_vram(model, gpus)
    assert found is not None, model
    return found.total_gb


@pytest.mark.parametrize(
    "quantised",
    [
        "Qwen/Qwen2.5-72B-Instruct-AWQ",
        "Qwen/Qwen2.5-72B-Instruct-GPTQ-Int4",
        "unsloth/Qwen2.5-72B-Instruct-bnb-4bit",
        "/models/Qwen2.5-72B-Instruct-Q4_K_M.gguf",
        "RedHatAI/Qwen2.5-72B-Instruct-quantized.w4a16",
    ],
)
def test_a_4_bit_name_needs_about_a_quarter_of_its_16_bit_weights(quantised: str) -> None:
    full = total("Qwen/Qwen2.5-72B-Instruct")
    assert full / 4 < total(quantised) < full / 3


@pytest.mark.parametrize(
    "eight_bit",
    [
        "neuralmagic/Qwen2.5-72B-Instruct-FP8",
        "x/Qwen2.5-72B-int8",
        "/m/Qwen2.5-72B.Q8_0.gguf",
        "RedHatAI/Qwen2.5-72B-Instruct-quantized.w8a16",
    ],
)
def test_an_8_bit_name_or_a_gguf_that_names_none_needs_about_half(eight_bit: str) -> None:
    full = total("Qwen/Qwen2.5-72B-Instruct")
    assert full / 2 - 2 <= total(eight_bit) <= full / 2 + 2
    assert total("/m/Qwen2.5-72B.gguf") == total(eight_bit)
    assert total("/m/Qwen2.5-72B-f16.gguf") == full


def test_experts_count_each_and_the_larger_of_two_sizes_counts() -> None:
    assert total("mistralai/Mixtral-8x7B-Instruct-v0.1") == total("x/Model-56B")
    assert total("Qwen/Qwen3-30B-A3B") == total("x/Model-30B")
    assert total("HuggingFaceTB/SmolLM2-135M") < total("Qwen/Qwen2.5-0.5B")


def test_the_total_is_shared_over_the_gpus_with_a_floor_of_16_gb() -> None:
    one, two = serve_vram("Qwen/Qwen2.5-72B", 1), serve_vram("Qwen/Qwen2.5-72B", 2)
    assert one is not None and two is not None
    assert two.per_gpu_gb * 2 >= two.total_gb > one.total_gb  # each GPU its own context
    assert two.per_gpu_gb < one.per_gpu_gb
    small = serve_vram("Qwen/Qwen2.5-0.5B-Instruct", 1)
    assert small is not None and small.per_gpu_gb == 16 > small.total_gb
    assert two.describe() == f"sized for Qwen/Qwen2.5-72B: {two.total_gb} GB over 2 GPUs"
    assert one.describe() == f"sized for Qwen/Qwen2.5-72B: {one.total_gb} GB on 1 GPU"


def test_a_name_without_a_size_is_not_sized() -> None:
    assert serve_vram("my-org/house-model", 1) is None
    assert serve_vram("/models/merged", 2) is None
    assert serve_vram("/models/snapshots/a3b9f01c7e", 1) is None  # a hash, not 3B
    assert serve_vram("/models/Qwen2.5", 1) is None  # a version, not a size
    assert total("llama3:70b") == total("ollama/llama3-70B") > total("mixtral:8x7b")
