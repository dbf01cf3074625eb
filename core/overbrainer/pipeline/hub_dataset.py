"""A Hugging Face dataset's JSON Lines and CSV files, for ``dataset import hf:ORG/NAME[:SPLIT]``.

The Hub is ``HF_ENDPOINT`` (the Hugging Face tools' own variable, from the shell), else
huggingface.co; ``HF_TOKEN``, when set, is sent for a gated or private dataset. The files
of the split are found by name as the ``datasets`` library finds them (``train.jsonl``,
``data/train-00000-of-00001.jsonl``, ``train/part.csv``; a repository whose files name no
split is all ``train``), fetched into memory and read as a local file is. Parquet is not
read: ``datasets`` and pyarrow are not dependencies of overbrainer.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import PurePosixPath

from overbrainer import files
from overbrainer.errors import UserError
from overbrainer.pipeline.import_rows import Read, kind_of, read_bytes
from overbrainer.redact import register_secret

PREFIX = "hf:"
DEFAULT_ENDPOINT = "https://huggingface.co"
DEFAULT_SPLIT = "train"
SPLITS = ("train", "validation", "valid", "dev", "test", "eval")
"""Names a file of a split starts with (or a folder of it is named)."""
_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
_SPLIT = re.compile(r"^[A-Za-z0-9_.-]+$")
_AFTER_SPLIT = re.compile(r"^[-._ 0-9]")
_TRUE = {"1", "on", "yes", "true"}


@dataclass(frozen=True)
class HubDataset:
    """A dataset repository of the Hub and the split to import."""

    repo: str
    split: str

    @property
    def label(self) -> str:
        return f"{PREFIX}{self.repo}:{self.split}"


def parse(spec: str) -> HubDataset:
    """``hf:ORG/NAME[:SPLIT]`` read, or a ``UserError`` saying how it is written."""
    repo, _, split = spec.removeprefix(PREFIX).partition(":")
    split = split or DEFAULT_SPLIT
    if not _REPO.match(repo) or ".." in repo or not _SPLIT.match(split):
        raise UserError(f"{spec}: a Hugging Face dataset is hf:ORG/NAME or hf:ORG/NAME:SPLIT")
    return HubDataset(repo, split)


def endpoint() -> str:
    return (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def offline() -> bool:
    """Whether the Hugging Face tools are told to stay offline (``HF_HUB_OFFLINE``)."""
    import huggingface_hub.constants  # read once, at its import: its view counts too

    value = os.environ.get("HF_HUB_OFFLINE", "").strip().lower()
    return value in _TRUE or bool(huggingface_hub.constants.HF_HUB_OFFLINE)


def in_split(name: str, split: str) -> bool:
    """Whether the repository file ``name`` holds rows of ``split``: a folder of that name,
    or a file name starting with it and then a separator or a digit."""
    path = PurePosixPath(name)
    if split in path.parts[:-1]:
        return True
    stem = path.name
    return stem.startswith(split) and (
        len(stem) == len(split) or bool(_AFTER_SPLIT.match(stem[len(split) :]))
    )


def choose(names: list[str], dataset: HubDataset) -> list[str]:
    """The files of ``dataset``'s split that overbrainer reads, or a ``UserError``."""
    readable = sorted(name for name in names if kind_of(name) is not None)
    chosen = [name for name in readable if in_split(name, dataset.split)]
    named = any(in_split(name, split) for name in readable for split in SPLITS)
    if not chosen and dataset.split == DEFAULT_SPLIT and not named:
        chosen = readable
    if chosen:
        return chosen
    found = sorted({s for name in readable for s in SPLITS if in_split(name, s)})
    if found:
        raise UserError(
            f"{dataset.label}: no JSON Lines or CSV file of split {dataset.split!r}; its "
            f"splits: {', '.join(found)} (hf:{dataset.repo}:SPLIT)"
        )
    parquet = any(name.endswith(".parquet") for name in names)
    raise UserError(
        f"{dataset.label}: no JSON Lines or CSV file in the dataset"
        + (
            " (its files are Parquet, which overbrainer does not read: convert them, e.g. "
            "`datasets.load_dataset(...)[split].to_json('rows.jsonl')`, and import that file)"
            if parquet
            else ""
        )
    )


def read_hub(spec: str) -> tuple[Read, str]:
    """The items of the Hub dataset ``spec`` and its label (``hf:ORG/NAME:SPLIT``)."""
    dataset = parse(spec)
    if offline():
        raise UserError(
            f"{dataset.label}: HF_HUB_OFFLINE is set, so the Hugging Face Hub is not asked: "
            "unset it, or import a downloaded copy of the dataset's file"
        )
    from huggingface_hub import HfApi, hf_hub_url
    from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

    url = endpoint()
    token: str | bool = os.environ.get("HF_TOKEN", "").strip() or False
    if token:
        register_secret(str(token))
    api = HfApi(endpoint=url, token=token, library_name="overbrainer")
    read = Read()
    with _hub_errors(dataset, url):
        info = api.dataset_info(dataset.repo, files_metadata=True)
        sizes = {sibling.rfilename: sibling.size for sibling in info.siblings or []}
        for name in choose(list(sizes), dataset):
            size = sizes[name]
            if size is not None and size > files.READ_LIMIT:
                raise UserError(
                    f"{dataset.label}: {name} is larger than {files.READ_LIMIT} bytes: "
                    "refusing to read it"
                )
            response = get_session().get(
                hf_hub_url(dataset.repo, name, repo_type="dataset", endpoint=url),
                headers=build_hf_headers(token=token, library_name="overbrainer"),
                follow_redirects=True,
            )
            hf_raise_for_status(response)
            kind = kind_of(name)
            assert kind is not None  # chosen for it
            part = read_bytes(response.content, f"{PREFIX}{dataset.repo}/{name}", kind)
            read.items.extend(part.items)
            read.ignored.update(part.ignored)
    return read, dataset.label


@contextmanager
def _hub_errors(dataset: HubDataset, url: str) -> Iterator[None]:
    """The Hub's failures as messages a user reads (the token never in them: redacted)."""
    import httpx2  # the HTTP client of huggingface_hub 2
    from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, RepositoryNotFoundError

    try:
        yield
    except GatedRepoError:
        raise UserError(
            f"{dataset.label}: the dataset is gated: accept its terms on the Hub, then set "
            "HF_TOKEN to a token of that account"
        ) from None
    except RepositoryNotFoundError:
        raise UserError(
            f"{dataset.label}: no dataset {dataset.repo} on {url} (a private one needs HF_TOKEN)"
        ) from None
    except HfHubHTTPError as error:
        message = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise UserError(f"{dataset.label}: the Hugging Face Hub refused: {message}") from None
    except (OSError, httpx2.HTTPError) as error:
        raise UserError(
            f"{dataset.label}: cannot reach the Hugging Face Hub at {url} "
            f"({str(error) or type(error).__name__}): check the network and HF_ENDPOINT, or "
            "import a downloaded copy of the dataset's file"
        ) from None
