-- wrk script for bench_serve.py: each request is a tools/call of add(a, b) with random
-- arguments; its JSON-RPC id carries the arguments ("a_b"), so each answer is checked on its
-- own whatever the connection: a status other than 200, or a structuredContent result other
-- than a + b, is a wrong answer.
-- usage: wrk ... -s bench_serve.lua URL -- [TOKEN]
local call = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "mcp_call.lua")
local threads = {}

function setup(thread)
  table.insert(threads, thread)
  thread:set("id", #threads)
end

function init(args)
  wrong = 0
  answered = 0
  token = args[1]
  math.randomseed(os.time() * 1000 + id)
  headers = call.headers(token)
end

function request()
  return call.add_call(headers)
end

function response(status, _headers, body)
  answered = answered + 1
  if not call.right(status, body) then
    wrong = wrong + 1
  end
end

function done(summary, latency, _requests)
  local bad, seen = 0, 0
  for _, thread in ipairs(threads) do
    bad = bad + thread:get("wrong")
    seen = seen + thread:get("answered")
  end
  local errors = summary.errors.connect + summary.errors.read + summary.errors.write
    + summary.errors.status + summary.errors.timeout
  io.write(string.format("RESULT requests=%d answered=%d wrong=%d errors=%d p50_us=%d " ..
    "p99_us=%d duration_us=%d\n", summary.requests, seen, bad, errors,
    latency:percentile(50), latency:percentile(99), summary.duration))
end
