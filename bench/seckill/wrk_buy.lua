-- bench/seckill/wrk_buy.lua: wrk's request generator for purchases by new
-- buyers: every request, of every wrk thread, is POST
-- /v1/campaigns/<CAMPAIGN>/purchase of one unit as a user no earlier
-- request used (BUY_PREFIX-<thread>-<n>), so the per-user limit never
-- refuses one. Env: CAMPAIGN (bench), BUY_PREFIX (r; make it unique per run).
local threads = 0
function setup(thread)
  threads = threads + 1
  thread:set("tid", threads)
end

local prefix = os.getenv("BUY_PREFIX") or "r"
local path = "/v1/campaigns/" .. (os.getenv("CAMPAIGN") or "bench") .. "/purchase"
local n = 0
request = function()
  n = n + 1
  return wrk.format("POST", path, {["X-User-Id"] = prefix .. "-" .. (tid or 0) .. "-" .. n}, '{"quantity":1}')
end
