#!/usr/bin/env bash
# A real two-node Slurm cluster on this one machine, for the multi-node tests (issue 65):
# Debian's munge and slurmctld in this network namespace, and one slurmd "node" per network
# namespace of its own (its own hostname under `unshare --uts`, its own address on a bridge),
# as ../shared/SPEC.md §13 verified. Both nodes share this machine's cores: the testbed
# judges placement, launch and links, not node speed.
#
#   tools/slurm-testbed.sh up          install (idempotent), start, wait until both nodes are idle
#   tools/slurm-testbed.sh exec CMD…   run CMD where salloc/srun/sinfo reach the controller
#   tools/slurm-testbed.sh shape RATE  shape what each node sends (the network between the
#                                      nodes) to RATE with tbf (`100mbit`, `1gbit`); `shape off`
#                                      lifts it (no netem here: a rate, not a latency)
#   tools/slurm-testbed.sh status      the nodes as Slurm sees them
#   tools/slurm-testbed.sh down        cancel every job, stop every daemon and step, remove the
#                                      namespaces, the bridge and the spool: nothing is left
#
# Needs root (namespaces, a bridge, daemons). Environment:
#   STRATLAB_SLURM_TESTBED_DIR  where its configuration, state and logs live
#                               (default /run/stratlab-slurm-testbed)
set -euo pipefail

STATE=${STRATLAB_SLURM_TESTBED_DIR:-/run/stratlab-slurm-testbed}
CONF=$STATE/slurm.conf
NODES=(node1 node2)
BRIDGE=stlslurm0
SUBNET=10.77.0
CONTROLLER_ADDR=$SUBNET.1
# The node's namespace, and its address on the bridge.
namespace() { echo "stlslurm-$1"; }
node_addr() { echo "$SUBNET.$((10 + $1 + 1))"; }

log() { echo "slurm-testbed: $*" >&2; }
# Whether a live `$1` runs (a daemon stopped earlier may linger as a zombie where nothing
# reaps it: it holds nothing, but is no daemon).
running() { pgrep --runstates D,I,R,S -x "$1" > /dev/null; }

install_packages() {
    local missing=()
    for binary in slurmctld slurmd srun munged; do
        command -v "$binary" > /dev/null || missing+=("$binary")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        log "installing Debian's Slurm and munge (missing: ${missing[*]})"
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
            slurmctld slurmd slurm-client munge > "$STATE/log/apt.log" 2>&1 ||
            { apt-get update > /dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y \
                --no-install-recommends slurmctld slurmd slurm-client munge > "$STATE/log/apt.log" 2>&1; }
    fi
}

write_configuration() {
    local controller
    controller=$(hostname -s)
    {
        echo "ClusterName=stratlab-testbed"
        echo "SlurmctldHost=$controller($CONTROLLER_ADDR)"
        echo "SlurmUser=root"
        echo "SlurmdUser=root"
        echo "AuthType=auth/munge"
        echo "StateSaveLocation=$STATE/state"
        echo "SlurmdSpoolDir=$STATE/spool/slurmd-%n"
        echo "SlurmdPidFile=$STATE/slurmd-%n.pid"
        echo "SlurmctldPidFile=$STATE/slurmctld.pid"
        echo "SlurmctldLogFile=$STATE/log/slurmctld.log"
        echo "SlurmdLogFile=$STATE/log/slurmd-%n.log"
        echo "ProctrackType=proctrack/linuxproc"
        echo "TaskPlugin=task/none"
        echo "SlurmdParameters=config_overrides"
        echo "SelectType=select/cons_tres"
        echo "SelectTypeParameters=CR_Core"
        echo "MpiDefault=none"
        echo "ReturnToService=2"
        echo "KillWait=5"
        # Each node claims the machine's cores; they share them.
        for index in "${!NODES[@]}"; do
            echo "NodeName=${NODES[$index]} NodeAddr=$(node_addr "$index") CPUs=$(nproc) State=UNKNOWN"
        done
        echo "PartitionName=testbed Nodes=$(IFS=,; echo "${NODES[*]}") Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE"
    } > "$CONF"
    # This VM's hybrid cgroup layout: without it slurmd fails "No filesystem mounted on /sys/fs/cgroup".
    printf 'CgroupPlugin=cgroup/v1\nCgroupMountpoint=/sys/fs/cgroup\n' > "$STATE/cgroup.conf"
}

start_munge() {
    if running munged; then
        return
    fi
    mkdir -p /run/munge && chown munge:munge /run/munge
    [ -s /etc/munge/munge.key ] || { mungekey --create --force > /dev/null 2>&1 || create-munge-key -f; }
    runuser -u munge -- /usr/sbin/munged
    touch "$STATE/started-munged"
}

# The nodes' names resolve everywhere, as a cluster's do: ranks find rank 0's host by name,
# and Gloo picks its interface by the address its host's name resolves to. Marked lines,
# rewritten in place (/etc/hosts may be a bind mount).
HOSTS_MARK="# stratlab-slurm-testbed"
add_hosts() {
    for index in "${!NODES[@]}"; do
        echo "$(node_addr "$index") ${NODES[$index]} $HOSTS_MARK" >> /etc/hosts
    done
}
remove_hosts() {
    local kept
    kept=$(grep -v "$HOSTS_MARK\$" /etc/hosts || true)
    printf '%s\n' "$kept" > /etc/hosts
}

