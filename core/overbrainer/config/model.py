"""The settings of ``overbrainer.toml``, as pydantic models.

Every table rejects unknown keys. The keys of ``ENV_ONLY`` may come only from
``OVERBRAINER_*`` variables or ``.env``: a URL or a key never sits in a file that is
committed. Cross-table rules (a role's provider exists, the training target exists) live in
:mod:`overbrainer.config.load`, so every problem is reported at once.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import fields
from types import MappingProxyType
from typing import Annotated, Any, Literal, TypeVar
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainValidator,
    PrivateAttr,
    SecretStr,
    StringConstraints,
    model_validator,
)

from overbrainer.config.listen import is_loopback, parse_listen
from overbrainer.config.runtime import (
    DEEPSPEED_PRESETS,
    FSDP_PRESETS,
    HostRuntime,
    env_pattern,
    gpus_value,
    runtime_problems,
    sharding_problems,
)
from overbrainer.config.sections import SettingsSection

ENV_ONLY: tuple[tuple[str, ...], ...] = (
    ("providers", "*", "base_url"),
    ("providers", "*", "api_key"),
    ("targets", "*", "host"),
    ("targets", "*", "login"),
    ("hub", "base_url"),
    ("hf_token",),
    ("log",),
)
"""Keys that may come only from the environment (``*`` stands for any table name); a
plugin's own table names its own (:mod:`overbrainer.config.sections`)."""

NonEmpty = Annotated[str, StringConstraints(min_length=1)]


# Checked before any bound, so NaN reads "must be a finite number", not "must be at most 1".
Finite = Annotated[float, Field(allow_inf_nan=False)]

_PATH_CHARS = re.compile(r"^[A-Za-z0-9._/~-]+$")


def _remote_path(value: str) -> str:
    # These paths are pasted into shell scripts on the target: the character set keeps
    # them free of quoting, and `..` and a leading `-` keep them where they are meant to be.
    if not _PATH_CHARS.match(value):
        raise ValueError("may hold only letters, digits and . _ / ~ -")
    if value.startswith("-"):
        raise ValueError("must not start with -")
    if ".." in value.split("/"):
        raise ValueError("must not contain ..")
    if "~" in value[1:]:
        raise ValueError("may hold ~ only as its first character")
    return value


RemotePath = Annotated[str, AfterValidator(_remote_path)]


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must hold some text (unset it for none)")
    return value

"""A ``venv`` or ``workdir`` path on a target."""

EnvPattern = Annotated[str, AfterValidator(env_pattern)]
"""A name of the environment, or a glob of names, passed on to a job."""


def comma_list(value: Any) -> Any:
    """A list setting from the environment arrives as one comma-separated string."""
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


def _http_url(value: str) -> str:
    # Checked when the settings load: a URL no request could use is a mistake to report
    # once, not a transport error to retry. The messages never quote the URL, which may
    # hold a user and password. Empty is unset (a copied .env.example).
    if not value:
        return value
    if any(char.isspace() or not char.isprintable() for char in value):
        raise ValueError("must not contain spaces or control characters")
    try:
        parts = urlsplit(value)
    except ValueError:
        raise ValueError("is not a valid URL") from None
    try:
        port = parts.port  # raises only for the port: not a number, or past 65535
    except ValueError:
        raise ValueError("its port is not a number from 1 to 65535") from None
    if parts.scheme not in ("http", "https"):
        raise ValueError("must start with http:// or https://")
    if not parts.hostname:
        raise ValueError("has no host")
    if port == 0:
        raise ValueError("its port is not a number from 1 to 65535")
    return value


HttpUrl = Annotated[str, AfterValidator(_http_url)]
"""An ``http://`` or ``https://`` URL with a host, and a port that can be connected to."""


