"""A stand-in for an engine's server (vLLM's ``vllm serve``, SGLang's
``python -m sglang.launch_server``), standard library only, so it runs under any python3
on a target: it takes the documented flags strictly, writes its argv, environment names
and process group to ``argv.json`` in ``engine-records/ID/`` beside the ``.serve/ID``
directory it is started in (which the serve removes when it ends), and answers
``/health``, ``/v1/models`` (naming the model) and ``/v1/chat/completions`` on the host
and port it was given, and Axolotl's online teacher's scoring of token ids in the engine's
own format (vLLM: ``/v1/completions`` with ``prompt_logprobs``; SGLang: ``/generate`` with
``input_top_logprobs``; each request's token counts kept in ``scored.jsonl``) (each
answer after ``FAKE_ENGINE_DELAY`` seconds; the most answered at once in ``peak.json``),
once it has "loaded" for ``FAKE_ENGINE_LOAD`` seconds (``FAKE_ENGINE_CRASH``: it ends first,
saying why).

It runs at most ``--max-num-seqs`` / ``--max-running-requests`` requests at once, fewer when
``FAKE_ENGINE_CAPACITY`` says its memory holds fewer (unset: no bound); the others wait in
its queue, and each request's arrival notes how many were waiting then (``arrivals.json``).
``/metrics`` reports the requests running and waiting in the engine's own Prometheus text
(vLLM's ``vllm:num_requests_running``/``_waiting``; SGLang's ``sglang:num_running_reqs``/
``num_queue_reqs`` only with ``--enable-metrics``); ``FAKE_ENGINE_METRICS=off`` answers 404.

    fake_engine.py vllm serve MODEL --host H --port P [--tensor-parallel-size N] [...]
    fake_engine.py sglang -m sglang.launch_server --model-path MODEL --host H --port P [--tp N]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_made = itertools.count()


def listed(asked: str) -> str | None:
    """The list the test prompts ask for (``subtopics|TOPIC|COUNT``,
    ``questions|TOPIC|SUBTOPIC|COUNT``), as JSON; each item new, so none is a duplicate."""
    parts = asked.split("|")
    if parts[0] == "subtopics" and len(parts) == 3:
        return json.dumps([f"{parts[1]} area {next(_made)}" for _ in range(int(parts[2]))])
    if parts[0] == "questions" and len(parts) == 4:
        names = [next(_made) for _ in range(int(parts[3]))]
        return json.dumps([f"Q{n} alpha{n} beta{n} gamma{n} delta{n}?" for n in names])
    return None


def parse(argv: list[str]) -> argparse.Namespace:
    kind, rest = argv[0], argv[1:]
    parser = argparse.ArgumentParser(prog=kind)
    parser.set_defaults(kind=kind)
    if kind == "vllm":
        parser.add_argument("command", choices=["serve"])
        parser.add_argument("model")
        parser.add_argument("--tensor-parallel-size", type=int, default=1)
        parser.add_argument("--max-model-len", type=int)
        parser.add_argument("--max-num-seqs", dest="capacity", type=int)
    else:
        parser.add_argument("-m", dest="module", choices=["sglang.launch_server"], required=True)
        parser.add_argument("--model-path", dest="model", required=True)
        parser.add_argument("--tp", type=int, default=1)
        parser.add_argument("--context-length", type=int)
        parser.add_argument("--max-running-requests", dest="capacity", type=int)
        parser.add_argument("--enable-metrics", action="store_true")
    parser.add_argument("--host", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--reasoning-parser")
    return parser.parse_args(rest)


VLLM_METRICS = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{engine="0",model_name="MODEL"}} {0:.1f}
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{engine="0",model_name="MODEL"}} {1:.1f}
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{{engine="0",model_name="MODEL"}} 0.25
"""
SGLANG_METRICS = """\
# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{{engine_type="unified",model_name="MODEL",pp_rank="0",tp_rank="0"}} {0:.1f}
# HELP sglang:num_queue_reqs The number of requests in the waiting queue.
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{{engine_type="unified",model_name="MODEL",pp_rank="0",tp_rank="0"}} {1:.1f}
# HELP sglang:token_usage The token usage.
# TYPE sglang:token_usage gauge
sglang:token_usage{{engine_type="unified",model_name="MODEL",pp_rank="0",tp_rank="0"}} 0.28
"""


def metrics_text(kind: str, options: argparse.Namespace) -> str | None:
    """The engine's ``/metrics`` page, to format with (running, waiting); None: it serves
    none (SGLang without ``--enable-metrics``, or ``FAKE_ENGINE_METRICS=off``)."""
    if os.environ.get("FAKE_ENGINE_METRICS") == "off":
        return None
    if kind == "vllm":
        return VLLM_METRICS.replace("MODEL", options.model)
    return SGLANG_METRICS.replace("MODEL", options.model) if options.enable_metrics else None


def _top(position: int, k: int) -> list[tuple[int, float]]:
    """The parent's top ``k`` at ``position``: made-up ids and falling logprobs."""
    return [(100 + position + j, -0.5 * (j + 1)) for j in range(k)]


