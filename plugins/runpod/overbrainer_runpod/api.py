"""Runpod's GraphQL API through the runpod SDK, its errors sorted for the caller.

The SDK is imported here, on first use: it takes about two seconds. It reads its key from
``runpod.api_key`` and its URL from ``RUNPOD_API_BASE_URL`` at each call. Its
``get_pods``, ``get_pod`` and ``terminate_pod`` serve as they are; the create, the GPU
stock, the secrets, data centers and volumes go through ``run_graphql_query`` with queries
built here, every string escaped by GraphQL's rules (the SDK's ``create_pod`` puts values
into its mutation unescaped: a quote or line break in a start command breaks or injects
into the query).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from overbrainer.plugin import TransientError, UserError
from overbrainer_runpod.logstream import DEFAULT_REST, LogClient

NO_KEY = "no Runpod API key: set OVERBRAINER_RUNPOD__API_KEY"
BASE_URL_ENV = "RUNPOD_API_BASE_URL"


class Refused(Exception):
    """The API answered with an error: ``message`` is what it said."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    @property
    def kind(self) -> str:
        """``capacity``, ``forbidden``, ``credit``, ``not_found`` or ``rejected``."""
        text = self.message.lower()
        if "no longer any instances available" in text or "does not have the resources" in text:
            return "capacity"
        if "forbidden" in text or "not allowed" in text or "permission" in text:
            return "forbidden"
        if "balance" in text or "insufficient" in text or "credit" in text:
            return "credit"
        if "not found" in text:
            return "not_found"
        return "rejected"


class Ambiguous(Exception):
    """No answer, or one that says nothing (a timeout, a 5xx): the call may have been done."""


def gql(value: str) -> str:
    """``value`` as a GraphQL string literal: JSON's escapes are GraphQL's."""
    return json.dumps(value, ensure_ascii=True)


def gql_input(values: Mapping[str, Any]) -> str:
    """An input object literal; strings escaped, ``Enum`` values bare."""
    parts = []
    for key, value in values.items():
        if value is None:
            continue
        parts.append(f"{key}: {_literal(value)}")
    return "{" + ", ".join(parts) + "}"


@dataclass(frozen=True)
class Enum:
    name: str


def _literal(value: Any) -> str:
    if isinstance(value, Enum):
        return value.name
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return gql(value)
    if isinstance(value, list):
        return "[" + ", ".join(_literal(item) for item in value) + "]"
    if isinstance(value, Mapping):
        return gql_input(value)
    raise TypeError(f"no GraphQL literal for {value!r}")