class Section(BaseModel):
    """A table of overbrainer.toml: unknown keys rejected, values frozen once loaded.

    Built when first used, not when defined: validating ``Settings`` builds the one schema
    that holds every table, and building each table's own besides (at import, before a
    command's first request) cost ``answers`` some 20 ms of start-up."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class ProjectSection(Section):
    name: NonEmpty


class Topic(Section):
    name: NonEmpty
    description: str | None = None
    # Bounded: a count is a plan's list and a stage's loop (10**20 was an OverflowError
    # traceback in `plan`, 10**9 a MemoryError): 100,000 subtopics of 1,000,000 at most.
    subtopics: int = Field(ge=1, le=100_000)
    questions_per_subtopic: int = Field(ge=1, le=1_000_000)


class ModelPrice(Section):
    """A model's price in USD per million tokens, for a provider whose ``/models`` says none.

    ``logprobs``: what the answer tokens returned with their top-k logprobs cost beyond their
    ``output`` price (``distill = "logits"``); unset, ``plan`` assumes nothing more."""

    input: Finite = Field(ge=0)
    output: Finite = Field(ge=0)
    logprobs: Finite | None = Field(default=None, ge=0)


ENGINE_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")

OWN_FLAGS = ("--host", "--port", "--api-key", "--api_key")
"""Engine flags overbrainer sets itself: the engine listens on the target's loopback, on
the port chosen for it, with no key on its command line (``ps`` shows it to every user)."""


def _engine_name(value: str) -> str:
    if not ENGINE_NAME.match(value):
        raise ValueError("must be an engine's name: vllm, sglang, llama.cpp or a plugin's")
    return value


def _engine_args(value: list[str]) -> list[str]:
    for arg in value:
        if any(char in arg for char in "\n\r\0"):
            raise ValueError("an argument must not hold a line break or a NUL")
        flag = arg.split("=", 1)[0]
        if flag in OWN_FLAGS:
            raise ValueError(
                f"{flag} is set by overbrainer (the engine listens on the target's loopback, "
                "on a port of its choosing): remove it"
            )
    return value


class Serve(Section):
    """``[providers.NAME] serve = {...}``: the provider is an engine overbrainer starts on
    ``target`` for the commands that need it (docs/serving.md). ``model``: what the engine
    loads and the name the roles ask for; ``args``: the engine's own flags; ``gpus``: its
    tensor-parallel size; ``idle_minutes``: the watchdog on the target ends it after that
    long without a connection; ``port``: its port on the target (default: a free one)."""

    target: NonEmpty
    engine: Annotated[str, AfterValidator(_engine_name)]
    model: NonEmpty
    args: Annotated[list[str], AfterValidator(_engine_args)] = Field(default_factory=list)
    gpus: int | None = Field(default=None, ge=1, le=64)
    idle_minutes: int = Field(default=30, ge=1, le=7 * 24 * 60)
    port: int | None = Field(default=None, ge=1024, le=65535)
    concurrency: int | None = Field(default=None, ge=1, le=4096)
    """Requests the stages keep in flight to it, in place of ``[pipeline] concurrency``;
    unset: what its engine holds at once (its ``capacity``)."""
    gpu_type: NonEmpty | None = None
    """The GPUs it runs on (``"H100"``), for ``plan``'s hours: the serve throughput table's
    row (unset: an A40's)."""


class Provider(Section):
    """``batch_discount``: the share of the listed price its batch API takes off (0.5: half
    price); ``prices``: USD per million tokens by model, used before the provider's own;
    ``serve``: started on a target instead of reached at ``base_url``."""

    protocol: Literal["openai", "anthropic"]
    base_url: HttpUrl | None = Field(default=None)
    api_key: SecretStr | None = Field(default=None)
    batch_discount: Finite = Field(default=0.5, ge=0, lt=1)
    prices: dict[str, ModelPrice] = Field(default_factory=dict)
    serve: Serve | None = None


class Role(Section):
    provider: NonEmpty
    model: NonEmpty
    reasoning: bool = False
    max_tokens: int = Field(default=16384, ge=1)
    temperature: Finite | None = Field(default=None, ge=0, le=2)
    reasoning_effort: Literal["none", "low", "medium", "high"] | None = None
    thinking_budget: int | None = Field(default=None, ge=1024)
    batch: bool = False
    """Send the ``answers`` stage through the provider's batch API (the parent role)."""
    samples: int = Field(default=1, ge=1, le=64)
    """Answers asked for each question (the parent role): ``[pipeline] select`` says which
    become training examples."""
    samples_n: bool = True
    """A question's samples asked in one request (``n``) where the protocol has it (the
    openai one): its prompt is paid once. False: one request a sample (a server that
    does not take ``n`` gives one reply, and the rest are asked again anyway)."""

    @model_validator(mode="after")
    def _reasoning_rules(self) -> Role:
        problems = []
        if self.reasoning_effort not in (None, "none") and not self.reasoning:
            problems.append("reasoning_effort needs reasoning = true")
        if self.thinking_budget is not None:
            if not self.reasoning:
                problems.append("thinking_budget needs reasoning = true")
            if self.thinking_budget >= self.max_tokens:
                problems.append("thinking_budget must be less than max_tokens")
            if self.reasoning_effort is not None:
                problems.append("thinking_budget cannot be set with reasoning_effort")
        if problems:
            raise ValueError("; ".join(problems))
        return self


ROLE_NAMES = ("generator", "parent", "embedder", "judge")
"""The roles, in the order the pipeline first uses them."""


class Roles(Section):
    generator: Role
    parent: Role
    embedder: Role | None = None
    judge: Role | None = None

    @model_validator(mode="after")
    def _samples_of_the_parent(self) -> Roles:
        others = [name for name in ROLE_NAMES if name != "parent" and _samples(self, name) != 1]
        if others:
            raise ValueError(f"samples is the parent's setting, not {', '.join(others)}'s")
        return self


def _samples(roles: Roles, name: str) -> int:
    role: Role | None = getattr(roles, name)
    return 1 if role is None else role.samples


DEFAULT_SEED = 42
"""``pipeline.seed`` unset, and with it ``training.seed``."""


class Pipeline(Section):
    concurrency: int = Field(default=8, ge=1, le=1024)
    max_retries: int = Field(default=5, ge=0, le=100)
    dedup_threshold: Finite = Field(default=0.8, gt=0, le=1)
    embedding_threshold: Finite = Field(default=0.9, gt=0, le=1)
    question_batch_size: int = Field(default=10, ge=1, le=1000)
    request_timeout_secs: int = Field(default=600, ge=1)
    eval_ratio: Finite = Field(default=0.1, gt=0, lt=1)
    seed: int = Field(default=DEFAULT_SEED, ge=0)
    include_system_prompt: bool = False
    system_prompt: Annotated[str, AfterValidator(_not_blank)] | None = None
    """The system turn of every training example (``split``'s train and eval files), in
    place of any the answer holds: the parent's, kept by ``include_system_prompt``, or an
    imported conversation's. ``answers.jsonl`` keeps what it holds. Unset: as answered."""
    max_wait_s: Finite = Field(default=600, ge=0)
    """The longest a request waits out a provider's rate limit (429s) in all, before failing."""
    batch_poll_s: Finite = Field(default=30, gt=0)
    """How often a batch submitted to a provider is looked at."""
    select: Literal["all", "agree", "judge"] = "all"
    """Which of a question's ``samples`` answers ``split`` trains on: all, those whose
    final result agrees with the majority's (``pipeline.agreement``), or the one the
    judge role (else the parent) prefers (``pipeline.preference``)."""


def _project_glob(value: str) -> str:
    # Read from the project only: a pattern that could reach outside it is refused here,
    # and each file it matches is checked again once links are followed.
    if not value or value.startswith(("/", "~")) or ".." in value.replace("\\", "/").split("/"):
        raise ValueError("must be a glob relative to the project, without ..")
    return value


class SplitSection(Section):
    """``[split]``: decontamination. A train example sharing ``decontaminate_n`` words in
    a row (case and punctuation aside) with an eval split question, or with a question of
    the JSONL files ``decontaminate`` matches, is left out of ``train.jsonl``."""

    decontaminate: Annotated[
        list[Annotated[str, AfterValidator(_project_glob)]], BeforeValidator(comma_list)
    ] = Field(default_factory=list)
    decontaminate_n: int = Field(default=13, ge=0, le=1000)
    """0 turns decontamination off; else at least 3 (fewer words would drop most of train)."""

    @model_validator(mode="after")
    def _enough_words(self) -> SplitSection:
        if self.decontaminate_n in (1, 2):
            raise ValueError("decontaminate_n must be 0 (off) or at least 3")
        return self


class EvalSection(Section):
    """``[eval]``: held-out questions of the user's own. ``files``: globs of JSONL files, one
    ``{"question": ..., "answer": ...}`` a line (the answer an optional reference), each
    file a named eval set (its stem): never trained on (``split`` decontaminates train
    against them), asked of the child and the parent by ``compare``."""

    files: Annotated[
        list[Annotated[str, AfterValidator(_project_glob)]], BeforeValidator(comma_list)
    ] = Field(default_factory=list)


class KnowledgeDistillation(Section):
    """``[training.kd]``: how ``distill = "logits"`` trains, passed to Axolotl's KD plugin.

    ``top_k``: the parent's most likely next tokens kept per answer token; ``alpha``: the
    weight of the KD loss, ``ce_alpha`` that of the cross-entropy on the parent's text;
    ``temperature`` softens both distributions; ``beta``: 0 forward KL, 1 reverse (GKD's
    generalised JSD between). ``parent_tokenizer``: a Hugging Face id or a directory of the
    parent's tokenizer, compared with ``base_model``'s before anything is paid. ``mode``:
    ``offline``, the parent's logprobs kept with its answers; ``online``, the trainer asks
    the parent, served on the training target, during the run."""

    top_k: int = Field(default=20, ge=1, le=256)
    alpha: Finite = Field(default=1.0, ge=0)
    ce_alpha: Finite = Field(default=0.1, ge=0)
    temperature: Finite = Field(default=1.0, gt=0, le=10)
    beta: Finite = Field(default=0.0, ge=0, le=1)
    mode: Literal["offline", "online"] = "offline"
    parent_tokenizer: NonEmpty | None = None

    @model_validator(mode="after")
    def _teaches(self) -> KnowledgeDistillation:
        if self.alpha == 0 and self.ce_alpha == 0:
            raise ValueError("alpha and ce_alpha are both 0: the child would learn nothing")
        return self


class Training(Section):
    target: NonEmpty
    base_model: NonEmpty
    adapter: Literal["lora", "qlora", "full"]
    epochs: int = Field(default=3, ge=1)
    learning_rate: Finite = Field(default=2e-4, gt=0)
    lora_r: int = Field(default=16, ge=1)
    lora_alpha: int = Field(default=32, ge=1)
    lora_dropout: Finite = Field(default=0.05, ge=0, lt=1)
    sequence_len: int = Field(default=4096, ge=1)
    micro_batch_size: int = Field(default=2, ge=1)
    gradient_accumulation_steps: int = Field(default=4, ge=1)
    optimizer: NonEmpty = "adamw_torch_fused"
    lr_scheduler: NonEmpty = "cosine"
    sample_packing: bool = True
    evals_per_epoch: int = Field(default=4, ge=0)
    saves_per_epoch: int = Field(default=1, ge=0)
    merge: bool = False
    chat_template: NonEmpty | None = None
    chat_template_jinja: NonEmpty | None = None
    hub_model_id: NonEmpty | None = None
    seed: int | None = Field(default=None, ge=0, le=2**32 - 1)
    """Seeds the data's shuffle, the adapter's initial weights, dropout and the sampler:
    the same inputs train the same model (on a CPU; see docs/targets.md for GPUs). Unset:
    ``pipeline.seed``."""
    axolotl_extra: dict[str, Any] = Field(default_factory=dict)
    distill: Literal["text", "logits"] = "text"
    """``text``: the child learns the parent's words (fine-tuned on its answers);
    ``logits``: also its top-k next-token distribution, per ``[training.kd]``
    (docs/distillation.md)."""
    kd: KnowledgeDistillation = Field(default_factory=KnowledgeDistillation)

    @property
    def kd_offline(self) -> bool:
        """Distilling logits the answers stage keeps (``data/logprobs.bin``)."""
        return self.distill == "logits" and self.kd.mode == "offline"

    @property
    def kd_online(self) -> bool:
        """Distilling logits the trainer asks a served parent for during the run."""
        return self.distill == "logits" and self.kd.mode == "online"

    @property
    def effective_seed(self) -> int:
        """The seed the run trains with (``pipeline.seed`` fills it in settings)."""
        return DEFAULT_SEED if self.seed is None else self.seed

    @model_validator(mode="after")
    def _merge_needs_adapter(self) -> Training:
        if self.merge and self.adapter == "full":
            raise ValueError("merge applies only to a lora or qlora adapter")
        return self


class TargetBase(Section):
    """What every ``[targets.NAME]`` table has: the kind that picks the plugin."""

    kind: NonEmpty


class HostTarget(TargetBase):
    """A POSIX host that runs Axolotl natively (a venv, or PATH) or in a container.

    ``device`` picks how Axolotl is launched: ``auto`` looks for ``nvidia-smi`` on the
    host when a run starts; ``cpu`` trains on the CPU (``--launcher python``, no bf16,
    no fused CUDA kernels). ``install``: pip requirements installed into ``venv`` when it
    has no ``bin/axolotl`` yet (first use). ``setup``: a shell command run on the host
    before each run starts (idempotent: it runs every time), with the venv first on PATH.
    ``pass_env``: names (or globs) of overbrainer's environment the job gets too; beyond
    them a job on this machine sees only an allowlist (PATH, HOME, CUDA_*, HF caches...).
    """

    runtime: Literal["native", "docker"] = "native"
    engine: Literal["docker", "podman"] | None = None
    image: NonEmpty | None = None
    venv: RemotePath | None = None
    device: Literal["auto", "gpu", "cpu"] = "auto"
    install: NonEmpty | None = None
    setup: NonEmpty | None = None
    pass_env: Annotated[list[EnvPattern], BeforeValidator(comma_list)] = Field(default_factory=list)
    # Several GPUs on the machine (docs/targets.md, "Several GPUs on one machine").
    gpus: Annotated[int | Literal["all"], PlainValidator(gpus_value)] | None = None
    """Axolotl's processes, one a GPU, through ``accelerate launch --num_processes N``;
    ``"all"``: as many as the machine shows when a run starts. Unset: Axolotl's own launch."""
    deepspeed: Literal[DEEPSPEED_PRESETS] | None = None  # type: ignore[valid-type]
    """A DeepSpeed ZeRO preset, shipped as a JSON file into the job (needs ``gpus``)."""
    fsdp: Literal[FSDP_PRESETS] | None = None  # type: ignore[valid-type]
    """An FSDP2 preset, written as Axolotl's ``fsdp_config`` (needs ``gpus``)."""
    price_per_hour: Finite | None = Field(default=None, ge=0)
    """What the machine costs (USD an hour), for what a served parent's hours cost
    (docs/serving.md); unset: nothing."""

    @model_validator(mode="after")
    def _runtime_keys(self) -> HostTarget:
        problems = runtime_problems(
            self.runtime, engine=self.engine, image=self.image, venv=self.venv,
            install=self.install,
        )  # fmt: skip
        problems += sharding_problems(self.gpus, self.deepspeed, self.fsdp)
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def host_runtime(self) -> HostRuntime:
        """These settings as ``HostExecutor`` takes them: every key of ``HostRuntime``,
        read from here by name, so that the two cannot drift apart."""
        keys = {key.name: getattr(self, key.name) for key in fields(HostRuntime)}
        return HostRuntime(**{**keys, "pass_env": tuple(self.pass_env)})


QUANTIZE_TYPES = (
    "Q4_K_M", "Q4_K_S", "Q5_K_M", "Q5_K_S", "Q6_K", "Q8_0", "Q3_K_M", "Q2_K", "F16", "BF16",
)  # fmt: skip
"""llama.cpp's quantization types ``export.quantize`` accepts (F16/BF16: no quantization)."""

_OLLAMA_PART = {
    "host": re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:-]{0,349}$"),
    "namespace": re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]{0,79}$"),
    "model": re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,79}$"),
    "tag": re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,79}$"),
}


