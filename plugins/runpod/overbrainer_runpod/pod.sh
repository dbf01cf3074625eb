# The pod's own script, written by overbrainer (POSIX sh: dash, busybox, bash).
#
#   sh pod.sh start      the pod's command: the pinned host key, sshd, then the watchdog
#   sh pod.sh watchdog   deletes the pod when it is of no more use, even if no client is left
#
# From the pod's environment: RUNPOD_POD_ID and RUNPOD_API_KEY (the platform's, for this pod),
# OVERBRAINER_RUN_ID, OVERBRAINER_DELETE_AT (epoch seconds), OVERBRAINER_BOOT_GRACE_S,
# OVERBRAINER_RETRIEVE_GRACE_S, OVERBRAINER_LEASE_S, OVERBRAINER_SNAPSHOT_LEAD_S,
# OVERBRAINER_TICK_S, OVERBRAINER_API_URL, PUBLIC_KEY (the client's public key),
# OVERBRAINER_HOST_KEY (the host key, base64, from a Runpod secret) and OVERBRAINER_POD_MODE
# ("after": a pod for export or compare, used while its command renews the lease;
# "serve": a pod for one served engine, of use while the engine runs).
set -u
S="$HOME/.overbrainer-pod"
TICK="${OVERBRAINER_TICK_S:-60}"
API="${OVERBRAINER_API_URL:-https://api.runpod.io}"
WORKDIR="${OVERBRAINER_POD_ROOT:-}/workspace/overbrainer"
RUN_DIR="$WORKDIR/${OVERBRAINER_RUN_ID:-none}"

now() { date +%s; }
say() { echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) $*"; }

# Delete this pod through the API with the pod's own key; retried until the API answers.
# The key goes to curl on its stdin, never on a command line.
delete_pod() {
  say "deleting the pod: $1"
  printf '%s\n' "$1" > "$S/deleting"
  body="{\"query\": \"mutation { podTerminate(input: {podId: \\\"${RUNPOD_POD_ID:-}\\\"}) }\"}"
  while :; do
    if command -v curl >/dev/null 2>&1; then
      answer=$(printf 'header = "Authorization: Bearer %s"\n' "${RUNPOD_API_KEY:-}" |
        curl -sS -m 30 -K - -H 'Content-Type: application/json' --data "$body" \
          "$API/graphql" 2>&1)
    else
      answer=$(OB_BODY="$body" OB_URL="$API/graphql" python3 -c '
import os, urllib.request
request = urllib.request.Request(os.environ["OB_URL"], os.environ["OB_BODY"].encode(),
    {"Content-Type": "application/json",
     "Authorization": "Bearer " + os.environ.get("RUNPOD_API_KEY", "")})
print(urllib.request.urlopen(request, timeout=30).read().decode())' 2>&1)
    fi
    # A failed field comes back with "errors" and "data" both (data null): errors first.
    case "$answer" in
      *'"errors"'*'not found'*) say "the pod is already gone"; exit 0 ;;
      *'"errors"'*) say "the delete failed, trying again: $(printf '%s' "$answer" | head -c 200)" ;;
      *'"data"'*) say "deleted"; exit 0 ;;
      *) say "the delete failed, trying again: $(printf '%s' "$answer" | head -c 200)" ;;
    esac
    sleep "$TICK"
  done
}

fail() {
  say "bootstrap failed: $1"
  printf '%s\n' "$1" > "$S/failed"
  delete_pod "bootstrap failed: $1"
}

