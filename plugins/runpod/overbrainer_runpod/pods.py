"""A pod's life from the client: placed (GPU types in order, an ambiguous create
reconciled by name), reached with its host key pinned, deleted and the deletion confirmed.

The host key is made here before the pod exists and handed to it through a Runpod secret
(the pod's env holds only ``{{ RUNPOD_SECRET_<name> }}``, resolved by Runpod when the
container starts); the secret is deleted once the pod is ready. The client key stays in
``runs/<id>/ssh/``; only its public half travels (``PUBLIC_KEY``).
"""

from __future__ import annotations

import base64
import math
import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loguru import logger

from overbrainer.plugin import TransientError, UserError
from overbrainer.plugin.host import Host, HostError
from overbrainer.plugin.operations import model_billions
from overbrainer_runpod import keys, record
from overbrainer_runpod.api import Ambiguous, Enum, Refused, RunpodApi
from overbrainer_runpod.logkept import drain
from overbrainer_runpod.record import Attempt, PodRecord, PodState
from overbrainer_runpod.timing import Timing, ssh_user
from overbrainer_ssh import open_host

if TYPE_CHECKING:
    from overbrainer.plugin import Project
    from overbrainer.plugin.operations import ServedModel
    from overbrainer_runpod.settings import RunpodTarget

DEFAULT_IMAGE = "axolotlai/axolotl-cloud:main-latest"
STATE_DIR = ".overbrainer-pod"
NOT_FOUND_TIMES = 3
"""A pod is gone once this many lookups in a row do not find it: one could be a glitch."""
CONFIRM_TRIES = 30
RECONCILE_TRIES = 3
SSH_PORT = 2222
"""The pod's sshd, exposed alone: an image's entrypoint may start its own sshd on 22 with
its own host key (axolotl-cloud's does when the pod has a ``PUBLIC_KEY``)."""


class FailedToStart(UserError):
    """The pod's bootstrap said it failed (``.overbrainer-pod/failed``): waiting longer
    cannot help, unlike a connection that does not answer yet."""


AFTER_TAG = "a"
"""The tag of a pod made for the commands after training: ``overbrainer-<run>-a<n>``."""
SERVE_TAG = "s"
"""The tag of a pod made for a serve: ``overbrainer-<serve id>-s<n>``."""


def pod_name(run_id: str, attempt: int, tag: str = "") -> str:
    return f"overbrainer-{run_id}-{tag}{attempt}"


def alias(run_id: str, tag: str = "") -> str:
    return f"overbrainer-{run_id}" + ("-after" if tag else "")


def connect(target: str, run_id: str, config: Path, tag: str = "", *, now: bool = True) -> Host:
    """The pod of ``run_id`` (its after-training pod with ``tag``) as a ``Host`` of the
    target ``target``, reached through the SSH config its lifecycle wrote; connected now
    when ``now``."""
    return open_host(target, alias(run_id, tag), ssh_config=config, connect=now)


def secret_name(run_id: str, tag: str = "") -> str:
    middle = "_after" if tag else ""
    return "overbrainer_" + re.sub(r"[^A-Za-z0-9_]", "_", run_id) + middle + "_host_key"


def start_command() -> str:
    """The pod's command: the pod script, shipped base64 (no quote nor line break of it
    reaches the API), written to the state directory and started."""
    script = resources.files("overbrainer_runpod").joinpath("pod.sh").read_bytes()
    encoded = base64.b64encode(script).decode("ascii")
    state = f'"$HOME/{STATE_DIR}"'
    return (
        f"sh -c 'mkdir -p {state} && echo {encoded} | base64 -d > {state}/pod.sh "
        f"&& exec sh {state}/pod.sh start'"
    )


@dataclass(frozen=True)
class Placement:
    gpu_types: list[str]
    data_centers: list[str | None]
    sized: ServeVram | None = None
    """How ``"auto"`` sized a serve's pod by its model, for the log; None otherwise."""


UNSIZED_VRAM_GB = 24
"""What ``"auto"`` asks of a GPU for a model whose name states no size."""


