"""``overbrainer pod``: the Runpod pods of overbrainer, the GPU types, data centers, volumes.

Registered through ``register_commands``; the SDK is imported by the commands that talk to
Runpod, when they run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from overbrainer_runpod.pods import PodLifecycle

TAIL_OPTION_MAX = 1_000_000
"""The most lines ``--tail`` takes (as ``runs logs``)."""


def _api() -> Any:
    from overbrainer.plugin.commands import current_project
    from overbrainer_runpod.api import api_of
    from overbrainer_runpod.settings import account, rest_url

    project = current_project()
    return api_of(*account(project), rest_url(project))


@click.group()
def pod() -> None:
    """Runpod pods: list and delete them, read their logs, see GPU types, data centers and
    volumes."""


@pod.command("ls")
def list_pods() -> None:
    """List overbrainer's pods on the account: id, state, $/h, run (and whether the run is
    of this project).

    Example: overbrainer pod ls
    """
    from overbrainer.plugin.commands import current_project
    from overbrainer_runpod.pods import AFTER_TAG, SERVE_TAG

    runs_dir = current_project().runs_dir
    pods = [p for p in _api().pods() if str(p.get("name") or "").startswith("overbrainer-")]
    if not pods:
        click.echo("pod: no overbrainer pod on this account")
    for found in pods:
        run_id, _, attempt = str(found["name"]).removeprefix("overbrainer-").rpartition("-")
        here = "" if (runs_dir / run_id).is_dir() else " (not of this project)"
        after = " (after training)" if attempt.startswith(AFTER_TAG) else ""
        what = "run"
        if attempt.startswith(SERVE_TAG):  # a serve's pod: its serve id, under .overbrainer/
            what, here = "serve", "" if _serve_dir(run_id).is_dir() else " (not of this project)"
        click.echo(
            f"{found.get('id')}  {found.get('desiredStatus', '?'):<9}  "
            f"${float(found.get('costPerHr') or 0):.2f}/h  {what} {run_id}{after}{here}"
        )


@pod.command("rm")
@click.argument("run_id")
@click.option("--force", is_flag=True, help="Delete it even while its run is still running.")
def remove(run_id: str, force: bool) -> None:
    """Delete the pod of RUN_ID and confirm it is gone. RUN_ID may be `latest` or any
    unique prefix of a run of this project, the id of a run of none, or the id of a
    serve (`pod ls` names it).

    Example: overbrainer pod rm latest
    """
    from overbrainer.plugin import UserError
    from overbrainer.plugin.commands import ProjectLock, current_project, resolve_run_id
    from overbrainer_runpod import record
    from overbrainer_runpod.pods import PodLifecycle
    from overbrainer_runpod.record import PodState
    from overbrainer_runpod.timing import timing

    project = current_project()
    run_id = resolve_run_id(project.runs_dir, run_id, known_only=False)
    with ProjectLock(project.dir):
        run_dir = project.runs_dir / run_id
        known = run_dir.is_dir() and record.load(run_dir) is not None
        life = PodLifecycle(_api(), run_dir, timing(), persist=known)
        pod_record = life.pod
        if pod_record.state is PodState.RUNNING and not force:
            raise UserError(
                f"run {run_id} may still be running on pod {pod_record.pod_id}: cancel it with "
                f"`overbrainer train cancel {run_id}`, or delete the pod anyway with --force"
            )
        if pod_record.state is PodState.AWAITING_RETRIEVAL and not force:
            raise UserError(
                f"the results of run {run_id} are still on pod {pod_record.pod_id}: collect them "
                f"with `overbrainer train attach {run_id}`, or delete the pod anyway with --force"
            )
        after = _remove_after_pod(run_dir, run_id, known)
        if not known and _remove_serve_pod(run_id):
            after = True
        if pod_record.state is PodState.DELETED:
            if not after:
                click.echo(f"pod: the pod of run {run_id} is already deleted")
            return
        # A create whose answer never came (the CLI killed during it) left no pod id:
        # the pod is found by its name.
        if not _delete_pods(life, f"run {run_id}") and not after:
            raise UserError(f"run {run_id} has no pod")


def _remove_after_pod(run_dir: Any, run_id: str, known: bool) -> bool:
    """Delete the run's pod for the commands after training (export, compare), when it
    has one: from its record, else (a run of no record) by its name. Whether one was."""
    from overbrainer_runpod import record
    from overbrainer_runpod.after import after_dir
    from overbrainer_runpod.pods import AFTER_TAG, PodLifecycle
    from overbrainer_runpod.record import PodState
    from overbrainer_runpod.timing import timing

    where = after_dir(run_dir)
    recorded = where.is_dir() and record.load(where) is not None
    if not recorded and known:
        return False
    life = PodLifecycle(_api(), where, timing(), persist=recorded, run_id=run_id, tag=AFTER_TAG)
    if life.pod.state is PodState.DELETED:
        return False
    return _delete_pods(life, f"run {run_id} (after training)")


@pod.command("logs")
@click.argument("run_id", default="latest")
@click.option(
    "--source",
    type=click.Choice(["container", "system"]),
    help="Only the container's lines, or only Runpod's system lines.",
)
@click.option(
    "--tail",
    type=click.IntRange(min=1, max=TAIL_OPTION_MAX),
    help=f"Only the last N lines of each part (at most {TAIL_OPTION_MAX:,}).",
)
@click.option(
    "--follow", "-f", "keep_following", is_flag=True, help="Keep printing until the pod is gone."
)
def logs(run_id: str, source: str | None, tail: int | None, keep_following: bool) -> None:
    """Print the logs of the pod RUN_ID ran on: its boot and watchdog logs and Runpod's log
    of it, as the run directory keeps them, then what Runpod still has while the pod exists.
    Redacted, each line on one line. RUN_ID may be `latest` (the default) or any unique
    prefix of an id.

    Example: overbrainer pod logs latest --source container --follow
    """
    from overbrainer.plugin import UserError
    from overbrainer.plugin.commands import current_project, quiet_end, read_run, resolve_run_id
    from overbrainer.plugin.operations import MachineLogQuery
    from overbrainer_runpod.podlog import ran_on_a_pod, show_pod_log

    project = current_project()
    run = read_run(project, resolve_run_id(project.runs_dir, run_id))
    if not ran_on_a_pod(project, run):
        raise UserError(
            f"pod: run {run.id} did not run on a pod (its target `{run.target}` is not a "
            "runpod target): it has no pod log"
        )
    query = MachineLogQuery(source=source, tail=tail, follow=keep_following)
    with quiet_end():
        show_pod_log(project, run.id, query, "pod")


@pod.command("gpus")
@click.option("--min-vram", type=click.IntRange(min=1), help="At least this many GB of VRAM.")
@click.option("--max-price", type=click.FloatRange(min=0), help="At most this many $/h.")
@click.option("--in-stock", is_flag=True, help="Only types in stock on Secure Cloud.")
def gpus(min_vram: int | None, max_price: float | None, in_stock: bool) -> None:
    """List the GPU types of Secure Cloud: id, VRAM, $/h, stock; cheapest first.

    Example: overbrainer pod gpus --min-vram 48 --in-stock
    """
    from overbrainer_runpod.pods import stock_of

    rows = []
    for gpu in _api().gpus():
        lowest = gpu.get("lowestPrice") or {}
        price = lowest.get("uninterruptablePrice") or gpu.get("securePrice")
        stock = stock_of(gpu)
        vram = gpu.get("memoryInGb") or 0
        if not gpu.get("secureCloud") or (min_vram and vram < min_vram):
            continue
        if max_price is not None and (price is None or price > max_price):
            continue
        if in_stock and not stock:
            continue
        rows.append((price if price is not None else float("inf"), gpu["id"], vram, stock))
    for price, gpu_id, vram, stock in sorted(rows):
        shown = f"${price:.2f}/h" if price != float("inf") else "-"
        click.echo(f"{gpu_id:<28}  {vram:>4} GB  {shown:>9}  {stock or 'out of stock'}")


@pod.command("datacenters")
def datacenters() -> None:
    """List Runpod's data centers (for data_center_ids).

    Example: overbrainer pod datacenters
    """
    for center in _api().datacenters():
        click.echo(f"{center.get('id')}  {center.get('location') or center.get('name') or ''}")


@pod.command("volumes")
def volumes() -> None:
    """List the account's network volumes (for network_volume_id).

    Example: overbrainer pod volumes
    """
    found = _api().volumes()
    if not found:
        click.echo("pod: no network volume on this account")
    for volume in found:
        click.echo(
            f"{volume.get('id')}  {volume.get('name')}  {volume.get('size')} GB  "
            f"{volume.get('dataCenterId')}"
        )


def _serve_dir(serve_id: str) -> Any:
    from overbrainer.plugin.commands import current_project
    from overbrainer_runpod.serve import SERVES_DIR

    return current_project().state_dir / SERVES_DIR / serve_id


def _remove_serve_pod(serve_id: str) -> bool:
    """Delete the pod of the serve ``serve_id``: from its record, else by its name.
    Whether there was one."""
    from overbrainer_runpod import record
    from overbrainer_runpod.pods import SERVE_TAG, PodLifecycle
    from overbrainer_runpod.record import PodState
    from overbrainer_runpod.timing import timing

    where = _serve_dir(serve_id)
    recorded = where.is_dir() and record.load(where) is not None
    life = PodLifecycle(_api(), where, timing(), persist=recorded, run_id=serve_id, tag=SERVE_TAG)
    if life.pod.state is PodState.DELETED:
        return False
    return _delete_pods(life, f"serve {serve_id}")


def _delete_pods(life: PodLifecycle, whose: str) -> bool:
    """Delete the pod ``life`` records, or those its name finds when it recorded none,
    saying each with what it cost; whether there was any."""
    from overbrainer_runpod.record import PodState

    pods = [{"id": life.pod.pod_id}] if life.pod.pod_id else life.find_by_name()
    for found in pods:
        life.save(pod_id=str(found["id"]), state=PodState.DELETING, deleted=None)
        life.delete("pod rm")
        spend = life.pod.estimated_spend
        click.echo(
            f"pod: pod {found['id']} of {whose} deleted"
            + (f" (about ${spend:.2f})" if spend is not None else "")
        )
    return bool(pods)
