-- The dynamic-routes application as Stoa's in-process route (docs/LUA.md):
-- the SQLite connection opened once per worker and kept.
--   GET ?t=b1|b2|b3: SELECT * FROM that table (else `comments`)
--   POST name, email, comments: INSERT INTO comments; "All done OK"
-- The lab fills in the database's path below.
local db = stoa.sqlite("@SQLITE@")
db:query("PRAGMA busy_timeout = 5000")
local TABLES = { b1 = true, b2 = true, b3 = true }
local HEAD = "<html><head><title>comments</title></head><body>\n<table>\n"
  .. "<tr><th>name</th><th>email</th><th>comments</th></tr>\n"
local FOOT = "</table>\n</body></html>\n"
local ESC = { ["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;" }
local function esc(s) return (string.gsub(s, '[&<>"]', ESC)) end
local HTML = { ["content-type"] = "text/html" }

return function(req)
  if req.method == "POST" then
    local a = req.args
    db:exec("INSERT INTO comments VALUES (?, ?, ?)", a.name or "", a.email or "", a.comments or "")
    return 200, HTML, "All done OK\n"
  end
  if req.args.db == "pg" then
    return 501, HTML, "PostgreSQL from Lua is not built yet\n"
  end
  local t = req.args.t
  local rows = db:query("SELECT * FROM " .. (TABLES[t] and t or "comments"))
  local out = { HEAD }
  for i, r in ipairs(rows) do
    out[i + 1] = "<tr><td>" .. esc(r.name) .. "</td><td>" .. esc(r.email) .. "</td><td>"
      .. esc(r.comments) .. "</td></tr>\n"
  end
  out[#out + 1] = FOOT
  return 200, HTML, table.concat(out)
end
