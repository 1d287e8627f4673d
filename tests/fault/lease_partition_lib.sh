# shellcheck shell=bash
# lease_partition_lib.sh: the cut of the lease-partition tests
# (lease_partition.sh: every lock object; lease_partition_cli.sh: the dlock
# CLI). A live holder is cut off from a live server in one of two ways:
#  - proxy: the holder reaches the server through dl_freeze_proxy
#    (tests/support/dl_freeze_proxy.c), which the cut freezes with
#    kill -STOP: sockets stay open, no byte moves, new connections are
#    accepted by the kernel and never answered;
#  - netns: where the topology hands out addresses (Sentinel names the
#    master, a Cluster names its nodes) the holder runs in a network
#    namespace that reaches the host over a veth pair (dl_netns_two_links,
#    sale_lib.sh; link A only), the servers bind and announce the host's
#    veth address, and the cut is `ip link set <host veth> down` (packets
#    dropped, sockets open). Skipped (dl_skip) where namespaces are refused.
# Times: CLOCK_MONOTONIC in ms, read by `lease_probe now` here and by the
# probe itself in the processes (one clock for the whole machine,
# namespaces included). Source after setting SCENARIO.
. "$(dirname "${BASH_SOURCE[0]}")/sale_lib.sh"
probe="$build/tests/lib/partition/lease_probe"
proxy_bin="$build/tests/dl_freeze_proxy"
for b in "$probe" "$proxy_bin"; do
    [ -x "$b" ] || { echo "FAIL: $b not built" >&2; exit 1; }
done
# How long past lease + 1 s after the cut the scripts keep watching before
# they judge (a failing run says "still believes" then); LP_OBSERVE_MS=60000
# measures how late an old library really is.
LP_OBSERVE_MS=${LP_OBSERVE_MS:-2000}
LP_CUT_MODE=proxy
LP_PFX=()

lp_now() { "$probe" now; }

# lp_start_proxy HOST PORT: a dl_freeze_proxy to HOST:PORT; sets PROXY_PID,
# PROXY_PORT.
lp_start_proxy() {
    "$proxy_bin" "$1" "$2" >"$work/proxy.port" 2>"$work/proxy.err" &
    PROXY_PID=$!
    dl_track "$PROXY_PID"
    for _ in $(seq 1 100); do
        PROXY_PORT=$(head -n 1 "$work/proxy.port")
        [ -n "$PROXY_PORT" ] && return 0
        sleep 0.02
    done
    say "dl_freeze_proxy did not start: $(cat "$work/proxy.err")"
    exit 1
}

# lp_netns: the holder's namespace (link A of dl_netns_two_links); the
# holder's commands run under LP_PFX; the servers use $host_ip.
lp_netns() {
    dl_netns_two_links lp 217 218
    LP_CUT_MODE=netns
    LP_PFX=(ip netns exec "$ns")
}

# lp_cut: cuts the holder off; prints the time just before the cut (the
# holder's last renewal was sent before it).
lp_cut() {
    local t
    t=$(lp_now)
    if [ "$LP_CUT_MODE" = proxy ]; then
        kill -STOP "$PROXY_PID"
    else
        ip link set "$hv" down
    fi
    echo "$t"
}

# lp_at FILE OBJECT EVENT: the time of OBJECT's first EVENT line, or "".
lp_at() { awk -v o="$2" -v e="$3" '$1 == o && $2 == e { print $3; exit }' "$1" 2>/dev/null; }

# lp_wait_lines FILE EVENT N BUDGET_S: until FILE has N EVENT lines.
lp_wait_lines() {
    local end=$(( $(date +%s) + $4 ))
    until [ "$(awk -v e="$2" '$2 == e' "$1" 2>/dev/null | wc -l)" -ge "$3" ]; do
        [ "$(date +%s)" -lt "$end" ] || return 1
        sleep 0.05
    done
}

# lp_summary SCENARIO JSON: one line for scripts/fault.sh's report.
lp_summary() {
    [ -z "${FAULT_RESULTS:-}" ] || echo "$2" >>"$FAULT_RESULTS"
}
