#!/bin/bash
# Fault 6: a fourth seckilld instance runs in its own network namespace: it
# reaches Redis over one veth pair and serves buyers over another. Mid-sale
# the Redis link is cut for 3 s (longer than the service's 2 s Redis command
# timeout, so purchases in flight there end "outcome unknown" and are
# answered 503) while buyers can still reach it; then it is restored.
# Buyers retry elsewhere with their Idempotency-Key. Pass: 0 oversold,
# 0 duplicates, 0 lost, reconciliation clean. Needs root and `ip netns`;
# where the environment forbids namespaces the scenario says so and is
# skipped (dl_skip), never faked.
SCENARIO=partition
. "$(dirname "$0")/sale_lib.sh"
# The namespace: link A (cut mid-sale) and link B (kept); see sale_lib.sh.
dl_netns_two_links dp 213 214

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
