"""Stands in for ``python -m llama_cpp.server`` in the fast tier: the same command line,
and an OpenAI-compatible streamed chat on 127.0.0.1 (the real server is the `real` tier's).

It answers ``Child answer to: QUESTION`` word by word (``Base answer`` for a GGUF named
``base-*``, ``Other answer`` for another run's ``run-*``); a question holding ``FAIL`` gets a
500, and so does one holding ``BASEFAIL`` asked of a base. A GGUF holding ``unloadable``
(converted from a model whose path says so) fails to load: the server exits.
"""

import argparse
import json
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    whose = "Child"

    def log_message(self, format, *args):
        print(format % args, flush=True)

    def do_GET(self):
        body = json.dumps({"data": [{"id": "child"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        question = request["messages"][-1]["content"]
        whose = self.whose
        failing = "BASEFAIL" if "BASEFAIL" in question else "FAIL" if "FAIL" in question else ""
        if (failing, whose) in (("FAIL", "Child"), ("BASEFAIL", "Base")):
            self.send_response(500)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        words = f"{whose} answer to: {question}".split(" ")
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        for index, word in enumerate(words):
            text = word if index == 0 else " " + word
            chunk = {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()
            time.sleep(0.001)
        end = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        self.wfile.write(f"data: {json.dumps(end)}\n\ndata: [DONE]\n\n".encode())
        self.wfile.flush()
        self.close_connection = True


def main():
    parser = argparse.ArgumentParser()
    for name in ("--model", "--host", "--port", "--n_gpu_layers", "--n_ctx"):
        parser.add_argument(name)
    args = parser.parse_args()
    name = os.path.basename(args.model)
    with open(args.model, "rb") as file:
        if b"unloadable" in file.read():
            print(f"error loading model {name}", flush=True)
            sys.exit(1)
    Handler.whose = (
        "Base" if name.startswith("base-") else "Other" if name.startswith("run-") else "Child"
    )
    print(f"serving {args.model} with n_ctx {args.n_ctx}", flush=True)
    ThreadingHTTPServer((args.host, int(args.port)), Handler).serve_forever()


main()
