"""A loopback Hugging Face Hub for tests: the endpoints ``huggingface_hub`` uses to push a
model (whoami, repo info, repo creation, YAML validation, preupload, commit, file download),
and to read a dataset (its info with its files, a file's download), on 127.0.0.1 with a
real socket. Repositories live in memory; every request is recorded.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit


@dataclass
class Repo:
    private: bool
    files: dict[str, bytes] = field(default_factory=dict)
    commits: list[str] = field(default_factory=list)

    @property
    def sha(self) -> str:
        return self.commits[-1] if self.commits else "0" * 40


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class FakeHub:
    """The hub at :attr:`url`. ``tokens`` maps a token to ``(user, role)``."""

    def __init__(self, tokens: dict[str, tuple[str, str]]) -> None:
        self.tokens = tokens
        self.repos: dict[str, Repo] = {}
        self.datasets: dict[str, Repo] = {}
        """Dataset repositories; a private one is answered only with a known token."""
        self.requests: list[Request] = []
        self.status_override: dict[str, int] = {}
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _body(self) -> bytes:
                length = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(length) if length else b""

            def _handle(self, method: str) -> None:
                body = self._body() if method == "POST" else b""
                path = urlsplit(self.path).path
                hub.requests.append(
                    Request(method, path, {k.lower(): v for k, v in self.headers.items()}, body)
                )
                status, payload, headers = hub.answer(method, path, self.headers, body)
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                if "Content-Type" not in headers:
                    self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if method != "HEAD":
                    self.wfile.write(data)

            def do_GET(self) -> None:
                self._handle("GET")

            def do_HEAD(self) -> None:
                self._handle("HEAD")

            def do_POST(self) -> None:
                self._handle("POST")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def start(self) -> FakeHub:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)

    def _user(self, headers: Any) -> tuple[str, str] | None:
        auth = headers.get("Authorization", "")
        return self.tokens.get(auth.removeprefix("Bearer ").strip())

    def answer(
        self, method: str, path: str, headers: Any, body: bytes
    ) -> tuple[int, Any, dict[str, str]]:
        for prefix, status in self.status_override.items():
            if path.startswith(prefix):
                return status, {"error": f"status {status}"}, {}
        user = self._user(headers)
        if path == "/api/whoami-v2":
            if user is None:
                return 401, {"error": "Invalid credentials in Authorization header"}, {}
            name, role = user
            return 200, _whoami(name, role), {}
        if path == "/api/validate-yaml":
            return 200, {"errors": [], "warnings": []}, {}
        if path == "/api/repos/create" and method == "POST":
            data = json.loads(body)
            repo_id = f"{data.get('organization') or user[0]}/{data['name']}"  # type: ignore[index]
            if repo_id in self.repos:
                return 409, {"error": "You already created this model repo"}, {}
            visibility = data.get("visibility")
            private = visibility == "private" if visibility else bool(data.get("private"))
            self.repos[repo_id] = Repo(private=private)
            return 200, {"url": f"{self.url}/{repo_id}"}, {}
        parts = path.split("/")
        if path.startswith(("/api/datasets/", "/datasets/")):
            return self._dataset(path, user)
        if path.startswith("/api/models/"):
            repo_id = "/".join(parts[3:5])
            repo = self.repos.get(repo_id)
            if repo is None:
                return 404, {"error": "Repository not found"}, {"X-Error-Code": "RepoNotFound"}
            rest = parts[5:]
            if not rest or rest[0] == "revision":
                return 200, _info(repo_id, repo), {}
            if rest[0] == "preupload":
                files = json.loads(body)["files"]
                modes = [
                    {"path": f["path"], "uploadMode": "regular", "shouldIgnore": False}
                    for f in files
                ]
                return 200, {"files": modes}, {}
            if rest[0] == "commit":
                return self._commit(repo_id, repo, body)
        if "/resolve/" in path:
            repo_id = "/".join(parts[1:3])
            name = unquote("/".join(parts[5:]))
            repo = self.repos.get(repo_id)
            if repo is None or name not in repo.files:
                return 404, {"error": "Entry not found"}, {"X-Error-Code": "EntryNotFound"}
            content = repo.files[name]
            return (
                200,
                content,
                {
                    "Content-Type": "text/plain",
                    "ETag": f'"{hashlib.sha1(content).hexdigest()}"',
                    "X-Repo-Commit": repo.sha,
                },
            )
        return 404, {"error": f"no route for {method} {path}"}, {}

    def _commit(self, repo_id: str, repo: Repo, body: bytes) -> tuple[int, Any, dict[str, str]]:
        for line in body.splitlines():
            item = json.loads(line)
            if item["key"] == "file":
                value = item["value"]
                repo.files[value["path"]] = base64.b64decode(value["content"])
        sha = hashlib.sha1(body).hexdigest()
        repo.commits.append(sha)
        return 200, {"commitUrl": f"{self.url}/{repo_id}/commit/{sha}", "commitOid": sha}, {}

    def _dataset(self, path: str, user: tuple[str, str] | None) -> tuple[int, Any, dict[str, str]]:
        parts = path.split("/")
        api = parts[1] == "api"
        repo_id = "/".join(parts[3:5] if api else parts[2:4])
        repo = self.datasets.get(repo_id)
        if repo is None or (repo.private and user is None):
            return 404, {"error": "Repository not found"}, {"X-Error-Code": "RepoNotFound"}
        if api:
            info = _info(repo_id, repo)
            info["siblings"] = [
                {"rfilename": name, "size": len(content)}
                for name, content in sorted(repo.files.items())
            ]
            return 200, info, {}
        name = unquote("/".join(parts[6:]))  # /datasets/ORG/NAME/resolve/REV/PATH
        if name not in repo.files:
            return 404, {"error": "Entry not found"}, {"X-Error-Code": "EntryNotFound"}
        return 200, repo.files[name], {"Content-Type": "text/plain", "X-Repo-Commit": repo.sha}

    def commits(self) -> list[Request]:
        return [r for r in self.requests if "/commit/" in r.path]


def _whoami(name: str, role: str) -> dict[str, Any]:
    return {
        "type": "user",
        "name": name,
        "fullname": name,
        "orgs": [],
        "auth": {"type": "access_token", "accessToken": {"displayName": "test", "role": role}},
    }


def _info(repo_id: str, repo: Repo) -> dict[str, Any]:
    return {
        "id": repo_id,
        "modelId": repo_id,
        "private": repo.private,
        "sha": repo.sha,
        "siblings": [{"rfilename": name} for name in sorted(repo.files)],
        "tags": [],
        "downloads": 0,
        "likes": 0,
    }
