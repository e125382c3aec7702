#!/bin/bash
# Entry point of every test-cluster container: `slurmx-role db|ctld|nodes|login`.
# Configuration comes from the cluster folder mounted at $SLURMX_CLUSTER_DIR (written by docker-slurm/cluster),
# so one image serves every role. Also used by `cluster --native`, where the same roles run as host processes.
set -euo pipefail
role=${1:?usage: slurmx-role db|ctld|nodes|login}
dir=${SLURMX_CLUSTER_DIR:?SLURMX_CLUSTER_DIR is not set}
run=${SLURMX_RUN_DIR:-/run/slurmx}
mkdir -p "$run" /var/log/slurm /var/spool/slurmx/slurmctld /var/spool/slurmx/slurmd
log() { echo "[slurmx-role $role] $*"; }

# The container's own copy of the config: slurmdbd insists on 0600 and an owner it runs as.
mkdir -p /etc/slurm
cp "$dir"/etc/*.conf /etc/slurm/
chmod 600 /etc/slurm/slurmdbd.conf
export SLURM_CONF=/etc/slurm/slurm.conf

start_munge() {
  mkdir -p /run/munge && chown munge:munge /run/munge
  if [ -n "${SLURMX_MUNGE_KEY:-}" ]; then
    install -o munge -g munge -m 400 "$SLURMX_MUNGE_KEY" /etc/munge/munge.key
  fi
  su -s /bin/sh munge -c "munged --force --socket=${SLURMX_MUNGE_SOCKET:-/run/munge/munge.socket.2}"
}

case "$role" in
  db)
    start_munge
    # Clients look for the socket in /run/mysqld (MariaDB <= 11.8) or /run/mariadbd (newer): serve both.
    mkdir -p /run/mysqld /run/mariadbd && chown mysql:mysql /run/mysqld /run/mariadbd
    ln -sf /run/mysqld/mysqld.sock /run/mariadbd/mysqld.sock
    [ -d /var/lib/mysql/mysql ] || mariadb-install-db --user=mysql --datadir=/var/lib/mysql >/dev/null
    mariadbd --user=mysql --skip-networking --socket=/run/mysqld/mysqld.sock \
      --loose-innodb-snapshot-isolation=OFF --innodb-lock-wait-timeout=900 >/var/log/slurm/mariadb.log 2>&1 &
    for _ in $(seq 60); do mariadb --socket=/run/mysqld/mysqld.sock -e 'select 1' >/dev/null 2>&1 && break; sleep 1; done
    mariadb --socket=/run/mysqld/mysqld.sock -e "CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'slurmx';
                GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost'; FLUSH PRIVILEGES;"
    log "mariadb ready; starting slurmdbd"
    # slurmdbd 26.05 sometimes fails its very first query against a just-started MariaDB 11.8
    # ("Number of columns in result ... exceeds maximum"); a second start succeeds, so allow a few.
    for attempt in 1 2 3 4 5; do
      slurmdbd -D -s && exit 0
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
      mkdir -p "/var/spool/slurmx/slurmd/$node"
      slurmd -D -s -N "$node" >"/var/log/slurm/slurmd-$node.out" 2>&1 &
      pids+=($!)
      log "slurmd $node started (pid $!)"
    done
    wait -n "${pids[@]}"
    log "a slurmd exited; stopping"
    exit 1
    ;;
  login)
    start_munge
    mkdir -p /run/sshd
    [ -f /etc/ssh/ssh_host_ed25519_key ] || ssh-keygen -A >/dev/null
    for u in alice bob; do
      install -d -o "$u" -g "$u" -m 700 "/home/$u/.ssh"
      install -o "$u" -g "$u" -m 600 "$dir/ssh/id_ed25519.pub" "/home/$u/.ssh/authorized_keys"
    done
    cp "$dir"/ssh/ssh_host_ed25519_key* /etc/ssh/ 2>/dev/null || true
    chmod 600 /etc/ssh/ssh_host_ed25519_key
    log "starting sshd on port ${SLURMX_SSH_PORT:?}"
    exec /usr/sbin/sshd -D -e -p "$SLURMX_SSH_PORT" -o ListenAddress=127.0.0.1 \
      -o HostKey=/etc/ssh/ssh_host_ed25519_key -o PasswordAuthentication=no
    ;;
  *) echo "unknown role $role (db|ctld|nodes|login)" >&2; exit 2 ;;
esac
