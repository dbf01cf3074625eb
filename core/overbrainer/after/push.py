"""``overbrainer push``: a run's model to the Hugging Face Hub, in one commit.

``huggingface_hub.HfApi`` is given the token and the endpoint explicitly: it never reads
``HF_TOKEN`` nor the token file. The token is resolved only for a real push and never
printed, logged or written.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import stat
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from overbrainer import __version__, files
from overbrainer.after.accept import AcceptedRun, accept_run
from overbrainer.after.card import gather, merge_card, newest_compare_record, render
from overbrainer.after.export import human_size
from overbrainer.after.metrics import wilson
from overbrainer.after.report import interval, percent
from overbrainer.config.secrets import resolve_secret
from overbrainer.errors import Interrupted, UserError, signal_of
from overbrainer.job.layout import OUTPUT_DIR
from overbrainer.project import RUNS_DIR, Project
from overbrainer.redact import register_secret
from overbrainer.runs.store import RunStore

DEFAULT_BASE_URL = "https://huggingface.co"
HUB_DIR = "hub"
PUSH_FILE = "push.json"
README = "README.md"
TOKEN_VAR = "OVERBRAINER_HF_TOKEN"  # noqa: S105 - a variable's name, not a secret
_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True)
class Upload:
    """One file of the commit: where it is here and where it goes in the repo."""

    local: Path
    path: str
    size: int


def check_repo(text: str) -> str:
    if not _REPO.match(text) or ".." in text:
        raise UserError(f"`{text}` is not a Hugging Face repo: use NAMESPACE/NAME")
    return text


def _loopback(host: str) -> bool:
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def base_url(project: Project) -> str:
    """``OVERBRAINER_HUB__BASE_URL``: https, or http on a loopback address (tests)."""
    url = project.settings.hub.base_url or DEFAULT_BASE_URL
    parts = urlsplit(url)
    if parts.scheme == "http" and not _loopback(parts.hostname or ""):
        raise UserError(
            "hub.base_url must be https (http only on a loopback address): "
            "check OVERBRAINER_HUB__BASE_URL"
        )
    return url.rstrip("/")


def files_of(run_dir: Path, run_id: str) -> list[Upload]:
    """What ``output/`` sends: no hidden entries, top-level ``checkpoint-*`` or
    ``debug.log``, symlinks, nor a file landing on the root README.md; ``gguf/**`` goes to
    the repo's root."""
    output = run_dir / OUTPUT_DIR
    files.check_dir(output, f"{RUNS_DIR}/{run_id}/{OUTPUT_DIR}")  # a link: files not the run's
    uploads: dict[str, Upload] = {}
    for root, dirs, names in os.walk(output):
        here = Path(root)
        relative = here.relative_to(output)
        top = relative == Path()
        dirs[:] = sorted(
            name
            for name in dirs
            if not name.startswith(".")
            and not (top and name.startswith("checkpoint-"))
            and not (here / name).is_symlink()
        )
        for name in sorted(names):
            path = here / name
            info = path.lstat()
            if name.startswith(".") or not stat.S_ISREG(info.st_mode):
                continue  # a link, a FIFO, a device: not the run's to send
            if top and name == "debug.log":
                continue
            inside = (relative / name).as_posix()
            repo_path = inside.removeprefix("gguf/") if inside.startswith("gguf/") else inside
            if repo_path == README:
                continue
            if repo_path in uploads:
                raise UserError(
                    f"{RUNS_DIR}/{run_id}/{OUTPUT_DIR}: {inside} and "
                    f"{uploads[repo_path].local.relative_to(output).as_posix()} both go to "
                    f"{repo_path} in the repo"
                )
            uploads[repo_path] = Upload(path, repo_path, info.st_size)
    return sorted(uploads.values(), key=lambda upload: upload.path)


def hf_tools_token(env: Mapping[str, str]) -> str:
    """The token the Hugging Face tools use: ``HF_TOKEN``, else the file ``hf auth login``
    writes (``HF_TOKEN_PATH``, else ``token`` in ``HF_HOME``, by default
    ``~/.cache/huggingface``); "" when neither has one."""
    value = env.get("HF_TOKEN", "").strip()
    if value:
        return value
    home = env.get("HF_HOME") or str(
        Path(env.get("XDG_CACHE_HOME") or Path(env.get("HOME") or "~") / ".cache") / "huggingface"
    )
    path = Path(env.get("HF_TOKEN_PATH") or Path(home) / "token").expanduser()
    if not path.is_file():
        return ""
    try:
        return (files.read_text(path, "the Hugging Face token file", 4096) or "").strip()
    except UserError:
        return ""


HOST_VAR = "OVERBRAINER_HUB__BASE_URL"


def _shell_may_send(url: str) -> bool:
    """Whether a token from the shell may go to ``url``: Hugging Face's hub, this machine,
    or a host the shell itself names."""
    return tools_token_goes_to(url) or os.environ.get(HOST_VAR, "").rstrip("/") == url


def tools_token_goes_to(url: str) -> bool:
    """Whether the user's own Hugging Face token (``HF_TOKEN``, ``hf auth login``'s file) may
    be sent to the hub at ``url``: Hugging Face's, or one on this machine. A project's
    ``hub.base_url`` (its ``.env`` may set it) never draws that token to another host."""
    return url.rstrip("/") == DEFAULT_BASE_URL or _loopback(urlsplit(url).hostname or "")


def _token(project: Project) -> str:
    secret = project.settings.hf_token
    value = resolve_secret(secret, "hf_token", project.env).get_secret_value() if secret else ""
    url = base_url(project)
    if value and TOKEN_VAR in os.environ and not _shell_may_send(url):
        # The project's .env must not point the shell's token at a host of its choosing.
        raise UserError(
            f"{TOKEN_VAR} comes from your shell, and hub.base_url ({url}) from the project's "
            "files: the shell's token goes only to huggingface.co or this machine; set "
            f"{HOST_VAR} in the shell too if that hub is yours"
        )
    if not value and tools_token_goes_to(url):
        # The shell's environment only: a project's .env does not choose which of the
        # user's files is read and sent.
        value = hf_tools_token(os.environ)
    if not value:
        if not tools_token_goes_to(url):
            raise UserError(
                f"{TOKEN_VAR} is not set: a token for the hub at {url} is needed to push "
                "(HF_TOKEN and `hf auth login`'s token are sent to huggingface.co only)"
            )
        raise UserError(
            f"{TOKEN_VAR} is not set: a Hugging Face token with write access is needed to push "
            "(nor is HF_TOKEN, and `hf auth login` saved no token)"
        )
    register_secret(value)
    return value


@contextmanager
def hub_errors(token: str | None, namespace: str = "") -> Iterator[None]:
    """The hub's failures as the messages a user reads; the token never in them."""
    import httpx2  # the HTTP client of huggingface_hub 2
    from huggingface_hub.errors import HfHubHTTPError

    try:
        yield
    except HfHubHTTPError as error:
        status = error.response.status_code if error.response is not None else None
        if status == 401:
            raise UserError(
                f"Hugging Face refused the token: set {TOKEN_VAR} to a valid token with write "
                "access"
            ) from None
        if status == 403:
            raise UserError(
                f"the Hugging Face token needs write access to {namespace}: set {TOKEN_VAR} to "
                "a token that has it"
            ) from None
        if status == 429:
            raise UserError("Hugging Face rate limit, retry later") from None
        message = str(error).splitlines()[0] if str(error) else type(error).__name__
        if token and token in message:
            message = "(withheld: it quoted the token)"
        raise UserError(f"Hugging Face request failed: {message}") from None
    except (OSError, httpx2.HTTPError) as error:
        message = str(error) or type(error).__name__
        if token and token in message:
            message = "(withheld: it quoted the token)"
        raise UserError(f"Hugging Face request failed: {message}") from None


def check_win_rate(run_dir: Path, run_id: str, required: float) -> None:
    """Refuse the push unless the newest compare's win-or-tie rate is at least ``required``
    at the lower bound of its 95% interval (``push --require-win-rate``)."""
    found = newest_compare_record(run_dir)
    if found is None:
        raise UserError(
            f"run {run_id} has no compare: run `overbrainer compare --run {run_id}` first "
            f"(--require-win-rate {required} needs one)"
        )
    compare_id, summary = found
    bounds = (summary.get("intervals") or {}).get("win_or_tie")
    if not (isinstance(bounds, list) and len(bounds) == 2):
        # a compare of an earlier version: the interval from its counts
        judged = int(summary.get("questions", 0)) - int(summary.get("unparsed", 0))
        computed = wilson(int(summary.get("wins", 0)) + int(summary.get("ties", 0)), judged)
        bounds = list(computed) if computed else None
    if bounds is None:
        raise UserError(
            f"the newest compare of run {run_id} against its parent ({compare_id}) judged no "
            f"question: --require-win-rate {required} cannot be checked"
        )
    if bounds[0] < required:
        raise UserError(
            f"the newest compare of run {run_id} against its parent ({compare_id}) has a "
            f"win-or-tie rate of {percent(summary.get('win_or_tie'))}, 95% interval "
            f"{interval(bounds)}: its lower bound is under --require-win-rate {required}; "
            "nothing was pushed"
        )


def push_run(
    project: Project,
    store: RunStore,
    run_id: str,
    *,
    repo: str | None = None,
    public: bool = False,
    overwrite_card: bool = False,
    dry_run: bool = False,
    require_win_rate: float | None = None,
    echo: Callable[[str], None],
    warn: Callable[[str], None],
) -> dict[str, Any] | None:
    """Push run ``run_id``'s ``output/`` to the Hub (``dry_run``: say what would be sent;
    ``require_win_rate``: only when the newest compare's lower bound reaches it)."""
    accepted, uploads = _what_to_send(store, run_id)
    if require_win_rate is not None:
        check_win_rate(accepted.dir, run_id, require_win_rate)
    settings = project.settings
    private = not public and settings.hub.private
    visibility = "private" if private else "public"
    chosen = check_repo(repo) if repo else settings.hub.repo
    project_slug = re.sub(r"[^A-Za-z0-9.-]+", "-", settings.project.name).strip("-")
    gguf = [upload.path for upload in uploads if upload.path.endswith(".gguf")]
    hub_dir = accepted.dir / HUB_DIR
    files.check_dir(hub_dir, f"{RUNS_DIR}/{run_id}/{HUB_DIR}")  # before anything is sent
    if dry_run:
        shown = chosen or check_repo(f"you/{project_slug}").replace("you/", "<you>/", 1)
        card = render(gather(settings, accepted.dir, shown, gguf, None), settings)
        _dry_run(hub_dir, run_id, shown, visibility, uploads, card, echo)
        return None
    token = _token(project)
    endpoint = base_url(project)
    from huggingface_hub import CommitOperationAdd, HfApi
    from huggingface_hub.errors import RepositoryNotFoundError

    api = HfApi(endpoint=endpoint, token=token, library_name="overbrainer")
    with hub_errors(token):
        user = api.whoami(token=token)
    repo_id = chosen or check_repo(f"{_user_name(user)}/{project_slug}")
    namespace = repo_id.split("/")[0]
    with hub_errors(token, namespace):
        try:
            info = api.repo_info(repo_id, token=token)
        except RepositoryNotFoundError:
            info = None
        existing = _visibility(api, info, repo_id, run_id, private, token, warn)
        if info is None:
            api.create_repo(repo_id, private=private, token=token, exist_ok=True)
        license = _base_license(api, accepted.dir, settings, token)
        sent_card = merge_card(
            render(gather(settings, accepted.dir, repo_id, gguf, license), settings),
            existing,
            overwrite_card,
        )
        operations = [CommitOperationAdd(upload.path, str(upload.local)) for upload in uploads]
        if sent_card is None:
            warn("kept the repo's own README.md (use --overwrite-card to replace it)")
        else:
            operations.append(CommitOperationAdd(README, sent_card.encode("utf-8")))
        try:
            commit = api.create_commit(
                repo_id,
                operations,
                commit_message=f"Upload run {run_id} with overbrainer {__version__}",
                token=token,
            )
        except KeyboardInterrupt as interrupt:
            raise Interrupted(
                "push cancelled before its commit finished; run it again to resume",
                signal_of(interrupt),
            ) from None
    sent = [operation.path_in_repo for operation in operations]
    size = sum(upload.size for upload in uploads) + (len(sent_card.encode()) if sent_card else 0)
    record = {
        "repo": repo_id,
        "commit": commit.oid,
        "url": f"{endpoint}/{repo_id}",
        "files": sent,
        "private": private if info is None else bool(info.private),
        "pushed": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    plural = "s" if len(sent) != 1 else ""
    echo(f"push: {record['url']} ({len(sent)} file{plural}, {human_size(size)})")
    _save_record(hub_dir, run_id, record)
    return record


def _what_to_send(store: RunStore, run_id: str) -> tuple[AcceptedRun, list[Upload]]:
    accepted = accept_run(store, run_id, "push")
    if accepted.model != OUTPUT_DIR:
        raise UserError(
            f"run {run_id} has no model in {OUTPUT_DIR}/ (only checkpoint {accepted.model}): "
            "export or resume it first"
        )
    uploads = files_of(accepted.dir, run_id)
    if not uploads:
        raise UserError(f"run {run_id} has nothing to push in {OUTPUT_DIR}/")
    return accepted, uploads


def _user_name(user: Any) -> str:
    name = user.get("name") if isinstance(user, dict) else None
    if not isinstance(name, str) or not name:
        raise UserError("Hugging Face request failed: whoami gave no user name")
    return name


def _visibility(  # noqa: PLR0917 - private, called once
    api: Any,
    info: Any,
    repo_id: str,
    run_id: str,
    private: bool,
    token: str,
    warn: Callable[[str], None],
) -> str | None:
    """Refuse a private push into a public repo; the README of an existing repo."""
    if info is None:
        return None
    repo_private = bool(info.private)
    if private and not repo_private:
        raise UserError(
            f"run {run_id} is pushed private, and repo {repo_id} is public: refusing to "
            "make it public (use --public or [hub] private = false)"
        )
    warn(f"repo {repo_id} exists and stays {'private' if repo_private else 'public'}")
    siblings = {sibling.rfilename for sibling in info.siblings or []}
    return _readme(api, repo_id, token) if README in siblings else None


def _dry_run(  # noqa: PLR0917 - private, called once
    hub_dir: Path,
    run_id: str,
    repo: str,
    visibility: str,
    uploads: list[Upload],
    card: str,
    echo: Callable[[str], None],
) -> None:
    shown = f"{RUNS_DIR}/{run_id}/{HUB_DIR}/{README}"
    files.write_atomic(hub_dir / README, card.encode("utf-8"), shown)
    echo(f"push: {repo}, {visibility} when created; nothing is sent (--dry-run)")
    for upload in uploads:
        echo(f"{upload.path}  {human_size(upload.size)}")
    total = sum(upload.size for upload in uploads)
    echo(f"push: {len(uploads)} files, {human_size(total)}; card written to {shown}")


def _save_record(hub_dir: Path, run_id: str, record: dict[str, Any]) -> None:
    text = json.dumps(record, indent=2) + "\n"
    files.write_atomic(
        hub_dir / PUSH_FILE, text.encode("utf-8"), f"{RUNS_DIR}/{run_id}/{HUB_DIR}/{PUSH_FILE}"
    )


def _readme(api: Any, repo_id: str, token: str) -> str | None:
    """The repo's README.md, read with the hub library's session."""
    from huggingface_hub.utils import get_session, hf_raise_for_status

    response = get_session().get(
        f"{api.endpoint}/{repo_id}/resolve/main/{README}",
        headers={"Authorization": f"Bearer {token}"},
        follow_redirects=True,
    )
    if response.status_code == 404:
        return None
    hf_raise_for_status(response)
    return response.content.decode("utf-8", "replace")


def _base_license(api: Any, run_dir: Path, settings: Any, token: str) -> str | None:
    """The license on the base model's Hub card, when the base is a Hub repo."""
    training = settings.training
    base = training.base_model if training is not None else None
    if not base or not _REPO.match(base) or Path(base).exists():
        return None
    if (settings_dir := run_dir.parents[1]) and (settings_dir / base).exists():
        return None
    try:
        info = api.model_info(base, token=token)
    except Exception:  # noqa: BLE001 - a card without a license is still a card
        return None
    card = getattr(info, "card_data", None) or getattr(info, "cardData", None)
    value = card.get("license") if card is not None and hasattr(card, "get") else None
    return value if isinstance(value, str) else None