def estimate_vram_gb(base_model: str | None, adapter: str | None) -> int:
    """VRAM enough to train a model named like ``Qwen3-8B`` (its size in its name), else
    ``UNSIZED_VRAM_GB``."""
    billions = model_billions(base_model or "")
    if billions is None:
        return UNSIZED_VRAM_GB
    per_billion = {"qlora": 1.0, "lora": 2.5, "full": 16.0}.get(adapter or "lora", 2.5)
    return max(16, int(billions * per_billion + 6))


_FOUR_BIT = re.compile(r"awq|gptq|int4|4-?bit|nf4|fp4|mxfp4|w4a(?:16|8)|\bi?q[234](?:_|\b)", re.I)
_EIGHT_BIT = re.compile(r"int8|fp8|8-?bit|w8a(?:8|16)|\bq[5-8](?:_|\b)", re.I)
_SIXTEEN_BIT = re.compile(r"\b(?:b?f16|fp16|bf16|f32)\b", re.I)
SERVE_HEADROOM = 1.2
"""The weights times this: room for the engine's KV cache (vLLM takes what is left)."""
SERVE_PER_GPU_GB = 2
"""Each GPU's CUDA context and activations, beyond its share of the weights."""


@dataclass(frozen=True)
class ServeVram:
    """The VRAM a served model asks for, all its GPUs together, from its name."""

    model: str
    total_gb: int
    gpus: int

    @property
    def per_gpu_gb(self) -> int:
        """What each GPU must have: the total shared evenly, at least 16 GB."""
        return max(16, math.ceil(self.total_gb / self.gpus))

    def describe(self) -> str:
        """``sized for Qwen2.5-72B: 177 GB over 2 GPUs``, as the log says it."""
        over = f"over {self.gpus} GPUs" if self.gpus > 1 else "on 1 GPU"
        return f"sized for {self.model}: {self.total_gb} GB {over}"


def serve_vram(model: str, gpus: int) -> ServeVram | None:
    """What serving ``model`` on ``gpus`` GPUs asks of their VRAM; None when its name says
    no size (``gpu_types = "auto"`` then takes ``UNSIZED_VRAM_GB``, as for training).

    The weights take 2 GB per billion parameters at 16 bits (bf16, the usual checkpoint);
    1 GB at 8 bits (int8, fp8, a GGUF's Q5-Q8); 0.55 GB at 4 bits with their scales (AWQ,
    GPTQ, int4, bnb 4-bit, a GGUF's Q2-Q4). A GGUF file that names no quantisation is read
    as 8-bit (f16 when it says so). On top: 20% for the KV cache (``SERVE_HEADROOM``) and
    2 GB a GPU (``SERVE_PER_GPU_GB``); the total is shared evenly over ``gpus`` (tensor
    parallel). ``8x7B`` counts 56B: a mixture of experts loads every expert (a little
    more than it has, the shared layers counted eight times). Of two sizes in a name
    (``Qwen3-30B-A3B``: 3B of 30B active) the larger counts. A rough figure from a name:
    ``min_vram_gb`` replaces it.
    """
    billions = model_billions(model)
    if billions is None:
        return None
    gguf = model.lower().endswith(".gguf")
    if _FOUR_BIT.search(model):
        per_billion = 0.55
    elif _EIGHT_BIT.search(model) or (gguf and not _SIXTEEN_BIT.search(model)):
        per_billion = 1.0
    else:
        per_billion = 2.0
    gpus = max(gpus, 1)
    total = math.ceil(billions * per_billion * SERVE_HEADROOM + SERVE_PER_GPU_GB * gpus)
    return ServeVram(model, total, gpus)


def auto_vram_gb(
    target: RunpodTarget, project: Project, serve: ServedModel | None
) -> tuple[int, ServeVram | None]:
    """The GB each GPU of ``gpu_types = "auto"`` must have: ``min_vram_gb``, else a
    serve's by its served model (:func:`serve_vram`, on ``serve.gpus``), else a run's by
    the training model; with the serve's sizing when it was that."""
    if target.min_vram_gb:
        return target.min_vram_gb, None
    if serve is not None:
        sized = serve_vram(serve.model, serve.gpus or target.gpu_count)
        return (UNSIZED_VRAM_GB, None) if sized is None else (sized.per_gpu_gb, sized)
    training = project.settings.training
    base_model, adapter = (training.base_model, training.adapter) if training else (None, None)
    return estimate_vram_gb(base_model, adapter), None