def vllm_prompt_logprobs(request: dict, model: str) -> dict:
    """vLLM's reply to a completion of token ids with ``prompt_logprobs = k``: a choice a
    prompt, its ``prompt_logprobs`` None for the first token, then per token a dict of
    token id (a string) to ``{logprob, rank, decoded_token}``: the prompt's own token first
    (its rank), then the top k."""
    k = int(request["prompt_logprobs"])
    choices = []
    for index, ids in enumerate(request["prompt"]):
        rows: list[dict | None] = [None]
        for position, token in enumerate(ids[1:], start=1):
            row = {str(token): {"logprob": -3.0, "rank": 40, "decoded_token": "x"}}
            for rank, (top, logprob) in enumerate(_top(position, k), start=1):
                row[str(top)] = {"logprob": logprob, "rank": rank, "decoded_token": "y"}
            rows.append(row)
        choices.append({"index": index, "text": "", "logprobs": None, "finish_reason": "length",
                        "prompt_logprobs": rows})  # fmt: skip
    return {"id": "cmpl-2", "object": "text_completion", "model": model, "choices": choices}


def sglang_input_logprobs(request: dict) -> list[dict]:
    """SGLang's ``/generate`` reply for a batch of ``input_ids``: one item a sequence, its
    ``meta_info.input_top_logprobs`` None first, then ``[logprob, id, text]`` rows."""
    k = int(request["top_logprobs_num"])
    return [
        {"text": "", "meta_info": {"input_top_logprobs": [None] + [
            [[logprob, top, "y"] for top, logprob in _top(position, k)]
            for position in range(1, len(ids))
        ]}}
        for ids in request["input_ids"]
    ]  # fmt: skip


def main() -> None:
    options = parse(sys.argv[1:])
    here = os.getcwd()
    records = os.path.join(here, "..", "..", "engine-records", os.path.basename(here))
    os.makedirs(records, exist_ok=True)
    with open(os.path.join(records, "argv.json"), "w", encoding="utf-8") as file:
        json.dump({"argv": sys.argv[1:], "env": sorted(os.environ), "pgid": os.getpgrp()}, file)
    model = options.model
    if os.environ.get("FAKE_ENGINE_CRASH"):  # as an engine whose model does not fit ends
        print("stand-in engine: CUDA out of memory while loading the model", file=sys.stderr)
        sys.exit(1)
    time.sleep(float(os.environ.get("FAKE_ENGINE_LOAD", "0")))
    in_flight = {"now": 0, "peak": 0, "waiting": 0}
    lock = threading.Lock()
    bounds = [b for b in (options.capacity, os.environ.get("FAKE_ENGINE_CAPACITY")) if b]
    slots = threading.BoundedSemaphore(min(int(b) for b in bounds)) if bounds else None
    arrivals: list[int] = []
    metrics = metrics_text(sys.argv[1], options)

    def arrive() -> None:
        """Wait for a slot of the engine's batch, in its queue meanwhile."""
        with lock:
            arrivals.append(in_flight["waiting"])
            in_flight["waiting"] += 1
            with open(os.path.join(records, "arrivals.json"), "w", encoding="utf-8") as file:
                json.dump(arrivals, file)
        if slots is not None:
            slots.acquire()
        with lock:
            in_flight["waiting"] -= 1

    def count(step: int) -> None:
        """The requests answered at once: the most in ``peak.json`` beside ``argv.json``."""
        with lock:
            in_flight["now"] += step
            if in_flight["now"] > in_flight["peak"]:
                in_flight["peak"] = in_flight["now"]
                with open(os.path.join(records, "peak.json"), "w", encoding="utf-8") as file:
                    json.dump({"peak": in_flight["peak"]}, file)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            return

        def reply(self, body: object, status: int = 200) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path == "/health":
                self.reply({})
            elif self.path == "/metrics" and metrics is not None:
                with lock:
                    data = metrics.format(in_flight["now"], in_flight["waiting"]).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            elif self.path == "/v1/models":
                self.reply({"object": "list", "data": [{"id": model, "object": "model"}]})
            else:
                self.reply({"error": "not found"}, 404)

        def scored(self, ids: list[list[int]]) -> None:
            with lock, open(os.path.join(records, "scored.jsonl"), "a", encoding="utf-8") as file:
                file.write(json.dumps({"path": self.path, "lengths": [len(i) for i in ids]}) + "\n")

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            request = json.loads(self.rfile.read(length))
            if self.path == "/v1/completions" and options.kind == "vllm":
                self.scored(request["prompt"])
                self.reply(vllm_prompt_logprobs(request, model))
                return
            if self.path == "/generate" and options.kind == "sglang":
                self.scored(request["input_ids"])
                self.reply(sglang_input_logprobs(request))
                return
            if self.path != "/v1/chat/completions" or request.get("model") != model:
                self.reply({"error": {"message": f"no model {request.get('model')}"}}, 404)
                return
            arrive()
            count(1)
            try:
                time.sleep(float(os.environ.get("FAKE_ENGINE_DELAY", "0")))
            finally:
                count(-1)
                if slots is not None:
                    slots.release()
            asked = request["messages"][-1]["content"]
            content = listed(asked) or f"served answer to: {asked}"
            self.reply({
                "id": "cmpl-1", "object": "chat.completion", "model": model,
                "choices": [{"index": 0, "finish_reason": "stop", "message": {
                    "role": "assistant", "content": content}}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 20},
            })  # fmt: skip

    ThreadingHTTPServer((options.host, options.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
