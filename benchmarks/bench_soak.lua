-- wrk script for bench_soak.py: tools/call of add(a, b) with random arguments, every answer
-- checked (its JSON-RPC id carries the arguments, "a_b": a status other than 200, or a
-- structuredContent result other than a + b, is a wrong answer), at a set pace and for a set
-- window, measured with the monotonic clock (LuaJIT's FFI: Lua itself has only seconds).
--
-- usage: wrk -t1 ... -s bench_soak.lua URL -- TOKEN RATE WINDOW_S
--   RATE: calls/s of the (one) thread over its connections (0: as fast as the server answers);
--   call k is due k intervals after the start and is sent then, or at once when late (a
--   connection was busy), so the average rate holds as long as the server keeps up. WINDOW_S: after this many seconds no new call is sent; once every
--   call sent is answered the script prints DRAINED and stops its thread: bench_soak.py then
--   ends wrk (SIGINT), which prints the summary. So every call sent is answered and counted,
--   and no connection sits idle long enough for the server to close it (wrk would count that
--   as an error).
local ffi = require("ffi")
ffi.cdef [[
typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
int clock_gettime(int clock_id, bench_timespec *tp);
]]
local clock = ffi.new("bench_timespec")
local CLOCK_MONOTONIC = 1
local IDLE_MS = 1e9  -- a delay past any -d: the connection sends nothing more

local function now_ms()
  ffi.C.clock_gettime(CLOCK_MONOTONIC, clock)
  return tonumber(clock.tv_sec) * 1000 + tonumber(clock.tv_nsec) / 1e6
end

local call = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "mcp_call.lua")
local threads = {}

function setup(thread)
  table.insert(threads, thread)
  thread:set("id", #threads)
end

function init(args)
  -- wrk calls request() once in the first thread before any connection, to check it
  sent = id == 1 and -1 or 0
  answered, wrong, not_ok = 0, 0, 0
  scheduled = 0  -- calls delay() has put on a timer whose request() has not been built yet
  drained = false
  first_ms, last_ms = 0, 0
  local token = args[1]
  local rate = tonumber(args[2] or "0")
  interval_ms = rate > 0 and 1000 / rate or 0
  stop_ms = now_ms() + 1000 * tonumber(args[3] or "10")
  slot_ms = now_ms()
  math.randomseed(os.time() * 1000 + id)
  headers = call.headers(token)
end

function delay()
  local now = now_ms()
  if now >= stop_ms then
    -- a call due before the window's end may be sent after it: drained only once none is
    if sent == answered and scheduled == 0 and not drained then
      drained = true
      io.write("DRAINED\n")
      io.flush()
      wrk.thread:stop()
    end
    return IDLE_MS
  end
  scheduled = scheduled + 1
  if interval_ms == 0 then
    return 0
  end
  slot_ms = slot_ms + interval_ms  -- call k is due at start + k * interval: a late one is
  return math.max(0, slot_ms - now)  -- sent at once, so the average holds (open loop)
end

function request()
  if scheduled > 0 then
    scheduled = scheduled - 1
  end
  sent = sent + 1
  if sent == 1 then
    first_ms = now_ms()
  end
  return call.add_call(headers)
end

function response(status, _headers, body)
  answered = answered + 1
  last_ms = now_ms()
  if status ~= 200 then
    not_ok = not_ok + 1
  end
  if not call.right(status, body) then
    wrong = wrong + 1
    if wrong <= 3 then  -- the first few, for the report
      io.write(string.format("WRONG status=%d body=%q\n", status, body:sub(1, 400)))
      io.flush()
    end
  end
end

function done(summary, latency, _requests)
  local totals = { sent = 0, answered = 0, wrong = 0, not_ok = 0 }
  local first, last = math.huge, 0
  for _, thread in ipairs(threads) do
    for key, _ in pairs(totals) do
      totals[key] = totals[key] + thread:get(key)
    end
    if thread:get("sent") > 0 then
      first = math.min(first, thread:get("first_ms"))
      last = math.max(last, thread:get("last_ms"))
    end
  end
  local e = summary.errors
  local errors = e.connect + e.read + e.write + e.status + e.timeout
  io.write(string.format("ERRORS connect=%d read=%d write=%d status=%d timeout=%d\n",
    e.connect, e.read, e.write, e.status, e.timeout))
  io.write(string.format("RESULT sent=%d answered=%d wrong=%d not_ok=%d errors=%d " ..
    "p50_us=%d p99_us=%d p999_us=%d max_us=%d window_us=%d\n", totals.sent, totals.answered,
    totals.wrong, totals.not_ok, errors, latency:percentile(50), latency:percentile(99),
    latency:percentile(99.9), latency.max, math.max(0, last - first) * 1000))
end
