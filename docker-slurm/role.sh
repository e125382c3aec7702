#!/bin/bash
# Entry point of every test-cluster container: `slurmx-role db|ctld|nodes|login`.
# Configuration comes from the cluster folder mounted at $SLURMX_CLUSTER_DIR (written by docker-slurm/cluster),
# so one image serves every role. Also used by `cluster --native`, where the same roles run as host processes.
#
# A container has the machine to itself; a native role shares the host with other clusters and services, so
# `cluster --native` sets SLURMX_NATIVE=1 and:
#   - the generated config is used in place (SLURM_CONF), nothing is copied to /etc/slurm or /etc/ssh;
#   - state, logs and pids go where the generated config says (SLURMX_STATE_DIR, SLURMX_LOG_DIR, SLURMX_RUN_DIR);
#   - MariaDB gets its own data dir, socket and TCP port on 127.0.0.1 (SLURMX_DB_PORT);
#   - SLURMX_SKIP_MUNGE=1 when a munged already answers on the host's socket: munge is started once;
#   - every daemon started here is appended to SLURMX_PID_FILE, so `cluster down --native` stops exactly those.
set -euo pipefail
role=${1:?usage: slurmx-role db|ctld|nodes|login}
dir=${SLURMX_CLUSTER_DIR:?SLURMX_CLUSTER_DIR is not set}
native=${SLURMX_NATIVE:-}
run=${SLURMX_RUN_DIR:-/run/slurmx}
state=${SLURMX_STATE_DIR:-/var/spool/slurmx}
logs=${SLURMX_LOG_DIR:-/var/log/slurm}
mkdir -p "$run" "$logs" "$state/slurmctld" "$state/slurmd"
log() { echo "[slurmx-role $role] $*"; }

# record_pid ROLE NAME PID: with the process's start time, so that a later process given the same PID is
# never taken for ours.
record_pid() {
  [ -n "${SLURMX_PID_FILE:-}" ] || return 0
  local stat fields
  stat=$(cat "/proc/$3/stat" 2>/dev/null) || return 0
  read -ra fields <<<"${stat##*\) }"
  echo "$1 $2 $3 ${fields[19]}" >>"$SLURMX_PID_FILE"
}

if [ -n "$native" ]; then
  # The cluster folder's config as it is (slurmdbd.conf is written 0600 there): /etc/slurm is the host's.
  export SLURM_CONF=$dir/etc/slurm.conf