def _ollama_name(value: str) -> str:
    """``[host/][namespace/]model[:tag]``, each part as Ollama itself checks it."""
    rest, tag = value, None
    colon, slash = value.rfind(":"), value.rfind("/")
    if colon > slash:
        rest, tag = value[:colon], value[colon + 1 :]
    parts = rest.split("/")
    if len(parts) > 3:
        raise ValueError("an Ollama model name is [host/][namespace/]model[:tag]")
    host = parts[0].split("://", 1)[-1] if len(parts) == 3 else None
    namespace = parts[-2] if len(parts) >= 2 else None
    named = {"host": host, "namespace": namespace, "model": parts[-1], "tag": tag}
    for kind, part in named.items():
        if part is not None and not _OLLAMA_PART[kind].match(part):
            raise ValueError(f"not a valid Ollama model name (its {kind} part)")
    return value


class ExportSection(Section):
    """``[export]``: GGUF for llama.cpp and Ollama (``overbrainer export``, or at the end of
    training with ``after_training``)."""

    after_training: bool = False
    quantize: Literal[QUANTIZE_TYPES] = "Q4_K_M"  # type: ignore[valid-type]
    ollama_name: Annotated[str, AfterValidator(_ollama_name)] | None = None


_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")


def _hub_repo(value: str) -> str:
    if not _REPO.match(value) or ".." in value:
        raise ValueError("a Hugging Face repository is NAMESPACE/NAME")
    return value