start() {
  mkdir -p "$S" && chmod 700 "$S" || exit 1
  exec >>"$S/boot.log" 2>&1
  umask 077
  now > "$S/booted"
  say "pod ${RUNPOD_POD_ID:-?} of run ${OVERBRAINER_RUN_ID:-?}: booting"
  [ -n "${OVERBRAINER_HOST_KEY:-}" ] || fail "no host key reached the pod"
  printf '%s' "$OVERBRAINER_HOST_KEY" | base64 -d > "$S/host_key" 2>/dev/null ||
    fail "the host key is not valid base64"
  unset OVERBRAINER_HOST_KEY
  # The watchdog next (without the host key in its environment): whatever fails below,
  # the pod does not outlive it.
  sh "$S/pod.sh" watchdog >>"$S/watchdog.log" 2>&1 &
  [ -n "${PUBLIC_KEY:-}" ] || fail "no client key reached the pod"
  mkdir -p "$HOME/.ssh" && chmod 700 "$HOME/.ssh" || fail "cannot create ~/.ssh"
  printf '%s\n' "$PUBLIC_KEY" > "$HOME/.ssh/authorized_keys" || fail "cannot write authorized_keys"
  {
    echo "Port ${OVERBRAINER_SSH_PORT:-22}"
    echo "HostKey $S/host_key"
    echo "AuthorizedKeysFile $HOME/.ssh/authorized_keys"
    echo "PidFile $S/sshd.pid"
    echo "PasswordAuthentication no"
    echo "KbdInteractiveAuthentication no"
    echo "PermitRootLogin prohibit-password"
    echo "UsePAM no"
    echo "StrictModes no"
    echo "MaxSessions 64"
    echo "MaxStartups 64"
    printf '%s\n' "${OVERBRAINER_SSHD_EXTRA:-}"
  } > "$S/sshd_config"
  mkdir -p /run/sshd 2>/dev/null
  sshd=$(command -v sshd 2>/dev/null || echo /usr/sbin/sshd)
  "$sshd" -t -f "$S/sshd_config" || fail "sshd refuses its configuration"
  "$sshd" -D -e -f "$S/sshd_config" 2>>"$S/sshd.log" &
  sshd_pid=$!
  # An sshd that cannot listen (the port taken) stops at once: no "ready" for it.
  sleep 0.3 2>/dev/null || sleep 1
  kill -0 "$sshd_pid" 2>/dev/null ||
    fail "sshd stopped at once: $(tail -n 2 "$S/sshd.log" | tr '\n' ' ')"
  mkdir -p "$WORKDIR" || fail "cannot create $WORKDIR"
  printf '%s\n' "$WORKDIR" > "$S/ready.tmp" && mv "$S/ready.tmp" "$S/ready"
  say "ready: sshd on port ${OVERBRAINER_SSH_PORT:-22}"
  wait
}

# Whether the job of the run ended: its exit code, a cancel, or its process group gone.
job_ended() {
  [ -f "$RUN_DIR/exit_code" ] || [ -f "$RUN_DIR/cancelled" ] && return 0
  pid=$(cat "$RUN_DIR/job.pid" 2>/dev/null) || return 1
  case "$pid" in '' | *[!0-9]*) return 1 ;; esac
  kill -0 -"$pid" 2>/dev/null && return 1
  return 0
}

lease_fresh() {
  [ -f "$RUN_DIR/.pod/lease" ] || return 1
  renewed=$(stat -c %Y "$RUN_DIR/.pod/lease" 2>/dev/null) || return 1
  [ $(($(now) - renewed)) -lt "${OVERBRAINER_LEASE_S:-600}" ]
}

request_snapshot() {
  say "asking the job for a snapshot ($1)"
  printf '%s\n' "$1" > "$RUN_DIR/snapshot.request.tmp" &&
    mv "$RUN_DIR/snapshot.request.tmp" "$RUN_DIR/snapshot.request"
}

# A pod for the commands after training runs no job: it is of use while a command holds
# its lease (a kept pod: until max_hours).
after_rules() {
  # The cost cap (max_cost_usd), as the client wrote it: a deadline like max_hours.
  cost_at=$(cat "$S/cost_at" 2>/dev/null)
  case "$cost_at" in '' | *[!0-9]*) cost_at="" ;; esac
  if [ -n "$cost_at" ] && [ "$1" -ge "$cost_at" ] && ! lease_fresh; then
    delete_pod "past the cost cap (max_cost_usd) with no lease from a command"
  fi
  if [ ! -f "$RUN_DIR/.pod/lease" ]; then
    booted=$(cat "$S/booted" 2>/dev/null || echo "$1")
    [ $(($1 - booted)) -ge "$2" ] &&
      delete_pod "no command reached the pod within the boot grace (${2} s)"
  elif [ ! -f "$RUN_DIR/.pod/keep" ] && ! lease_fresh; then
    delete_pod "the command using the pod is gone (its lease ran out)"
  fi
  return 0
}

