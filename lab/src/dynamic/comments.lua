-- The dynamic-routes application as Stoa's in-process route (docs/LUA.md):
-- the SQLite connection opened once per worker and kept; the PostgreSQL
-- connection (stoa.postgres) opened by the worker's first query and kept.
--   GET ?t=b1|b2|b3[&db=pg]: SELECT * FROM that table (else `comments`)
--   POST name, email, comments [?db=pg]: INSERT INTO comments; "All done OK"
-- The lab fills in the database's path and the PostgreSQL socket below.
local db = stoa.sqlite("@SQLITE@")
db:query("PRAGMA busy_timeout = 5000")
local pg = stoa.postgres("host=@PGHOST@ port=@PGPORT@ dbname=comments user=lab")
local TABLES = { b1 = true, b2 = true, b3 = true }
local HEAD = "<html><head><title>comments</title></head><body>\n<table>\n"
  .. "<tr><th>name</th><th>email</th><th>comments</th></tr>\n"
local FOOT = "</table>\n</body></html>\n"
local ESC = { ["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;" }
local function esc(s) return (string.gsub(s, '[&<>"]', ESC)) end
local HTML = { ["content-type"] = "text/html" }

return function(req)
  local a = req.args
  local on_pg = a.db == "pg"
  if req.method == "POST" then
    if on_pg then
      pg:exec("INSERT INTO comments VALUES ($1, $2, $3)", a.name or "", a.email or "", a.comments or "")
    else
      db:exec("INSERT INTO comments VALUES (?, ?, ?)", a.name or "", a.email or "", a.comments or "")
    end
    return 200, HTML, "All done OK\n"
  end
  local t = a.t
  local sql = "SELECT * FROM " .. (TABLES[t] and t or "comments")
  local rows = on_pg and pg:query(sql) or db:query(sql)
  local out = { HEAD }
  for i, r in ipairs(rows) do
    out[i + 1] = "<tr><td>" .. esc(r.name) .. "</td><td>" .. esc(r.email) .. "</td><td>"
      .. esc(r.comments) .. "</td></tr>\n"
  end
  out[#out + 1] = FOOT
  return 200, HTML, table.concat(out)
end
