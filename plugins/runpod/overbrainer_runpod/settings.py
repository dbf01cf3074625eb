"""The runpod target's settings: ``[targets.NAME]`` of kind ``runpod`` and the ``[runpod]``
account, with where the account's key and URLs come from."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, SecretStr, model_validator

from overbrainer.plugin import NonEmpty, Project, RemotePath, TargetBase
from overbrainer.plugin.settings import Finite, HttpUrl, Section, comma_list, resolve_secret


def _comma_list(value: Any) -> Any:
    # From the environment a list arrives as one comma-separated string; "auto" stays.
    return value if value == "auto" else comma_list(value)


ListOrAuto = Annotated[list[NonEmpty] | Literal["auto"], BeforeValidator(_comma_list)]


class RunpodTarget(TargetBase):
    """``[targets.NAME]`` with ``kind = "runpod"``."""

    kind: Literal["runpod"]
    gpu_types: ListOrAuto
    min_vram_gb: int | None = Field(default=None, ge=1)
    max_price_per_hour: Finite | None = Field(default=None, gt=0)
    max_hours: Finite = Field(gt=0, le=720)
    max_cost_usd: Finite | None = Field(default=None, gt=0)
    gpu_count: int = Field(default=1, ge=1)
    image: NonEmpty | None = None
    venv: RemotePath = "/workspace/axolotl-venv"
    container_disk_gb: int = Field(default=50, ge=20)
    boot_grace_minutes: int = Field(default=30, ge=5)
    retrieve_grace_minutes: int = Field(default=60, ge=1)
    data_center_ids: ListOrAuto = "auto"
    network_volume_id: NonEmpty | None = None
    max_volume_gb: int | None = Field(default=None, ge=1)
    ssh_client: Literal["openssh", "builtin"] = "openssh"

    @model_validator(mode="after")
    def _combinations(self) -> RunpodTarget:
        problems = []
        if self.gpu_types != "auto":
            problems += [
                f'{key} applies only to gpu_types = "auto"'
                for key in ("min_vram_gb", "max_price_per_hour")
                if getattr(self, key) is not None
            ]
            if not self.gpu_types:
                problems.append('gpu_types must name at least one GPU type, or be "auto"')
        if not self.venv.startswith("/"):
            problems.append("venv must be an absolute path")
        if self.network_volume_id is not None and (
            self.data_center_ids == "auto" or len(self.data_center_ids) != 1
        ):
            problems.append("network_volume_id needs exactly one entry in data_center_ids")
        if self.max_volume_gb is not None and self.network_volume_id is None:
            problems.append("max_volume_gb needs network_volume_id")
        if problems:
            raise ValueError("; ".join(problems))
        return self


class RunpodAccount(Section):
    """``[runpod]``: the account every runpod target uses; its keys come from the
    environment only (``OVERBRAINER_RUNPOD__API_KEY``, ``.env``)."""

    api_key: SecretStr | None = None
    base_url: HttpUrl | None = None
    """Runpod's GraphQL API when not the real one."""
    rest_url: HttpUrl | None = None
    """Runpod's REST API (the pods' log stream); https://rest.runpod.io/v1 when unset."""


def account(project: Project) -> tuple[Any, Any]:
    """The API key and URL: the settings', else the project's environment's (a project
    built without loading its settings, as the conformance suite does)."""
    settings = project.settings.section("runpod", RunpodAccount)
    key = settings.api_key
    if key is None and project.env.get("OVERBRAINER_RUNPOD__API_KEY"):
        key = SecretStr(project.env["OVERBRAINER_RUNPOD__API_KEY"])
    if key is not None:  # a vault: reference is read now, when the API is called
        key = resolve_secret(key, "runpod.api_key", project.env)
    url = settings.base_url or project.env.get("OVERBRAINER_RUNPOD__BASE_URL")
    return key, url


def rest_url(project: Project) -> str | None:
    """Runpod's REST API (the pods' log stream) when not the real one: the settings', else
    the project's environment's."""
    settings = project.settings.section("runpod", RunpodAccount)
    url = settings.rest_url or project.env.get("OVERBRAINER_RUNPOD__REST_URL")
    return str(url) if url else None