# A pod made for a serve runs no job: it is of use while its engine runs (the engine's own
# watchdog, .serve/ID/watchdog.py, ends it after idle_minutes without a connection).
serve_rules() {
  cost_at=$(cat "$S/cost_at" 2>/dev/null)
  case "$cost_at" in '' | *[!0-9]*) cost_at="" ;; esac
  if [ -n "$cost_at" ] && [ "$1" -ge "$cost_at" ]; then
    delete_pod "past the cost cap (max_cost_usd)"
  fi
  started=""
  for file in "$WORKDIR"/.serve/*/watchdog.pid; do
    [ -f "$file" ] || continue
    started=1
    pid=$(cat "$file" 2>/dev/null)
    case "$pid" in '' | *[!0-9]*) continue ;; esac
    kill -0 -"$pid" 2>/dev/null && return 0 # its group: the engine, its watchdog killed too
  done
  if [ -n "$started" ]; then
    delete_pod "the served engine ended (its idle limit, or it stopped)"
  fi
  booted=$(cat "$S/booted" 2>/dev/null || echo "$1")
  [ $(($1 - booted)) -ge "$2" ] &&
    delete_pod "no engine started within the boot grace (${2} s)"
  return 0
}

watchdog() {
  delete_at="${OVERBRAINER_DELETE_AT:?}"
  boot_grace="${OVERBRAINER_BOOT_GRACE_S:-1800}"
  retrieve_grace="${OVERBRAINER_RETRIEVE_GRACE_S:-3600}"
  lead="${OVERBRAINER_SNAPSHOT_LEAD_S:-900}"
  ended_at=""
  asked=""
  say "watching run ${OVERBRAINER_RUN_ID:-?}: deleting the pod at $delete_at at the latest"
  while :; do
    t=$(now)
    [ -f "$S/failed" ] && delete_pod "bootstrap failed: $(cat "$S/failed")"
    [ -f "$RUN_DIR/.pod/retrieved" ] && delete_pod "the results are home"
    if [ "${OVERBRAINER_POD_MODE:-}" = after ]; then
      after_rules "$t" "$boot_grace"
    elif [ "${OVERBRAINER_POD_MODE:-}" = serve ]; then
      serve_rules "$t" "$boot_grace"
    elif [ ! -f "$RUN_DIR/job.pid" ]; then
      booted=$(cat "$S/booted" 2>/dev/null || echo "$t")
      [ $((t - booted)) -ge "$boot_grace" ] &&
        delete_pod "no job started within the boot grace (${boot_grace} s)"
    elif job_ended; then
      [ -n "$ended_at" ] || { ended_at=$t; say "the job ended"; }
      # A follower retrieving the results holds a lease: its download is not cut short.
      if [ ! -f "$RUN_DIR/.pod/keep" ] && [ $((t - ended_at)) -ge "$retrieve_grace" ] &&
        ! lease_fresh; then
        delete_pod "the results were not retrieved within the retrieve grace (${retrieve_grace} s)"
      fi
    elif [ -z "$asked" ] && [ ! -f "$RUN_DIR/snapshot.json" ]; then
      # "EPOCH REASON" from the client (the cost cap), else the deadline's lead.
      set -- $(cat "$S/snapshot_at" 2>/dev/null) ""
      at="${1:-$((delete_at - lead))}"
      reason="${2:-deadline}"
      case "$at" in '' | *[!0-9]*) at=$((delete_at - lead)) ;; esac
      deadline_at=$((delete_at - lead))
      if [ "$at" -gt "$deadline_at" ]; then at=$deadline_at; reason=deadline; fi
      if [ "$t" -ge "$at" ] && [ ! -f "$RUN_DIR/snapshot.request" ]; then
        request_snapshot "$reason" && asked=1
      fi
    fi
    if [ "$t" -ge "$delete_at" ] && ! lease_fresh; then
      delete_pod "past max_hours with no lease from a follower"
    fi
    sleep "$TICK"
  done
}

case "${1:-}" in
  start) start ;;
  watchdog) watchdog ;;
  *) echo "usage: pod.sh start|watchdog" >&2; exit 2 ;;
esac