start_network() {
    ip link add "$BRIDGE" type bridge
    ip addr add "$CONTROLLER_ADDR/24" dev "$BRIDGE"
    ip link set "$BRIDGE" up
    for index in "${!NODES[@]}"; do
        local ns veth
        ns=$(namespace "${NODES[$index]}")
        veth="vstl${index}"
        ip netns add "$ns"
        ip link add "$veth" type veth peer name eth0 netns "$ns"
        ip link set "$veth" master "$BRIDGE" up
        ip -n "$ns" addr add "$(node_addr "$index")/24" dev eth0
        ip -n "$ns" link set lo up
        ip -n "$ns" link set eth0 up
        ip -n "$ns" route add default via "$CONTROLLER_ADDR"
    done
}

wait_until_idle() {
    for _ in $(seq 1 60); do
        local states
        states=$(SLURM_CONF=$CONF sinfo -h -N -o '%N %T' 2>/dev/null || true)
        if [ "$(grep -c ' idle' <<< "$states")" -eq "${#NODES[@]}" ]; then
            log "up: $(tr '\n' ' ' <<< "$states")"
            return
        fi
        sleep 1
    done
    log "the nodes did not come up idle; logs in $STATE/log"
    SLURM_CONF=$CONF sinfo -N >&2 || true
    return 1
}

up() {
    if [ -e "$STATE/up" ]; then
        log "already up ($STATE)"
        return
    fi
    # What a run that died half-way left behind goes first.
    if ip link show "$BRIDGE" > /dev/null 2>&1 || ip link show vstl0 > /dev/null 2>&1 || [ -d "$STATE" ]; then
        down
    fi
    mkdir -p "$STATE/state" "$STATE/log" "$STATE/spool"
    install_packages
    write_configuration
    start_munge
    start_network
    add_hosts
    SLURM_CONF=$CONF slurmctld -f "$CONF"
    for index in "${!NODES[@]}"; do
        local node=${NODES[$index]}
        # The host's name server is out of a node's reach: a lookup /etc/hosts cannot
        # answer (c10d asks the name of a peer's IPv4-mapped address) would wait out its
        # timeouts, about 10 s a rendezvous. `ip netns exec` mounts this file over
        # /etc/resolv.conf, and nothing listens there, so such a lookup fails at once.
        mkdir -p "/etc/netns/$(namespace "$node")"
        printf 'nameserver 127.0.0.1\noptions timeout:1 attempts:1\n' > "/etc/netns/$(namespace "$node")/resolv.conf"
        ip netns exec "$(namespace "$node")" unshare --uts \
            sh -c "hostname $node && SLURM_CONF=$CONF exec slurmd -N $node -f $CONF"
    done
    touch "$STATE/up"
    wait_until_idle
}

# Stops everything `up` started, whatever state it is in; never fails.
down() {
    set +e
    if [ -e "$CONF" ] && running slurmctld; then
        SLURM_CONF=$CONF scancel --full --quiet --partition testbed 2> /dev/null
    fi
    for index in "${!NODES[@]}"; do
        local ns
        ns=$(namespace "${NODES[$index]}")
        if ip netns list | grep -qw "$ns"; then
            # slurmd, its steps and whatever they started: every process in the namespace.
            local pids
            pids=$(ip netns pids "$ns")
            [ -n "$pids" ] && kill $pids 2> /dev/null
            sleep 1
            pids=$(ip netns pids "$ns")
            [ -n "$pids" ] && kill -9 $pids 2> /dev/null
            ip netns del "$ns"
        fi
        rm -rf "/etc/netns/$ns"
        # A process that outlived its kill (exiting, or in the kernel) keeps its namespace,
        # and with it the veth pair, after `ip netns del`: the host's end goes here.
        ip link del "vstl${index}" 2> /dev/null
    done
    if [ -s "$STATE/slurmctld.pid" ]; then
        kill "$(cat "$STATE/slurmctld.pid")" 2> /dev/null
        for _ in $(seq 1 20); do
            running slurmctld || break
            sleep 0.5
        done
    fi
    if [ -e "$STATE/started-munged" ]; then
        pkill -x munged
    fi
    ip link del "$BRIDGE" 2> /dev/null
    remove_hosts
    rm -rf "$STATE"
    set -e
    log "down"
}

case "${1:-}" in
    up) up ;;
    down) down ;;
    status) SLURM_CONF=$CONF sinfo -N ;;
    shape)
        [ -e "$STATE/up" ] || { log "not up: run tools/slurm-testbed.sh up first"; exit 2; }
        rate=${2:?usage: tools/slurm-testbed.sh shape RATE|off}
        for node in "${NODES[@]}"; do
            if [ "$rate" = off ]; then
                ip netns exec "$(namespace "$node")" tc qdisc del dev eth0 root 2> /dev/null || true
            else
                # A burst of 64 KiB and 50 ms of queue: large transfers pace at the rate.
                ip netns exec "$(namespace "$node")" tc qdisc replace dev eth0 root tbf rate "$rate" burst 64kb latency 50ms
            fi
        done
        log "between the nodes: ${rate}"
        ;;
    exec)
        shift
        [ -e "$STATE/up" ] || { log "not up: run tools/slurm-testbed.sh up first"; exit 2; }
        SLURM_CONF=$CONF exec "$@"
        ;;
    *)
        echo "usage: tools/slurm-testbed.sh up | exec CMD… | shape RATE|off | status | down" >&2
        exit 2
        ;;
esac
