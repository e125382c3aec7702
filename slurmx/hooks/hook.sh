# shellcheck shell=bash
# slurmx job-side hooks for bash job scripts (bash >= 4, coreutils only). Source it, do not run it:
#
#   source "$SLURMX_HOOKS/hook.sh"
#   slurmx_on_preempt ./save-checkpoint.sh "$(slurmx_checkpoint_dir)"   # runs once on the grace signal
#   slurmx_run python3 train.py --resume-from "$(slurmx_checkpoint_dir)"
#   exit $?                                                            # the payload's exit code
#
# Why slurmx_run: the slurmx daemon preempts a job by signalling the batch shell (SLURMX_GRACE_SIGNAL, default
# USR2), waiting SLURMX_GRACE_S seconds, then requeueing it. bash runs a trap only after the foreground command
# ends, so a 10-hour `python3 train.py` in the foreground would hold the trap back until far past the deadline.
# slurmx_run starts the payload in the background and `wait`s for it, which a trapped signal interrupts at once.
#
# The same environment contract as the Python hooks (slurmx.hooks): SLURMX_GRACE_SIGNAL, SLURMX_GRACE_S,
# SLURMX_ON_PREEMPT (exit|wait), SLURMX_REQUEUE_EXIT_CODE, SLURMX_CHECKPOINT_DIR, SLURMX_SPOOL_DIR, SLURMX_GROUP,
# SLURMX_VARIANT, SLURMX_FORWARD_SIGNAL, SLURM_RESTART_COUNT, SLURM_JOB_ID; exports SLURMX_GRACE_DEADLINE.
# Safe under `set -euo pipefail`.

_SLURMX_PREEMPT_CMD=()   # registered by slurmx_on_preempt
_SLURMX_HANDLING=0       # 1 once the grace signal was handled: repeats are ignored
_SLURMX_PAYLOAD_PID=     # the slurmx_run payload while it runs
_SLURMX_TRAPPED=         # the signal the trap is installed on

# The grace signal as `trap` and `kill -s` take it: USR2 from USR2, SIGUSR2, usr2; numbers pass through.
_slurmx_signal() {
  local sig=${SLURMX_GRACE_SIGNAL:-USR2}
  sig=${sig^^}
  printf '%s' "${sig#SIG}"
}

_slurmx_int() {  # _slurmx_int VALUE DEFAULT: VALUE if it is a non-negative integer, else DEFAULT
  if [[ ${1:-} =~ ^[0-9]+$ ]]; then printf '%s' "$((10#$1))"; else printf '%s' "$2"; fi
}

