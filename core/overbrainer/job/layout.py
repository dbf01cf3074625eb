"""The job directory: every file name of the protocol between the core, a target and the job.

One owner for the layout, so the runner, the host scripts, the executors and the run
records agree. Paths are relative to the job directory (a run's ``runs/<id>/`` at home,
wherever a target puts it). Files the core writes before the start::

    run_job.py   machine_sample.py   job.json   axolotl.yaml   data/train.jsonl   data/eval.jsonl
    plugin/overbrainer_metrics.py   resume/checkpoint-N/

Files the job writes::

    metrics.jsonl   machine.json   output/   prepared/   snapshot.json   manifest.sha256
    exit_code

Files a target writes: ``job.log`` (the job's output), ``snapshot.request`` (a stop asked
for), ``.secrets.json`` (secrets by file: the runner reads and deletes it at start); a POSIX
host adds ``job.pid``, ``cancelling``, ``cancelled`` and ``.claim``. At home only, a target
may keep ``target.note`` (for ``runs ls``) and ``target.spend.json`` (its machines' cost).
"""

from __future__ import annotations

TRAVELS = "overbrainer.job.target"
"""The package of the files that travel to the target (read as files, never imported)."""
RUNNER = "run_job.py"
"""The stdlib-only runner: ``python run_job.py`` runs the whole job."""
MACHINE_SAMPLER = "machine_sample.py"
"""The stdlib-only sampler of the machine's gauges, beside the runner, which loads it."""
MACHINE_FILE = "machine.json"
"""The latest sample of the machine's gauges, rewritten by the runner while a stage runs;
the poll reads it with the job's status. At home, a follower keeps there the last one it
saw of a job running elsewhere (``runs show``, the TUI)."""
JOB_FILE = "job.json"
"""What the runner runs: stages, environment, paths (written by the core)."""
CONFIG_FILE = "axolotl.yaml"
DATA_DIR = "data"
TRAIN_FILE = f"{DATA_DIR}/train.jsonl"
EVAL_FILE = f"{DATA_DIR}/eval.jsonl"
PLUGIN_DIR = "plugin"
DEEPSPEED_DIR = "deepspeed"
"""The DeepSpeed preset of a run on several GPUs (``deepspeed/zero2.json``), when it has one."""
RESUME_DIR = "resume"
OUTPUT_DIR = "output"
PREPARED_DIR = "prepared"
METRICS_FILE = "metrics.jsonl"
JOB_LOG = "job.log"
SNAPSHOT_REQUEST = "snapshot.request"
SNAPSHOT_FILE = "snapshot.json"
MANIFEST_FILE = "manifest.sha256"
"""NUL-framed ``<sha256> <size> <path>`` records the runner writes when the job ends."""
SECRETS_FILE = ".secrets.json"
EXIT_CODE = "exit_code"
JOB_PID = "job.pid"
CANCELLING = "cancelling"
CANCELLED = "cancelled"
CLAIM = ".claim"

RECORD = "run.json"
"""The run record: at home only, never uploaded."""
INPUTS_FILE = "inputs.json"
"""What the run was made from (its fingerprint): at home only."""
TARGET_NOTE = "target.note"
"""One line a target may keep in a run directory (a pod's state and spend): ``runs ls``
prints it after the run's line, read as a file so that listing loads no plugin."""
TARGET_SPEND = "target.spend.json"
"""What the machines a target made for the run cost (their rates, starts and final figures),
read by the Prometheus endpoint: :mod:`overbrainer.job.spend` writes and reads it."""
FOLLOWED_METRICS = "metrics.followed.jsonl"
"""The metrics lines a follower saw of a job running elsewhere (ssh, a pod), written at home
as they come, so that charts are live before ``metrics.jsonl`` is brought home."""
HOME_ONLY = (RECORD, INPUTS_FILE, TARGET_NOTE, TARGET_SPEND, CLAIM, SECRETS_FILE)
"""Names of a run directory that stay at home: records and credentials of the run. A target
keeps its own records there too (a pod's): its executor skips those names as well."""
MANIFEST_ROOTS = (OUTPUT_DIR, METRICS_FILE, SNAPSHOT_FILE)
"""What the runner's manifest covers: everything the job wrote that is brought home, but
``job.log``, which the job is still writing when it hashes."""
CHECKPOINTS = "checkpoint-*"
"""Intermediate checkpoints under ``output/``: brought home only for a snapshot."""
