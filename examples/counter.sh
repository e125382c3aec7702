#!/bin/bash
# A bash job that survives preemption: count to N, checkpoint the counter on the grace signal, resume after the
# requeue.
#
#   bash counter.sh [N]     # N: argv, else $SLURMX_WORK (the spec's `work:`), else 300
#
# Each step adds the counter to a running sum and sleeps COUNTER_STEP_S (default 0.2 s, so 300 steps take a
# minute). `slurmx_on_preempt save` registers the checkpoint: on the grace signal the hook runs `save` once and
# exits with the requeue code (99). Every run appends to "$(slurmx_checkpoint_dir)/counter.log":
#
#   START restart=0 from=0 sum=0
#   CHECKPOINT restart=0 at=117 sum=6786 left=29s
#   START restart=1 from=117 sum=6786
#   DONE count=300 sum=44850 expected=44850 restarts=1 runs=0-117,117-300
#
# `runs` tile 0..N with no gap or overlap and the sum is the closed form: every step was done exactly once.
#
# The hook (slurmx/hooks/hook.sh, bash >= 4 and coreutils only) is looked up in $SLURMX_HOOK_SH, next to this
# script, in the job's spool folder, then via `slurmx hook --path bash`: the job script slurmx renders runs this
# file as a child, so the functions it embeds for itself are not visible here.
set -uo pipefail

_find_hook() {
  local here candidate
  here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
  for candidate in "${SLURMX_HOOK_SH:-}" "$here/hook.sh" "${SLURMX_SPOOL_DIR:-/nonexistent}/pylib/slurmx/hooks/hook.sh"; do
    if [[ -n $candidate && -r $candidate ]]; then
      printf '%s\n' "$candidate"
      return 0
    fi
  done
  candidate=$(slurmx hook --path bash 2>/dev/null) && [[ -r $candidate ]] && printf '%s\n' "$candidate"
}

if ! hook=$(_find_hook); then
  echo "counter.sh: cannot find slurmx's hook.sh; copy \`slurmx hook --path bash\` next to this script" \
    "or set SLURMX_HOOK_SH" >&2
  exit 2
fi
# shellcheck source=../slurmx/hooks/hook.sh
source "$hook"

total=${1:-${SLURMX_WORK:-300}}
total=${total%%.*}  # the spec's `work:` may come as 300.0
if [[ ! $total =~ ^[1-9][0-9]*$ ]]; then
  echo "counter.sh: N must be a positive integer, got '$total'" >&2
  exit 2
fi
step_s=${COUNTER_STEP_S:-0.2}
dir=$(slurmx_checkpoint_dir) || exit 1
state="$dir/counter.state"
log_file="$dir/counter.log"

count=0 sum=0 runs=''
if (($(slurmx_restart_count) > 0)) && [[ -r $state ]]; then
  read -r count sum runs < "$state" || true
fi
first=$count

log() {
  printf '%s\n' "$*"
  printf '%s\n' "$*" >> "$log_file"
}

# The preempt command: bash runs traps between commands, and one step updates count and sum in one command, so
# the pair written here is always consistent. Temp file + sync + mv: the next run reads the old state or the new.
save() {
  local c=$count s=$sum now deadline
  printf '%d %d %s\n' "$c" "$s" "${runs:+$runs,}$first-$c" > "$state.tmp.$$" \
    && sync "$state.tmp.$$" && mv -f -- "$state.tmp.$$" "$state" || return 1
  now=$(date +%s)
  deadline=${SLURMX_GRACE_DEADLINE:-$now}
  log "CHECKPOINT restart=$(slurmx_restart_count) at=$c sum=$s left=$((${deadline%.*} - now))s"
}
slurmx_on_preempt save

log "START restart=$(slurmx_restart_count) from=$count sum=$sum"
while ((count < total)); do
  sleep "$step_s" || true         # the "work" of one step (a forwarded grace signal may cut it short)
  : $((sum += count, count += 1)) # one command: a trap never sees count without its sum
  slurmx_progress "$count" "$total"
done
log "DONE count=$count sum=$sum expected=$(((total - 1) * total / 2)) restarts=$(slurmx_restart_count)" \
  "runs=${runs:+$runs,}$first-$count"