def no_auto_type(vram: int, sized: ServeVram | None, max_price: float | None) -> UserError:
    """``"auto"`` found no type that fits: the error naming the size it looked for."""
    price = f" under ${max_price}/h" if max_price else ""
    why = f" ({sized.describe()}; set min_vram_gb to choose)" if sized else ""
    return UserError(
        f'gpu_types = "auto": no Secure Cloud GPU type in stock with {vram} GB{price}{why}'
    )


def stock_of(gpu: dict[str, Any]) -> str | None:
    """The type's Secure Cloud stock (``High``, ``Medium``, ``Low``), or None when it has
    none: Runpod says ``"None"``, or nothing."""
    stock = (gpu.get("lowestPrice") or {}).get("stockStatus")
    return None if not stock or str(stock).lower() == "none" else str(stock)


def auto_gpu_types(api: RunpodApi, count: int, min_vram: int, max_price: float | None) -> list[str]:
    """Secure Cloud types in stock with ``min_vram`` GB, under ``max_price``, cheapest first."""
    return [gpu for _, gpu in priced_types(api.gpus(count), min_vram, max_price)]


def gpu_price(gpu: dict[str, Any]) -> float | None:
    """A type's Secure Cloud price per GPU and hour, as ``pod gpus`` shows it."""
    price = (gpu.get("lowestPrice") or {}).get("uninterruptablePrice") or gpu.get("securePrice")
    return float(price) if isinstance(price, int | float) else None


def priced_types(
    gpus: list[dict[str, Any]], min_vram: int, max_price: float | None
) -> list[tuple[float, str]]:
    """(price, id) of the Secure Cloud types of ``gpus`` in stock with ``min_vram`` GB,
    under ``max_price``, cheapest first."""
    chosen = []
    for gpu in gpus:
        price = gpu_price(gpu)
        if not gpu.get("secureCloud") or not stock_of(gpu) or price is None:
            continue
        if (gpu.get("memoryInGb") or 0) < min_vram:
            continue
        if max_price is not None and price > max_price:
            continue
        chosen.append((price, str(gpu["id"])))
    return sorted(chosen)