else
  # The container's own copy of the config: slurmdbd insists on 0600 and an owner it runs as.
  mkdir -p /etc/slurm
  cp "$dir"/etc/*.conf "$dir"/etc/*.lua /etc/slurm/
  chmod 600 /etc/slurm/slurmdbd.conf
  export SLURM_CONF=/etc/slurm/slurm.conf
  # slurmxd's own account (not root, not SlurmUser): a Slurm operator, in the lease plugin's daemon uids. It must
  # exist wherever slurmctld resolves names and on the login node the daemon's commands run on.
  id -u slurmxd >/dev/null 2>&1 || useradd --system --no-create-home --uid 2100 --shell /usr/sbin/nologin slurmxd
fi

start_munge() {
  local socket=${SLURMX_MUNGE_SOCKET:-/run/munge/munge.socket.2}
  if [ "${SLURMX_SKIP_MUNGE:-0}" = 1 ]; then
    log "munged already answers on $socket; sharing it"
    return 0
  fi
  mkdir -p /run/munge && chown munge:munge /run/munge
  if [ -n "${SLURMX_MUNGE_KEY:-}" ]; then
    install -o munge -g munge -m 400 "$SLURMX_MUNGE_KEY" /etc/munge/munge.key
  fi
  if [ -z "$native" ]; then
    su -s /bin/sh munge -c "munged --force --socket=$socket"
    return 0
  fi
  # In the foreground, as a background job: its PID is then ours to record, and `down` stops that process.
  setpriv --reuid=munge --regid=munge --init-groups munged --foreground --force --socket="$socket" \
    >>"$logs/munged.log" 2>&1 &
  record_pid munge munged "$!"
  for _ in $(seq 40); do
    munge -n --socket="$socket" >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  log "munged does not answer on $socket; see $logs/munged.log"
  exit 1
}

# authorize USER: the generated key may log in as USER. Appended, so keys a host user already had stay.
authorize() {
  local user=$1 home key
  home=$(getent passwd "$user" | cut -d: -f6)
  key=$(cat "$dir/ssh/id_ed25519.pub")
  install -d -o "$user" -g "$user" -m 700 "$home/.ssh"
  touch "$home/.ssh/authorized_keys"
  grep -qxF "$key" "$home/.ssh/authorized_keys" || echo "$key" >>"$home/.ssh/authorized_keys"
  chown "$user:$user" "$home/.ssh/authorized_keys"
  chmod 600 "$home/.ssh/authorized_keys"
}

case "$role" in
  db)
    start_munge
    if [ -n "$native" ]; then
      # The host's MariaDB, if any, keeps /var/lib/mysql, /run/mysqld and port 3306: ours lives in the folder.
      datadir=$state/mysql sockdir=$run/mysqld
      net=(--port="${SLURMX_DB_PORT:?SLURMX_DB_PORT is not set}" --bind-address=127.0.0.1
           --pid-file="$sockdir/mariadbd.pid")
    else
      datadir=/var/lib/mysql sockdir=/run/mysqld
      net=(--skip-networking)
      # Clients look for the socket in /run/mysqld (MariaDB <= 11.8) or /run/mariadbd (newer): serve both.
      mkdir -p /run/mariadbd && chown mysql:mysql /run/mariadbd
      ln -sf /run/mysqld/mysqld.sock /run/mariadbd/mysqld.sock
    fi
    sock=$sockdir/mysqld.sock
    mkdir -p "$sockdir" && chown mysql:mysql "$sockdir"
    [ -d "$datadir/mysql" ] || mariadb-install-db --user=mysql --datadir="$datadir" >/dev/null
    mariadbd --user=mysql --datadir="$datadir" "${net[@]}" --socket="$sock" \
      --loose-innodb-snapshot-isolation=OFF --innodb-lock-wait-timeout=900 >"$logs/mariadb.log" 2>&1 &
    record_pid db mariadbd "$!"
    for _ in $(seq 60); do mariadb --socket="$sock" -e 'select 1' >/dev/null 2>&1 && break; sleep 1; done
    # Over the socket (docker) the client is slurm@localhost; over TCP (native) it may be slurm@127.0.0.1.
    mariadb --socket="$sock" -e "CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'slurmx';
                CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurmx';
                GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
                GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1'; FLUSH PRIVILEGES;"
    log "mariadb ready; starting slurmdbd"
    # slurmdbd 26.05 sometimes fails its very first query against a just-started MariaDB 11.8
    # ("Number of columns in result ... exceeds maximum"); a second start succeeds, so allow a few.
    for attempt in 1 2 3 4 5; do
      slurmdbd -D -s &
      dbd=$!
      record_pid db slurmdbd "$dbd"
      wait "$dbd" && exit 0
      log "slurmdbd exited (attempt $attempt); restarting"
      sleep 2
    done
    exit 1
    ;;
  ctld)
    start_munge
    log "starting slurmctld"
    exec slurmctld -D -s -i
    ;;
  nodes)
    start_munge
    pids=()
    for node in ${SLURMX_NODES:?SLURMX_NODES lists the node names}; do
      mkdir -p "$state/slurmd/$node"
      slurmd -D -s -N "$node" >"$logs/slurmd-$node.out" 2>&1 &
      pids+=($!)
      record_pid nodes "slurmd:$node" "${pids[-1]}"
      log "slurmd $node started (pid ${pids[-1]})"
    done
    wait -n "${pids[@]}"
    log "a slurmd exited; stopping"
    exit 1
    ;;
  login)
    start_munge
    mkdir -p /run/sshd
    for u in alice bob; do authorize "$u"; done
    if [ -n "$native" ]; then
      # The folder's host key as it is, and a pid file of our own: /etc/ssh and /run/sshd.pid are the host's.
      hostkey=$dir/ssh/ssh_host_ed25519_key
      extra=(-o PidFile="$run/sshd.pid")
    else
      [ -f /etc/ssh/ssh_host_ed25519_key ] || ssh-keygen -A >/dev/null
      cp "$dir"/ssh/ssh_host_ed25519_key* /etc/ssh/ 2>/dev/null || true
      chmod 600 /etc/ssh/ssh_host_ed25519_key
      hostkey=/etc/ssh/ssh_host_ed25519_key
      extra=()
    fi
    log "starting sshd on port ${SLURMX_SSH_PORT:?}"
    exec /usr/sbin/sshd -D -e -p "$SLURMX_SSH_PORT" -o ListenAddress=127.0.0.1 \
      -o HostKey="$hostkey" -o PasswordAuthentication=no "${extra[@]}"
    ;;
  *) echo "unknown role $role (db|ctld|nodes|login)" >&2; exit 2 ;;
esac
