-- What bench_serve.lua and bench_soak.lua share: the headers of an MCP call, a tools/call of
-- add(a, b) with random arguments whose JSON-RPC id carries them ("a_b"), and the check of its
-- answer on its own whatever the connection. Loaded with dofile by those scripts.
local M = {}

function M.headers(token)
  local headers = {
    ["Content-Type"] = "application/json",
    ["Accept"] = "application/json, text/event-stream",
    ["MCP-Protocol-Version"] = "2025-11-25",
  }
  if token ~= nil and token ~= "" then
    headers["Authorization"] = "Bearer " .. token
  end
  return headers
end

function M.add_call(headers)
  local a = math.random(0, 999999)
  local b = math.random(0, 999)
  local body = string.format(
    '{"jsonrpc":"2.0","id":"%d_%d","method":"tools/call",' ..
    '"params":{"name":"add","arguments":{"a":%d,"b":%d}}}', a, b, a, b)
  return wrk.format("POST", nil, headers, body)
end

-- Whether an answer is right: status 200 and a structuredContent result of a + b.
function M.right(status, body)
  local a, b = body:match('"id"%s*:%s*"(%d+)_(%d+)"')
  local sum = body:match('"structuredContent"%s*:%s*{%s*"result"%s*:%s*(%d+)%s*}')
  return status == 200 and a ~= nil and sum ~= nil and tonumber(sum) == tonumber(a) + tonumber(b)
end

return M
