#!/bin/bash
# schedlab native init (PID 1) for kernels booted without Xen (S2 native side), installed as
# /sbin/schedlab-native-init in the native image and started with init=/sbin/schedlab-native-init.
# busybox init reaps orphans (e.g. the PostgreSQL server pg_ctl leaves behind). Everything the
# kernel needs is built in, so nothing is loaded. Messages go to the console (ttyS0).
INIT_NAME=schedlab-native-init
. /usr/lib/schedlab/init-common.sh

mount_base
mkdir -p /run/postgresql
chown postgres:postgres /run/postgresql 2>/dev/null
chmod 2775 /run/postgresql
hostname schedlab-native
log "mounted at $(cut -d' ' -f1 /proc/uptime)s"

user_network
start_sshd
log "SCHEDLAB-NATIVE-READY $(cut -d' ' -f1 /proc/uptime)s $(uname -r)"
become_init
