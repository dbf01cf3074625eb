"""Serve a GGUF (the child, its base, another run's child) with llama.cpp's OpenAI-compatible
server and ask it the questions of a compare, one at a time, on the target. Stdlib only; run
with the toolchain's Python.

Usage: python serve_child.py GGUF N_CTX MAX_TOKENS TEMPERATURE START_SECS [ANSWERS]

Run in the compare's job directory: reads ``questions.jsonl`` ({id, messages}), appends one
line per answer to ANSWERS (``child_answers.jsonl`` unless given) as each comes (ids already
there are skipped, so a second run resumes), writes ``hardware.json`` and the server's log
to ``server.log``. Errors end with a line ``error: MESSAGE`` on stderr and exit 1.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

ANSWERS = "child_answers.jsonl"
QUESTIONS = "questions.jsonl"
LOG = "server.log"
REQUEST_TIMEOUT = 600


class Failure(Exception):
    pass


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def log_tail(lines=20):
    try:
        with open(LOG, encoding="utf-8", errors="replace") as file:
            return "".join(file.readlines()[-lines:]).rstrip()
    except OSError:
        return ""


def wait_ready(process, url, start_secs):
    deadline = time.monotonic() + start_secs
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise Failure(f"llama-server exited before it was ready:\n{log_tail()}")
        try:
            with urllib.request.urlopen(url + "/v1/models", timeout=5) as reply:  # noqa: S310 - our http URL
                if reply.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.2)
    raise Failure(f"llama-server was not ready after {start_secs} s:\n{log_tail()}")


def ask(url, messages, max_tokens, temperature):
    """One streamed answer: its text, finish reason, tokens and timings."""
    body = json.dumps(
        {
            "messages": messages,
            "stream": True,
            "max_tokens": max_tokens,
            "temperature": temperature,
        }
    ).encode()
    request = urllib.request.Request(  # noqa: S310 - our own loopback http URL
        url + "/v1/chat/completions", body, {"Content-Type": "application/json"}
    )
    started = time.monotonic()
    first = None
    parts = []
    tokens = 0
    finish = None
    with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT) as reply:  # noqa: S310
        for raw in reply:
            line = raw.decode("utf-8", "replace").strip()
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                break
            chunk = json.loads(data)
            choice = (chunk.get("choices") or [{}])[0]
            delta = choice.get("delta") or {}
            # llama.cpp's server sends one chunk per token, some with an empty piece.
            text = delta.get("content")
            if text is not None or delta.get("reasoning_content") is not None:
                if first is None:
                    first = time.monotonic() - started
                tokens += 1
                parts.append(text or "")
            finish = choice.get("finish_reason") or finish
    seconds = time.monotonic() - started
    generating = seconds - (first or 0.0)
    return {
        "answer": "".join(parts),
        "finish": finish,
        "tokens": tokens,
        "seconds": round(seconds, 4),
        "first_token_seconds": round(first, 4) if first is not None else None,
        "tokens_per_second": round(tokens / generating, 3) if generating > 0 and tokens else None,
    }


def hardware(python):
    build = "cpu"
    try:
        probe = "import llama_cpp; print(bool(llama_cpp.llama_supports_gpu_offload()))"
        out = subprocess.run(
            [python, "-c", probe], capture_output=True, text=True, timeout=60, check=False
        ).stdout
        build = "cuda" if out.strip() == "True" else "cpu"
    except (OSError, subprocess.SubprocessError):
        pass
    gpus = []
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30, check=False,
        ).stdout  # fmt: skip
        gpus = [line.strip() for line in out.splitlines() if line.strip()]
    except (OSError, subprocess.SubprocessError):
        pass
    cpu = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as file:
            for line in file:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"build": build, "gpus": gpus, "cpu": cpu}


def answered(answers):
    done = set()
    try:
        with open(answers, encoding="utf-8") as file:
            for line in file:
                try:
                    done.add(json.loads(line)["id"])
                except (ValueError, KeyError):
                    continue
    except OSError:
        pass
    return done


def serve(gguf, n_ctx, max_tokens, temperature, start_secs, answers):  # noqa: PLR0917
    with open(QUESTIONS, encoding="utf-8") as file:
        questions = [json.loads(line) for line in file if line.strip()]
    done = answered(answers)
    with open("hardware.json", "w", encoding="utf-8") as file:
        json.dump(hardware(sys.executable), file)
    todo = [question for question in questions if question["id"] not in done]
    if not todo:
        return
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    argv = [
        sys.executable, "-m", "llama_cpp.server", "--model", gguf, "--host", "127.0.0.1",
        "--port", str(port), "--n_gpu_layers", "-1", "--n_ctx", str(n_ctx),
    ]  # fmt: skip
    with open(LOG, "ab") as log:
        process = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
    try:
        wait_ready(process, url, start_secs)
        with open(answers, "a", encoding="utf-8") as out:
            for question in todo:
                try:
                    record = {
                        "id": question["id"],
                        **ask(url, question["messages"], max_tokens, temperature),
                    }
                except (urllib.error.URLError, OSError, ValueError) as error:
                    if process.poll() is not None:
                        raise Failure(
                            f"llama-server exited while answering:\n{log_tail()}"
                        ) from None
                    record = {"id": question["id"], "error": str(error)}
                out.write(json.dumps(record) + "\n")
                out.flush()
                os.fsync(out.fileno())
                print(f"answered {question['id']}", flush=True)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def _terminated(signum, frame):
    # SIGTERM (a cancel from overbrainer) unwinds like an error: the cleanup runs.
    sys.exit(128 + signum)


def main():
    signal.signal(signal.SIGTERM, _terminated)
    gguf, n_ctx, max_tokens, temperature, start_secs = sys.argv[1:6]
    answers = sys.argv[6] if len(sys.argv) > 6 else ANSWERS
    try:
        serve(gguf, int(n_ctx), int(max_tokens), float(temperature), int(start_secs), answers)
    except Failure as failure:
        sys.stderr.write(f"error: {failure}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
