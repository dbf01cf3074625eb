"""The engines overbrainer ships: vLLM, SGLang and llama-cpp-python's server.

Their flags are the documented ones (``vllm serve --help``, SGLang's server arguments,
``llama_cpp.server``'s settings); each listens on 127.0.0.1 only, and no key reaches its
command line.
"""

from __future__ import annotations

from collections.abc import Callable

from overbrainer import hookimpl
from overbrainer.engines import Engine, EngineLaunch, EngineMetrics

LOOPBACK = "127.0.0.1"


class Vllm(Engine):
    """``vllm serve MODEL``: OpenAI's API, ``/health``, up to 20 top logprobs (its
    ``--max-logprobs`` default)."""

    name = "vllm"
    top_logprobs_cap = 20
    capacity_flag = "--max-num-seqs"
    default_capacity = 256  # vLLM's max_num_seqs for its API server (1024 on >= 70 GiB GPUs)
    reasoning_parsers = ("deepseek_r1", "qwen3", "granite", "glm45", "gpt_oss")
    install = "vllm"
    metrics = EngineMetrics("vllm:num_requests_running", "vllm:num_requests_waiting")

    def command(self, launch: EngineLaunch) -> list[str]:
        argv = [f"{launch.bin_dir}vllm", "serve", launch.model, "--host", LOOPBACK,
                "--port", str(launch.port)]  # fmt: skip
        if launch.gpus is not None:
            argv += ["--tensor-parallel-size", str(launch.gpus)]
        return [*argv, *launch.args]


class Sglang(Engine):
    """``python -m sglang.launch_server``: OpenAI's API, ``/health``."""

    name = "sglang"
    top_logprobs_cap = 20
    capacity_flag = "--max-running-requests"
    default_capacity = 256  # SGLang sizes it from the GPU's memory: a floor of it
    reasoning_parsers = ("deepseek-r1", "qwen3", "glm45", "gpt-oss")
    install = "sglang[all]"
    module = "sglang"
    metrics = EngineMetrics("sglang:num_running_reqs", "sglang:num_queue_reqs")
    METRICS_FLAG = "--enable-metrics"

    def reported_metrics(self, args: tuple[str, ...]) -> EngineMetrics | None:
        """SGLang serves ``/metrics`` only when started with ``--enable-metrics``."""
        return self.metrics if self.METRICS_FLAG in args else None

    def command(self, launch: EngineLaunch) -> list[str]:
        argv = [f"{launch.bin_dir}python", "-m", "sglang.launch_server", "--model-path",
                launch.model, "--host", LOOPBACK, "--port", str(launch.port)]  # fmt: skip
        if launch.gpus is not None:
            argv += ["--tp", str(launch.gpus)]
        return [*argv, *launch.args]



class LlamaCpp(Engine):
    """llama-cpp-python's server (the toolchain ``export`` builds): a GGUF file on the CPU
    or a GPU; no ``/health``, so ``/v1/models`` alone says it is up. ``--model_alias`` is
    the model itself, the name the roles ask for."""

    name = "llama.cpp"
    health_path = None
    top_logprobs_cap = 20
    default_capacity = 1  # llama-cpp-python's server answers one request at a time
    install = "llama-cpp-python[server]"
    module = "llama_cpp"

    def command(self, launch: EngineLaunch) -> list[str]:
        return [f"{launch.bin_dir}python", "-m", "llama_cpp.server", "--model", launch.model,
                "--model_alias", launch.model, "--host", LOOPBACK, "--port", str(launch.port),
                *launch.args]  # fmt: skip



@hookimpl
def register_engines(register: Callable[[Engine], None]) -> None:
    for engine in (Vllm(), Sglang(), LlamaCpp()):
        register(engine)