class PodLifecycle:
    """The life of run ``run_id``'s pod, from its create to its confirmed delete, with its
    record (``pod.json``) in ``run_dir`` saved at each step. A ``tag`` (``AFTER_TAG``)
    makes it the run's pod for the commands after training, whose record is in
    ``runs/<id>/after-pod/`` (``run_dir`` then, with ``run_id`` given)."""

    def __init__(
        self,
        api: RunpodApi,
        run_dir: Path,
        timing: Timing,
        *,
        persist: bool = True,
        run_id: str | None = None,
        tag: str = "",
    ) -> None:
        self.api = api
        self.run_dir = run_dir
        self.timing = timing
        self.persist = persist
        """False for a pod this project has no record of (``pod rm`` of an orphan)."""
        self.tag = tag
        found = record.load(run_dir) if persist else None
        self.pod: PodRecord = found or PodRecord(run_id=run_id or run_dir.name)

    @property
    def ssh_dir(self) -> Path:
        return self.run_dir / record.SSH_DIR

    def save(self, **changes: Any) -> None:
        self.pod = self.pod.model_copy(update=changes)
        if self.persist:
            record.save(self.run_dir, self.pod)

    def find_by_name(self) -> list[dict[str, Any]]:
        """The account's pods named for this run (``overbrainer-<run-id>-<n>``): the pod
        of a create whose answer never came home."""
        prefix = f"overbrainer-{self.pod.run_id}-{self.tag}"
        return [
            pod
            for pod in self.api.pods()
            if str(pod.get("name") or "").startswith(prefix)
            and str(pod.get("name"))[len(prefix) :].isdigit()
        ]

    # Placing.

    def place(self, target: RunpodTarget, placement: Placement, *, api_url: str | None) -> None:
        """Create the pod: each GPU type (and data center) in order until one is placed."""
        run_id = self.pod.run_id
        client = keys.new_key()
        keys.write_private(self.ssh_dir / keys.CLIENT_KEY, client.private)
        host = keys.new_key()
        delete_at = int(time.time() + self.timing.seconds(target.max_hours * 60))
        secret = secret_name(run_id, self.tag)
        self.save(state=PodState.CREATING, host_key=host.public, delete_at=delete_at, secret=secret)
        try:
            secret_id = self.api.create_secret(
                secret, base64.b64encode(host.private).decode("ascii")
            )
            self.save(secret_id=secret_id)
        except (Refused, Ambiguous) as error:
            if isinstance(error, Refused):
                self.save(secret=None)  # none was made
            raise UserError(
                f"cannot hand the pod its host key through a Runpod secret: {error}"
            ) from None
        env = {
            "PUBLIC_KEY": client.public,
            "OVERBRAINER_RUN_ID": run_id,
            "OVERBRAINER_DELETE_AT": str(delete_at),
            "OVERBRAINER_BOOT_GRACE_S": str(int(self.timing.seconds(target.boot_grace_minutes))),
            "OVERBRAINER_RETRIEVE_GRACE_S": str(
                int(self.timing.seconds(target.retrieve_grace_minutes))
            ),
            "OVERBRAINER_LEASE_S": str(int(self.timing.seconds(self.timing.lease_minutes))),
            "OVERBRAINER_SNAPSHOT_LEAD_S": str(
                int(self.timing.seconds(self.timing.snapshot_lead_minutes))
            ),
            "OVERBRAINER_TICK_S": f"{self.timing.tick:g}",
            "OVERBRAINER_SSH_PORT": str(SSH_PORT),
            "OVERBRAINER_HOST_KEY": "{{ RUNPOD_SECRET_" + secret + " }}",
        }
        if self.tag == SERVE_TAG:  # no job: the watchdog follows the served engine
            env["OVERBRAINER_POD_MODE"] = "serve"
        elif self.tag:  # no job: the watchdog follows the command's lease
            env["OVERBRAINER_POD_MODE"] = "after"
        api_url = api_url or os.environ.get("RUNPOD_API_BASE_URL")
        if api_url:
            env["OVERBRAINER_API_URL"] = api_url.rstrip("/")
        base = {
            "cloudType": Enum("SECURE"),
            "gpuCount": target.gpu_count,
            "imageName": target.image or DEFAULT_IMAGE,
            "containerDiskInGb": target.container_disk_gb,
            "volumeInGb": 0,
            "dockerArgs": start_command(),
            "ports": f"{SSH_PORT}/tcp",
            "supportPublicIp": True,
            "startSsh": False,
            "env": [{"key": k, "value": v} for k, v in env.items()],
            "networkVolumeId": target.network_volume_id,
            "volumeMountPath": "/workspace" if target.network_volume_id else None,
        }
        failures: list[str] = []
        for gpu_type, data_center in self._candidates(placement):
            created = self._create_once(base, gpu_type, data_center, failures)
            if created is not None:
                return
        raise UserError(f"no gpu_types entry could be placed: {'; '.join(failures)}")

    @staticmethod
    def _candidates(placement: Placement) -> Iterator[tuple[str, str | None]]:
        for gpu_type in placement.gpu_types:
            for data_center in placement.data_centers:
                yield gpu_type, data_center

    def _create_once(
        self, base: dict[str, Any], gpu_type: str, data_center: str | None, failures: list[str]
    ) -> str | None:
        """One GPU type: its pod id, or None (the reason added to ``failures``) when the
        next one should be tried. An ambiguous answer is reconciled by name before the
        same type is tried again."""
        where = f"{gpu_type} in {data_center}" if data_center else gpu_type
        for _ in range(RECONCILE_TRIES):
            name = pod_name(self.pod.run_id, len(self.pod.attempts) + 1, self.tag)
            attempts = [
                *self.pod.attempts,
                Attempt(name=name, gpu_type=gpu_type, data_center=data_center),
            ]
            self.save(attempts=attempts, state=PodState.CREATING)  # before every create
            spec = {"name": name, "gpuTypeId": gpu_type, "dataCenterId": data_center, **base}
            try:
                answer = self.api.create(spec)
            except Refused as error:
                self._attempt_outcome(error.kind, error.message)
                if error.kind in ("capacity", "forbidden"):
                    failures.append(f"{where}: {error.message}")
                    return None
                raise UserError(
                    f"the Runpod API refused the pod ({where}): {error.message}"
                ) from None
            except Ambiguous as error:
                self._attempt_outcome("ambiguous", str(error))
                logger.warning(
                    f"runpod: the create of {name} got {error}: looking the pod up by name"
                )
                found = self._find(name)
                if found is None:
                    continue
                answer = found
            pod_id = str(answer["id"])
            self._attempt_outcome("created", None)
            cost = answer.get("costPerHr")
            self.save(
                state=PodState.PROVISIONING,
                pod_id=pod_id,
                pod_name=name,
                gpu_type=gpu_type,
                cost_per_hour=float(cost) if cost is not None else None,
                created=record.now_text(),
            )
            logger.info(f"runpod: pod {pod_id} ({gpu_type}) created for run {self.pod.run_id}")
            return pod_id
        failures.append(f"{where}: no answer from the Runpod API")
        return None

    def _attempt_outcome(self, outcome: str, detail: str | None) -> None:
        attempts = list(self.pod.attempts)
        attempts[-1] = attempts[-1].model_copy(update={"outcome": outcome, "detail": detail})
        self.save(attempts=attempts)

    def _find(self, name: str) -> dict[str, Any] | None:
        """The pod named ``name``, looked up a few times (a new pod may list late)."""
        for _ in range(RECONCILE_TRIES):
            try:
                for pod in self.api.pods():
                    if pod.get("name") == name:
                        return pod
            except TransientError:
                pass
            time.sleep(self.timing.confirm)
        return None

    # Reaching it.

    def wait_ready(self, connect: Callable[[Path], Host]) -> Host:
        """Poll the pod until its SSH port is known and its bootstrap says ready; the
        connected host ``connect(config)`` returned."""
        pod_id = self.pod.pod_id
        assert pod_id is not None
        deadline = time.monotonic() + self.timing.seconds(self.timing.ready_minutes)
        last = "no SSH port yet"
        missing = 0
        while time.monotonic() < deadline:
            try:
                found = self.api.pod(pod_id)
            except TransientError as error:  # one lookup lost: the next poll asks again
                last = str(error)
                time.sleep(self.timing.poll)
                continue
            if found is None:
                # A new pod may not be listed yet: gone only after several lookups.
                missing += 1
                if missing >= NOT_FOUND_TIMES:
                    raise UserError(f"pod {pod_id} vanished while it was starting")
                last = "the API does not list the pod yet"
                time.sleep(self.timing.poll)
                continue
            missing = 0
            if found.get("desiredStatus") == "EXITED":
                raise UserError(f"pod {pod_id} stopped while it was starting")
            port = _ssh_port(found)
            if port is not None:
                host_ip, public_port = port
                config = keys.write_ssh_files(
                    self.ssh_dir,
                    alias(self.pod.run_id, self.tag),
                    host_ip,
                    public_port,
                    user=ssh_user(),
                    host_key=self.pod.host_key or "",
                )  # fmt: skip
                self.save(ssh_host=host_ip, ssh_port=public_port, ssh_user=ssh_user())
                try:
                    host = connect(config)
                    state = host.run(
                        f'cat "$HOME/{STATE_DIR}/failed" 2>/dev/null && exit 3; '
                        f'cat "$HOME/{STATE_DIR}/ready"'
                    )
                    if state.code == 3:
                        raise FailedToStart(f"pod {pod_id} failed to start: {state.text().strip()}")
                    if state.code == 0 and state.text().strip():
                        self.save(
                            state=PodState.READY,
                            ready=record.now_text(),
                            workdir=state.text().strip().splitlines()[-1],
                        )
                        return host
                    last = "its bootstrap is not done"
                except FailedToStart:
                    raise
                except (HostError, UserError) as error:  # not reachable yet: the next poll
                    last = str(error)
            time.sleep(self.timing.poll)
        raise UserError(
            f"pod {pod_id} was not ready after {self.timing.ready_minutes:g} min: {last}"
        )

    def drop_secret(self) -> None:
        if self.pod.secret is None:
            return
        if self.pod.secret_id is None:
            logger.warning(
                f"runpod: the secret {self.pod.secret} has no known id: delete it in Runpod's "
                "console (Secrets)"
            )
            self.save(secret=None)
            return
        try:
            self.api.delete_secret(self.pod.secret_id)
            self.save(secret=None, secret_id=None)
        except (Refused, Ambiguous, UserError) as error:
            logger.warning(f"runpod: cannot delete the secret {self.pod.secret}: {error}")

    # Deleting.

    def abandon(self) -> None:
        """Delete the pod of a start that failed (or was interrupted); a failure is only
        warned about, the start's error being the one to show."""
        if self.pod.pod_id is None:
            self.drop_secret()
            return
        try:
            self.delete("client")
        except Exception as error:  # noqa: BLE001 - the start's error is the one to show
            logger.warning(
                f"runpod: cannot delete pod {self.pod.pod_id}: {error}; its watchdog deletes "
                f"it within the boot grace, or run `overbrainer pod rm {self.pod.run_id}`"
            )

    def delete(self, by: str) -> None:
        """Delete the pod and confirm it is gone; record it ``deleted`` with its spend."""
        pod_id = self.pod.pod_id
        if pod_id is None or self.pod.state is PodState.DELETED:
            self.drop_secret()
            if self.pod.state is not PodState.DELETED:
                self.save(state=PodState.DELETED, deleted=record.now_text(), deleted_by=by)
            return
        try:
            found = self.api.pod(pod_id)
        except TransientError as error:  # not told: the deletion goes on, as it did before
            logger.debug(f"runpod: pod {pod_id}: its name not checked before deleting: {error}")
            found = None
        mine = f"overbrainer-{self.pod.run_id}-"
        if found is not None and not str(found.get("name") or "").startswith(mine):
            # The run's record is a file anyone may edit: its pod id must name its own pod.
            raise UserError(
                f"run {self.pod.run_id}: pod {pod_id} is not this run's (it is named "
                f"`{found.get('name')}`, not {mine}…): it was not deleted; the run's record "
                "may have been edited"
            )
        self.save(state=PodState.DELETING)
        if not self.drained:
            self.drain_log()
        self.api.terminate(pod_id)
        self.confirm_gone(by)
        logger.info(f"runpod: pod {pod_id} deleted (about ${self.pod.estimated_spend or 0:.2f})")

    drained = False
    """Whether the pod's log was kept already, before its results were marked retrieved
    (its watchdog may delete it from then on)."""

    def drain_log(self) -> None:
        """Keep what Runpod has of the pod's log in the run directory before the pod goes
        (a few seconds at most; a failure is only logged)."""
        pod_id = self.pod.pod_id
        if pod_id is None or not self.persist or not self.run_dir.is_dir():
            return

        drain(self.api.log_client(), self.run_dir, pod_id)
        self.drained = True

    def confirm_gone(self, by: str) -> None:
        pod_id = self.pod.pod_id
        assert pod_id is not None
        missing = 0
        for _ in range(CONFIRM_TRIES):
            try:
                found = self.api.pod(pod_id)
            except TransientError:  # no answer says neither: ask again
                time.sleep(self.timing.confirm)
                continue
            if found is None:
                missing += 1
                if missing >= NOT_FOUND_TIMES:
                    break
            else:
                missing = 0
            time.sleep(self.timing.confirm)
        else:
            raise UserError(
                f"pod {pod_id} is still listed after its deletion: check it with "
                f"`overbrainer pod ls`, delete it with `overbrainer pod rm {self.pod.run_id}`"
            )
        deleted = record.now_text()
        self.pod = self.pod.model_copy(update={"deleted": deleted})
        self.save(
            state=PodState.DELETED,
            deleted_by=by,
            estimated_spend=self.pod.spend(),
        )
        self.drop_secret()


def _ssh_port(pod: dict[str, Any]) -> tuple[str, int] | None:
    runtime = pod.get("runtime") or {}
    for port in runtime.get("ports") or []:
        public = port.get("isIpPublic") and port.get("publicPort")
        if port.get("privatePort") == SSH_PORT and public:
            return str(port["ip"]), int(port["publicPort"])
    return None
