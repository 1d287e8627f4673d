#!/bin/bash
# The sale of `make demo-failover` as a fault scenario: a master that
# refuses writes without its replica (min-replicas-to-write 1), one replica,
# three Sentinels; the master is killed with -9 mid-sale and never comes
# back. Sentinel promotes the replica, which has no replica of its own: the
# instances must keep deciding on it (202 while no replica acknowledges,
# each ending confirmed), the barrier opens the campaign there, and the sale
# sells its stock. Pass: the sale's checks, the liveness floor included.
SCENARIO=failover-no-return
. "$(dirname "$0")/sale_lib.sh"
start_sentinel_redis --min-replicas-to-write 1 --min-replicas-max-lag 10
start_services
start_sale
sleep 1.0
say "kill -9 master $REDIS_PORT (pid $MASTER_PID); it does not come back"
kill -9 "$MASTER_PID"
wait_promoted "$REPLICA_PORT"
ms=$(wait_healthy_ms "${SECKILLD_URLS[1]}" 30) || { say "service did not recover"; exit 1; }
RECOVER_MS=$ms
say "service healthy on the new master ${ms} ms later"
finish_sale
