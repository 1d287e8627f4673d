/* engine_parts.h: what the engine lends the file that implements the rest
 * of its API (campaign.c: pre-heat, read-back, order look-up): its wire,
 * its server facts and its coalescer, by function. The engine's struct
 * stays in engine.c. Not thread-safe: the engine's loop only. */
#ifndef SK_ENGINE_PARTS_H
#define SK_ENGINE_PARTS_H

#include "coalesce.h"
#include "engine.h"
#include "engine_server.h"
#include "engine_wire.h"

sk__wire *sk__engine_wire(sk_engine *e);
const sk__server *sk__engine_server(const sk_engine *e);
sk__coalescer *sk__engine_coalescer(sk_engine *e);

#endif