# Epoch microseconds into _SLURMX_NOW_US (bash 5's EPOCHREALTIME saves a fork; its separator follows the locale).
_slurmx_now_us() {
  if [[ -n ${EPOCHREALTIME:-} ]]; then
    _SLURMX_NOW_US=${EPOCHREALTIME//[!0-9]/}
  else
    _SLURMX_NOW_US=$(date +%s%6N)
  fi
}

# _slurmx_slurm_self: how Slurm's commands name this job alone: A_i in a task of a slurmx array (the task that
# starts last keeps the array's job id as its SLURM_JOB_ID, and that id names every task of the array), else
# SLURM_JOB_ID.
_slurmx_slurm_self() {
  if [[ ${SLURMX_JOB_KEY:-} =~ ^([0-9]+)=([0-9]+_[0-9]+)$ && ${BASH_REMATCH[1]} == "${SLURM_JOB_ID:-}" ]]; then
    printf '%s' "${BASH_REMATCH[2]}"
  else
    printf '%s' "${SLURM_JOB_ID:-}"
  fi
}

# What this job's files are named by (slurmx/hooks/_env.py job_id): SLURMX_JOB_KEY when a slurmx job script set it;
# else SLURM_JOB_ID, or <array job id>_<index> in a job array's task, which slurmxd knows by its index; local-<pid>
# outside Slurm.
_slurmx_job() {
  if [[ ${SLURMX_JOB_KEY:-} =~ ^([0-9]+)=([0-9]+(_[0-9]+)?)$ && ${BASH_REMATCH[1]} == "${SLURM_JOB_ID:-}" ]]; then
    printf '%s' "${BASH_REMATCH[2]}"  # said by this job's slurmx script, for this job id
  elif [[ ${SLURM_ARRAY_JOB_ID:-} =~ ^[0-9]+$ && ${SLURM_ARRAY_TASK_ID:-} =~ ^[0-9]+$ ]]; then
    printf '%s_%s' "$((10#$SLURM_ARRAY_JOB_ID))" "$((10#$SLURM_ARRAY_TASK_ID))"
  else
    printf '%s' "${SLURM_JOB_ID:-local-$$}"
  fi
}

# Export SLURMX_GRACE_DEADLINE (epoch seconds): the daemon's intent file knows best when it will requeue;
# otherwise now + SLURMX_GRACE_S.
_slurmx_set_deadline() {
  local now line='' intent grace
  now=$(date +%s)
  grace=$(_slurmx_int "${SLURMX_GRACE_S:-}" 120)
  if [[ -n ${SLURMX_SPOOL_DIR:-} ]]; then
    intent="$SLURMX_SPOOL_DIR/preempt-$(_slurmx_job)"
    if [[ -f $intent && ! -L $intent && -r $intent ]]; then  # the daemon's regular file: a FIFO would block
      IFS= read -r line < "$intent" || true
      line=${line%% reason=*}  # free text, last: not searched for fields
    fi
  fi
  if [[ $line == preempt* && " $line " =~ [[:space:]]deadline=([0-9]+(\.[0-9]*)?)[[:space:]] ]]; then
    SLURMX_GRACE_DEADLINE=${BASH_REMATCH[1]}
  elif [[ $line == preempt* && " $line " =~ [[:space:]]grace=([0-9]+)(\.[0-9]*)?[[:space:]] ]]; then
    SLURMX_GRACE_DEADLINE=$((now + 10#${BASH_REMATCH[1]}))
  else
    SLURMX_GRACE_DEADLINE=$((now + grace))
  fi
  export SLURMX_GRACE_DEADLINE
}

# Wait until the slurmx_run payload really ended and put its exit code into _SLURMX_RC. A trapped signal makes
# `wait` return early (>128) while the payload still runs: wait again then.
_slurmx_wait_payload() {
  local pid=$_SLURMX_PAYLOAD_PID rc=0 last=0
  while :; do
    rc=0
    wait "$pid" || rc=$?
    kill -0 "$pid" 2>/dev/null || break
  done
  # If the last `wait` was the interrupted one, the payload's status is still to be collected; if it was the
  # payload's own, this one answers 127 (not a child any more).
  wait "$pid" 2>/dev/null || last=$?
  if ((last != 127)); then rc=$last; fi
  _SLURMX_RC=$rc
}

# Forward the grace signal to the payload? SLURMX_FORWARD_SIGNAL=1: always; 0 (default): never; auto: only when
# the payload announced a handler of its own (slurmx.hooks.on_preempt or slurmx_on_preempt in the payload write
# their pid to $SLURMX_SPOOL_DIR/handler-$SLURM_JOB_ID), so a payload that knows nothing of the signal is not
# killed by it and keeps working through its grace period.
_slurmx_handler_marker() {
  printf '%s/handler-%s' "${SLURMX_SPOOL_DIR:-}" "$(_slurmx_job)"
}

_slurmx_should_forward() {
  case ${SLURMX_FORWARD_SIGNAL:-0} in
    1) return 0 ;;
    auto)
      local marker pid=''
      [[ -n ${SLURMX_SPOOL_DIR:-} ]] || return 1
      marker=$(_slurmx_handler_marker)
      [[ -r $marker ]] && IFS= read -r pid < "$marker"
      # An explicit status: inside a trap handler a bare `return` reports the interrupted command's status.
      if [[ -n $pid && $pid != "$$" ]]; then return 0; fi
      return 1 ;;
    *) return 1 ;;
  esac
}