@dataclass
class RunpodApi:
    """The account of ``key``; ``base_url`` replaces the SDK's when set. ``calls`` counts
    the requests made (measured per run by ``benchmarks/runpod.py``)."""

    key: str
    base_url: str | None = None
    calls: int = 0
    rest_url: str | None = None
    """Runpod's REST API, for the pods' log stream; the real one when None."""
    _sdk: Any = field(default=None, repr=False)

    def sdk(self) -> Any:
        if self._sdk is None:
            # Importing the SDK sets these loggers to WARNING for the whole process (its
            # __init__): OVERBRAINER_LOG=debug would lose them.
            quiet = ("urllib3", "paramiko", "uvicorn")
            levels = {name: logging.getLogger(name).level for name in quiet}
            import runpod

            for name, level in levels.items():
                logging.getLogger(name).setLevel(level)
            self._sdk = runpod
        self._sdk.api_key = self.key
        if self.base_url:
            os.environ[BASE_URL_ENV] = self.base_url.rstrip("/")
        return self._sdk

    def _call(self, function: Any, *args: Any) -> Any:
        import requests

        sdk = self.sdk()
        self.calls += 1
        try:
            return function(*args)
        except sdk.error.AuthenticationError:
            raise UserError(
                "the Runpod API refused the key (HTTP 401): check OVERBRAINER_RUNPOD__API_KEY"
            ) from None
        except sdk.error.QueryError as error:
            raise Refused(str(error.args[0] if error.args else error)) from None
        except (requests.Timeout, requests.ConnectionError, ValueError) as error:
            # ValueError: a body that is not JSON (a proxy's 502 page).
            raise Ambiguous(
                f"no usable answer from the Runpod API ({type(error).__name__})"
            ) from None

    def query(self, text: str) -> dict[str, Any]:
        self.sdk()  # the SDK imported here, first
        from runpod.api.graphql import run_graphql_query

        answer = self._call(run_graphql_query, text)
        return dict(answer.get("data") or {})

    def safe(self, text: str) -> dict[str, Any]:
        """``query`` for a read: no answer is worth a retry, a refusal is the user's."""
        try:
            return self.query(text)
        except Ambiguous as error:
            raise TransientError(str(error)) from None
        except Refused as error:
            raise UserError(f"the Runpod API refused: {error.message}") from None

    # Pods.

    def pods(self) -> list[dict[str, Any]]:
        try:
            return list(self._call(self.sdk().get_pods) or [])
        except Ambiguous as error:
            raise TransientError(str(error)) from None
        except Refused as error:
            raise UserError(f"the Runpod API refused: {error.message}") from None

    def pod(self, pod_id: str) -> dict[str, Any] | None:
        """The pod, or None when the API does not know it (any more)."""
        try:
            found = self._call(self.sdk().get_pod, pod_id)
        except Ambiguous as error:
            raise TransientError(str(error)) from None
        except Refused as error:
            if error.kind == "not_found":
                return None
            raise UserError(f"the Runpod API refused: {error.message}") from None
        if not found or found.get("desiredStatus") == "TERMINATED":
            return None
        return dict(found)

    def terminate(self, pod_id: str) -> None:
        try:
            self._call(self.sdk().terminate_pod, pod_id)
        except Ambiguous as error:
            raise TransientError(str(error)) from None
        except Refused as error:
            if error.kind != "not_found":
                raise UserError(
                    f"the Runpod API refused to delete pod {pod_id}: {error.message}"
                ) from None

    def create(self, spec: Mapping[str, Any]) -> dict[str, Any]:
        """``podFindAndDeployOnDemand``; ``Refused`` and ``Ambiguous`` are the caller's."""
        mutation = (
            f"mutation {{ podFindAndDeployOnDemand(input: {gql_input(spec)}) "
            "{ id costPerHr machineId } }"
        )
        created = dict(self.query(mutation).get("podFindAndDeployOnDemand") or {})
        if not created.get("id"):
            # No error and no pod: whether it was made is unknown, as after a timeout.
            raise Ambiguous("the Runpod API answered the create without a pod id")
        return created

    def log_client(self) -> Any:
        """The reader of the pods' log stream (REST), for this account."""
        return LogClient(self.key, (self.rest_url or DEFAULT_REST).rstrip("/"))

    # Secrets, GPUs, data centers, volumes.

    def create_secret(self, name: str, value: str) -> str:
        """The new secret's id: ``secretDelete`` takes it, not the name."""
        spec = {"name": name, "value": value, "description": "overbrainer: a pod's SSH host key"}
        data = self.query(f"mutation {{ secretCreate(input: {gql_input(spec)}) {{ id name }} }}")
        secret_id = (data.get("secretCreate") or {}).get("id")
        if not secret_id:
            raise Ambiguous("the Runpod API created the secret but did not say its id")
        return str(secret_id)

    def delete_secret(self, secret_id: str) -> None:
        self.query(f"mutation {{ secretDelete(id: {gql(secret_id)}) }}")

    def gpus(self, count: int = 1) -> list[dict[str, Any]]:
        text = (
            "query { gpuTypes { id displayName memoryInGb secureCloud securePrice "
            f"lowestPrice(input: {{gpuCount: {int(count)}, secureCloud: true}}) "
            "{ stockStatus uninterruptablePrice } } }"
        )
        return list(self.safe(text).get("gpuTypes") or [])

    def datacenters(self) -> list[dict[str, Any]]:
        return list(
            self.safe("query { dataCenters { id name location } }").get("dataCenters") or []
        )

    def volumes(self) -> list[dict[str, Any]]:
        data = self.safe("query { myself { networkVolumes { id name size dataCenterId } } }")
        return list((data.get("myself") or {}).get("networkVolumes") or [])


def api_of(key: Any, base_url: Any = None, rest_url: str | None = None) -> RunpodApi:
    """The API for the account of ``key`` (a ``SecretStr`` from the settings), or the
    error that says how to give one."""
    if key is None or not key.get_secret_value():
        raise UserError(NO_KEY)
    api = RunpodApi(key.get_secret_value(), str(base_url) if base_url else None)
    api.rest_url = rest_url
    return api