class HubSection(Section):
    """``[hub]``: ``overbrainer push`` to the Hugging Face Hub. ``base_url``: env only."""

    repo: Annotated[str, AfterValidator(_hub_repo)] | None = None
    private: bool = True
    after_training: bool = False
    base_url: HttpUrl | None = None


class CompareSection(Section):
    """``[compare]``: ``overbrainer compare``, the child against its parent and its base.
    ``reference``: the judge of child against base (or another run) is shown the parent's
    answer as a reference."""

    parent_price_in: Finite | None = Field(default=None, ge=0)
    parent_price_out: Finite | None = Field(default=None, ge=0)
    child_price_per_hour: Finite | None = Field(default=None, ge=0)
    max_tokens: int = Field(default=4096, ge=1)
    temperature: Finite = Field(default=0.0, ge=0, le=2)
    server_start_secs: int = Field(default=300, ge=1, le=3600)
    reference: bool = False


def _listen_address(value: str) -> str:
    parse_listen(value)
    return value


class MetricsSection(Section):
    """``[metrics]``: the Prometheus endpoint served while a command holds the project lock.
    Unset ``listen`` serves nothing; it has no authentication, so an address other than
    loopback needs ``allow_remote = true`` as well."""

    listen: Annotated[str, AfterValidator(_listen_address)] | None = None
    allow_remote: bool = False

    @model_validator(mode="after")
    def _remote_needs_consent(self) -> MetricsSection:
        if self.listen and not self.allow_remote and not is_loopback(self.listen):
            raise ValueError(
                f"listen = {self.listen!r} is not a loopback address and the endpoint has no "
                "authentication: set metrics.allow_remote = true to serve it to the network"
            )
        return self


