-- node_runid.lua: the run id of the node that serves a campaign's slot.
-- A script so that a Cluster client routes it by its key (a keyless INFO
-- would reach any node); on one server it is that server's run id.
-- KEYS[1] {c:<id>}:meta, or a bucket's {<tag>}:meta (only routes; not read)
-- Returns the 40-hex run_id of INFO server.
return string.match(redis.call('INFO', 'server'), 'run_id:(%x+)')
