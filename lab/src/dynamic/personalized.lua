-- The personalized-content application of the FastCGI paper (§5) as Stoa's
-- in-process route: the paper's "API" design, in the server's own process.
-- The same work as `stoa demo-app personalized`, answering the same bytes:
-- check the user's password, read the user's attributes, read the content
-- file and replace each $NAME by the user's attribute NAME.
-- MODE (filled in by the lab):
--   per-request  a database connection opened for each request (the
--                paper's API: 27 requests/s)
--   kept         one connection per worker, kept (the paper's "API with
--                sustained database connections": 61 requests/s)
--   cached       a kept connection and a per-worker cache of users (§6's
--                multi-threaded API, which "can maintain caches and
--                database connections the same way a FastCGI application can"):
--                one cache for every user, unbounded (the FastCGI app's is
--                bounded per process: STOA_PERSONALIZED_CACHE)
local MODE = "@MODE@"
local DB, CONTENT = "@DB@", "@CONTENT@"
local kept = MODE ~= "per-request" and stoa.sqlite(DB) or nil
local cache = {}
local opened = 0
local HTML = { ["content-type"] = "text/html; charset=utf-8" }
local ESC = { ["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;", ["'"] = "&#39;" }

local function read_user(db, id)
  local r = db:query("SELECT password, attrs FROM users WHERE id = ?", id)[1]
  if not r then return nil end
  local attrs = {}
  for k, v in string.gmatch(r.attrs, "([^;=]+)=([^;]*)") do attrs[k] = (string.gsub(v, "[&<>\"']", ESC)) end
  return { password = r.password, attrs = attrs }
end

local function user(id)
  if MODE == "cached" then
    local u = cache[id]
    if u then return u end
    u = read_user(kept, id)
    cache[id] = u
    return u
  elseif kept then
    return read_user(kept, id)
  end
  -- Log in for this request. The connection closes when Lua collects it:
  -- a full collection every 32 requests keeps the open files bounded, and
  -- its cost (the closes) is the design's own.
  local u = read_user(stoa.sqlite(DB), id)
  opened = opened + 1
  if opened % 32 == 0 then collectgarbage() end
  return u
end

return function(req)
  local a = req.args
  local id, pw, file = a.user, a.pw, a.file
  if not (id and pw and file) then return 400, HTML, "give user, pw and file\n" end
  if string.find(file, "/", 1, true) or string.sub(file, 1, 1) == "." then
    return 400, HTML, "bad file name\n"
  end
  local u = user(id)
  if not u then return 401, HTML, "no such user\n" end
  if u.password ~= pw then return 401, HTML, "wrong password\n" end
  local f = io.open(CONTENT .. "/" .. file, "rb")
  if not f then return 404, HTML, "no such file\n" end
  local text = f:read("a")
  f:close()
  local page = string.gsub(text, "%$(%u+)", u.attrs)
  return 200, HTML, page
end