class BudgetSection(Section):
    """``[budget]``: ``max_usd``, the most the project may spend (the history's costs and
    training's GPU spend); no stage starts a request, and no training a machine, past it."""

    max_usd: Finite | None = Field(default=None, gt=0)


class PlanSection(Section):
    """``[plan]``: ``overbrainer plan``'s training estimate. ``throughput``: training tokens
    per second of ``training.base_model`` on a GPU type (``"NVIDIA A40" = 2500``), in place
    of the built-in table's figure for its size."""

    throughput: dict[str, Annotated[Finite, Field(gt=0)]] = Field(default_factory=dict)
    serve_throughput: dict[str, Annotated[Finite, Field(gt=0)]] = Field(default_factory=dict)
    """Output tokens per second of a served provider (by its name), in place of the serve
    throughput table's figure (docs/serving.md)."""


class WatchSection(Section):
    """``[watch]``: what ``overbrainer watch`` does when a change comes during a training:
    ``wait`` lets it finish, then cycles; ``snapshot`` asks it for a snapshot, then cycles
    (resuming from the snapshot when the change left the training's inputs as they were)."""

    on_change: Literal["snapshot", "wait"] = "wait"
    redo_stale: bool = False
    """Make again, each cycle, the questions and answers an edit made stale (a prompt, a
    model or a role's settings: ``pipeline.fingerprint``), under the budget; else only
    say so."""


