#!/bin/bash
# Fault 6: a fourth seckilld instance runs in its own network namespace: it
# reaches Redis over one veth pair and serves buyers over another. Mid-sale
# the Redis link is cut for 3 s (longer than the service's 2 s Redis command
# timeout, so purchases in flight there end "outcome unknown" and are
# answered 503) while buyers can still reach it; then it is restored.
# Buyers retry elsewhere with their Idempotency-Key. Pass: 0 oversold,
# 0 duplicates, 0 lost, reconciliation clean. Needs root and `ip netns`;
# where the environment forbids namespaces the scenario says so and is
# skipped (exit 77), never faked.
SCENARIO=partition
. "$(dirname "$0")/sale_lib.sh"
ns="dlock$$"
hv="dlh$$"   # Redis link (cut)
nv="dln$$"
hc="dlc$$"   # client link (kept)
nc="dlk$$"
net=$((RANDOM % 250))
host_ip="10.213.$net.1"
ns_ip="10.213.$net.2"
host_cip="10.214.$net.1"
ns_cip="10.214.$net.2"
trap 'dl_cleanup; ip netns del "$ns" 2>/dev/null || true; ip link del "$hv" 2>/dev/null || true; ip link del "$hc" 2>/dev/null || true; [ -n "${DLOCK_TEST_KEEP:-}" ] || rm -rf "$work"' EXIT
# Namespace and two veth pairs; any refusal (no root, no CAP_NET_ADMIN,
# no veth support) means this environment cannot run the scenario.
make_net() {
    ip netns add "$ns" &&
    ip link add "$hv" type veth peer name "$nv" &&
    ip link set "$nv" netns "$ns" &&
    ip addr add "$host_ip/30" dev "$hv" &&
    ip link set "$hv" up &&
    ip netns exec "$ns" ip addr add "$ns_ip/30" dev "$nv" &&
    ip netns exec "$ns" ip link set "$nv" up &&
    ip link add "$hc" type veth peer name "$nc" &&
    ip link set "$nc" netns "$ns" &&
    ip addr add "$host_cip/30" dev "$hc" &&
    ip link set "$hc" up &&
    ip netns exec "$ns" ip addr add "$ns_cip/30" dev "$nc" &&
    ip netns exec "$ns" ip link set "$nc" up &&
    ip netns exec "$ns" ip link set lo up
}
if ! make_net 2>"$work/netns.err"; then
    echo "SKIP: this environment cannot create network namespaces with veth pairs: $(head -n 1 "$work/netns.err")"
    exit 77
fi

dl_start_redis "$work" --bind 127.0.0.1 "$host_ip"
REDIS_URL="redis://127.0.0.1:$REDIS_PORT"
DATABASE_URL="sqlite://$work/orders.db"
start_services
# a fourth instance, inside the namespace, becomes the first target
port=$(dl_free_port)
ip netns exec "$ns" "$bin/seckilld/seckilld" --port "$port" --bind "$ns_cip" --admin-token "$TOKEN" \
    --redis-url "redis://$host_ip:$REDIS_PORT" >"$work/seckilld-ns.log" 2>&1 &
dl_track $!
SECKILLD_URLS=("http://$ns_cip:$port" "${SECKILLD_URLS[@]:1}")
dl_wait_http "http://$ns_cip:$port/healthz" 100 || { say "namespaced seckilld not healthy"; exit 1; }
start_sale
sleep 1.0
say "cutting the namespaced instance off from Redis (link down for 3 s)"
ip link set "$hv" down
sleep 3
ip link set "$hv" up
ms=$(wait_healthy_ms "http://$ns_cip:$port" 30) || { say "namespaced instance did not recover"; exit 1; }
RECOVER_MS=$ms
say "link restored; namespaced instance healthy after ${ms} ms"
finish_sale