# The user's own sbatch --signal (SLURMX_USER_SIGNAL, set by the job script): to the payload alone
# (SLURMX_USER_SIGNAL_TO=batch, sbatch's B:) or to its whole process group (all). Sent by the job script's timer
# before the time limit, and on the grace signal before slurmx's own handling, so the user's handler runs first.
_slurmx_user_signal() {
  local sig=${SLURMX_USER_SIGNAL:-} pid=${_SLURMX_PAYLOAD_PID:-}
  if [[ -z $sig || -z $pid ]]; then return 0; fi
  if [[ ${SLURMX_USER_SIGNAL_TO:-batch} == all ]]; then
    kill -s "$sig" -- "-$pid" 2>/dev/null || kill -s "$sig" "$pid" 2>/dev/null || true
  else
    kill -s "$sig" "$pid" 2>/dev/null || true
  fi
  return 0
}

# The trap: once, export the deadline, send the user's own signal, forward the grace signal if asked to, run the
# registered command, then leave.
_slurmx_on_signal() {
  if ((_SLURMX_HANDLING)); then return 0; fi
  _SLURMX_HANDLING=1
  _slurmx_set_deadline
  _slurmx_user_signal
  local forward=0
  if [[ -n $_SLURMX_PAYLOAD_PID ]] && _slurmx_should_forward; then
    forward=1  # to the payload's process group (slurmx_run gave it its own); to the payload alone as fallback
    kill -s "$_SLURMX_TRAPPED" -- "-$_SLURMX_PAYLOAD_PID" 2>/dev/null \
      || kill -s "$_SLURMX_TRAPPED" "$_SLURMX_PAYLOAD_PID" 2>/dev/null || true
  fi
  if ((${#_SLURMX_PREEMPT_CMD[@]} == 0)); then
    return 0  # nothing registered: slurmx_run keeps waiting for the payload (which may handle it itself)
  fi
  local rc=0
  "${_SLURMX_PREEMPT_CMD[@]}" || rc=$?
  if ((rc != 0)); then
    printf 'slurmx hook: the preempt command failed (exit %d); leaving for requeue anyway\n' "$rc" >&2
  fi
  if [[ ${SLURMX_ON_PREEMPT:-exit} == wait ]]; then
    while :; do sleep 3600; done  # until Slurm requeues (kills) the job
  fi
  if [[ -n $_SLURMX_PAYLOAD_PID ]]; then
    if ((forward)); then
      _slurmx_wait_payload  # it was told too: let it finish its own checkpoint
    else
      # The job ends here; stop the payload as Slurm would at the end of the batch step.
      kill -s TERM "$_SLURMX_PAYLOAD_PID" 2>/dev/null || true
    fi
  fi
  exit "$(_slurmx_int "${SLURMX_REQUEUE_EXIT_CODE:-}" 99)"
}

_slurmx_trap() {
  local sig
  sig=$(_slurmx_signal)
  if [[ $_SLURMX_TRAPPED == "$sig" ]]; then return 0; fi
  if ! trap '_slurmx_on_signal' "$sig"; then
    printf 'slurmx hook: SLURMX_GRACE_SIGNAL=%s is not a signal\n' "${SLURMX_GRACE_SIGNAL:-}" >&2
    return 2
  fi
  _SLURMX_TRAPPED=$sig
}

# slurmx_on_preempt CMD...: on the grace signal, export SLURMX_GRACE_DEADLINE, run CMD once, then exit with
# SLURMX_REQUEUE_EXIT_CODE (default 99) or, with SLURMX_ON_PREEMPT=wait, sleep until Slurm requeues the job.
slurmx_on_preempt() {
  if (($# == 0)); then
    printf 'usage: slurmx_on_preempt CMD [ARG...]\n' >&2
    return 2
  fi
  _slurmx_trap || return 2
  _SLURMX_PREEMPT_CMD=("$@")
  if [[ -n ${SLURMX_SPOOL_DIR:-} && -d $SLURMX_SPOOL_DIR ]]; then  # announce it (see _slurmx_should_forward)
    local marker
    marker=$(_slurmx_handler_marker)
    printf '%s\n' "$$" > "$marker.$$" 2>/dev/null && mv -f "$marker.$$" "$marker" 2>/dev/null || true
  fi
}

# slurmx_run CMD...: run the payload so that the grace signal is handled while it works; returns its exit code.
# The payload does not see the signal unless SLURMX_FORWARD_SIGNAL=1 (then it is sent to the payload's own
# process group, e.g. for a Python payload using slurmx.hooks.on_preempt, and its end is awaited before exiting).
slurmx_run() {
  if (($# == 0)); then
    printf 'usage: slurmx_run CMD [ARG...]\n' >&2
    return 2
  fi
  _slurmx_trap || return 2
  if [[ ${SLURMX_FORWARD_SIGNAL:-0} == auto && -n ${SLURMX_SPOOL_DIR:-} ]]; then
    rm -f -- "$(_slurmx_handler_marker)"  # a marker from before a requeue speaks for the old payload
  fi
  if [[ ${SLURMX_FORWARD_SIGNAL:-0} == 1 || ${SLURMX_FORWARD_SIGNAL:-0} == auto ]]; then
    local monitor=0
    if [[ $- == *m* ]]; then monitor=1; fi
    set -m  # job control: the payload gets a process group of its own, so forwarding reaches all of it
    "$@" <&0 &
    _SLURMX_PAYLOAD_PID=$!
    if ((!monitor)); then set +m; fi
  else
    "$@" <&0 &  # explicit stdin: bash would give a background command /dev/null
    _SLURMX_PAYLOAD_PID=$!
  fi
  _slurmx_wait_payload
  _SLURMX_PAYLOAD_PID=
  return "$_SLURMX_RC"
}

_slurmx_json_str() {  # a JSON string (or null for an empty value) into _SLURMX_JSON
  local s=${1:-}
  if [[ -z $s ]]; then _SLURMX_JSON=null; return; fi
  s=${s//\\/\\\\}
  s=${s//\"/\\\"}
  s=${s//$'\n'/\\n}
  s=${s//$'\t'/\\t}
  s=${s//$'\r'/\\r}
  s=${s//[[:cntrl:]]/}
  _SLURMX_JSON="\"$s\""
}

_slurmx_seconds() {  # epoch microseconds as decimal seconds
  printf '%d.%06d' "$(($1 / 1000000))" "$(($1 % 1000000))"
}

# slurmx_progress STEP [TOTAL]: write $SLURMX_SPOOL_DIR/progress-$SLURM_JOB_ID.json atomically (temp file + mv),
# in the format of slurmx.hooks.progress. No-op without SLURMX_SPOOL_DIR; a failed write warns but returns 0.
slurmx_progress() {
  local step=${1:-} total=${2:-}
  if [[ ! $step =~ ^[0-9]+$ || ! $total =~ ^([0-9]+)?$ || $# -gt 2 ]]; then
    printf 'usage: slurmx_progress STEP [TOTAL]   (non-negative integers)\n' >&2
    return 2
  fi
  step=$((10#$step))
  if [[ -n $total ]]; then total=$((10#$total)); else total=null; fi
  if [[ -z ${SLURMX_SPOOL_DIR:-} ]]; then return 0; fi
  local job restarts path now content
  job=$(_slurmx_job)
  restarts=$(_slurmx_int "${SLURM_RESTART_COUNT:-}" 0)
  path="$SLURMX_SPOOL_DIR/progress-$job.json"
  _slurmx_now_us
  now=$_SLURMX_NOW_US
  # The rate is measured from this run's first report, kept in shell variables or, failing that (a new shell,
  # the Python CLI), taken over from the file when it belongs to this job and restart.
  if [[ ${_SLURMX_PROGRESS_RUN:-} != "$job/$restarts" || $step -lt ${_SLURMX_START_STEP:-0} || $now -lt ${_SLURMX_START_US:-0} ]]; then
    _SLURMX_PROGRESS_RUN="$job/$restarts"
    _SLURMX_START_US=$now
    _SLURMX_START_STEP=$step
    if [[ -r $path ]]; then
      content=$(<"$path") || content=''
      local re_job="\"job_id\": \"([^\"]*)\"" re_restarts="\"restart_count\": ([0-9]+)"
      local re_time="\"start_time\": ([0-9]+)(\.([0-9]*))?[,}]" re_step="\"start_step\": ([0-9]+)"
      local fjob='' frestarts='' ftime='' fstep=''
      if [[ $content =~ $re_job ]]; then fjob=${BASH_REMATCH[1]}; fi
      if [[ $content =~ $re_restarts ]]; then frestarts=${BASH_REMATCH[1]}; fi
      if [[ $content =~ $re_time ]]; then
        local frac="${BASH_REMATCH[3]}000000"
        ftime=$((10#${BASH_REMATCH[1]} * 1000000 + 10#${frac:0:6}))
      fi
      if [[ $content =~ $re_step ]]; then fstep=$((10#${BASH_REMATCH[1]})); fi
      if [[ $fjob == "$job" && $frestarts == "$restarts" && -n $ftime && -n $fstep ]] \
          && ((ftime <= now && fstep <= step)); then
        _SLURMX_START_US=$ftime
        _SLURMX_START_STEP=$fstep
      fi
    fi
  fi
  local rate=null
  if ((step != _SLURMX_START_STEP && now > _SLURMX_START_US)); then
    local milli=$(((step - _SLURMX_START_STEP) * 1000000000 / (now - _SLURMX_START_US)))
    rate=$(printf '%d.%03d' "$((milli / 1000))" "$((milli % 1000))")
  fi
  local group variant
  _slurmx_json_str "$job"; job=$_SLURMX_JSON
  _slurmx_json_str "${SLURMX_GROUP:-}"; group=$_SLURMX_JSON
  _slurmx_json_str "${SLURMX_VARIANT:-}"; variant=$_SLURMX_JSON
  local tmp="$SLURMX_SPOOL_DIR/.progress-$(_slurmx_job).json.$$.${BASHPID:-$$}.tmp"
  if ! printf '{"job_id": %s, "group": %s, "variant": %s, "step": %d, "total": %s, "time": %s, "rate": %s, "restart_count": %d, "start_time": %s, "start_step": %d}\n' \
      "$job" "$group" "$variant" "$step" "$total" "$(_slurmx_seconds "$now")" "$rate" "$restarts" \
      "$(_slurmx_seconds "$_SLURMX_START_US")" "$_SLURMX_START_STEP" >"$tmp" \
      || ! mv -f -- "$tmp" "$path"; then
    rm -f -- "$tmp" 2>/dev/null || true
    printf 'slurmx hook: cannot write progress to %s\n' "$path" >&2
  fi
  return 0
}

# slurmx_checkpoint_dir: print SLURMX_CHECKPOINT_DIR (default ./slurmx-checkpoint) as an absolute path, as
# slurmx.hooks.checkpoint_dir() returns it; created if missing.
slurmx_checkpoint_dir() {
  local dir=${SLURMX_CHECKPOINT_DIR:-./slurmx-checkpoint}
  if [[ $dir != /* ]]; then dir="$PWD/${dir#./}"; fi
  mkdir -p -- "$dir" && printf '%s\n' "$dir"
}

# slurmx_restart_count: print how many times Slurm restarted this job (SLURM_RESTART_COUNT; 0 on the first run).
slurmx_restart_count() {
  printf '%s\n' "$(_slurmx_int "${SLURM_RESTART_COUNT:-}" 0)"
}

# _slurmx_report_to_slurmxd FIELDS: append ",FIELDS" to this job's Slurm comment, where slurmxd reads what a
# profiling sample measured (its folder is the user's, mode 0700). Never fails the job: a line on stderr instead.
_slurmx_report_to_slurmxd() {
  local comment self
  [[ -n ${1:-} ]] || return 0
  self=$(_slurmx_slurm_self)
  if comment=$(squeue -h -j "$self" -o %k 2>/dev/null) \
      && scontrol update JobId="$self" Comment="$comment,$1" >/dev/null 2>&1; then
    return 0
  fi
  printf 'slurmx: not reported to slurmxd (scontrol update failed): %s\n' "$1" >&2
  return 0
}