M = TypeVar("M", bound=BaseModel)


class Settings(Section):
    """The whole configuration. ``targets`` holds each table validated by its plugin's model;
    the tables plugins register (``register_settings``) are read with :meth:`section`."""

    project: ProjectSection
    topics: list[Topic] = Field(default_factory=list)
    providers: dict[str, Provider] = Field(default_factory=dict)
    roles: Roles
    pipeline: Pipeline = Field(default_factory=Pipeline)
    split: SplitSection = Field(default_factory=SplitSection)
    eval: EvalSection = Field(default_factory=EvalSection)
    training: Training | None = None
    budget: BudgetSection = Field(default_factory=BudgetSection)
    plan: PlanSection = Field(default_factory=PlanSection)
    watch: WatchSection = Field(default_factory=WatchSection)
    export: ExportSection = Field(default_factory=ExportSection)
    hub: HubSection = Field(default_factory=HubSection)
    compare: CompareSection = Field(default_factory=CompareSection)
    metrics: MetricsSection = Field(default_factory=MetricsSection)
    targets: dict[str, Any] = Field(default_factory=dict)
    hf_token: SecretStr | None = Field(default=None)
    log: str | None = Field(default=None)
    _sections: dict[str, tuple[SettingsSection, BaseModel]] = PrivateAttr(default_factory=dict)

    def with_sections(
        self, sections: Mapping[str, tuple[SettingsSection, BaseModel]]
    ) -> Settings:
        """These settings with the plugins' tables (each registration and its value)."""
        copy = self.model_copy()
        copy._sections = dict(sections)
        return copy

    @property
    def sections(self) -> Mapping[str, tuple[SettingsSection, BaseModel]]:
        """The plugins' tables by name: each registration and its validated value."""
        return MappingProxyType(self._sections)

    def section(self, name: str, model: type[M]) -> M:
        """The table ``[name]`` a plugin registered with ``model``, as loaded; the model's
        defaults when these settings were not loaded with it (a project built by hand).
        Raises ``TypeError`` when another model was registered under ``name``."""
        found = self._sections.get(name)
        if found is None:
            return model()
        value = found[1]
        if not isinstance(value, model):
            raise TypeError(f"settings table `{name}` is a {type(value).__name__}, not a "
                            f"{model.__name__}")
        return value

    @model_validator(mode="before")
    @classmethod
    def _training_seed_from_pipeline(cls, data: Any) -> Any:
        """``training.seed`` unset takes ``pipeline.seed`` (modulo 2**32, NumPy's limit): one
        number reproduces the project. A pipeline seed that is not valid is left to its own
        error, not copied into a second."""
        if not isinstance(data, dict) or not isinstance(data.get("training"), dict):
            return data
        training = data["training"]
        if training.get("seed") is not None:
            return data
        pipeline = data.get("pipeline")
        seed = pipeline.get("seed", DEFAULT_SEED) if isinstance(pipeline, dict) else (
            getattr(pipeline, "seed", DEFAULT_SEED)
        )
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            return data
        return {**data, "training": {**training, "seed": seed % 2**32}}
