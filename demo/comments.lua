-- The comments form of Figure 1 of "Apache dynamic content technologies"
-- (a form POST stored in a database, and a page listing all comments), as
-- a Lua handler run inside Stoa: the script is loaded once per worker and
-- its SQLite connection kept across requests (the mod_perl way). The
-- FastCGI version of the same page is /comments/ (stoa demo-app comments).
-- The database is demo/lua-comments.db, made on the first request.

local function open(path)
  local db = stoa.sqlite(path)
  db:exec([[CREATE TABLE IF NOT EXISTS comments (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    comment TEXT NOT NULL,
    posted TEXT NOT NULL DEFAULT (datetime('now'))
  )]])
  return db
end

-- Started as root, Stoa runs as `nobody`, who may not write demo/: then
-- the database goes to the temporary directory (as the FastCGI app's does).
local ok, db = pcall(open, "lua-comments.db")
if not ok then
  local tmp = (os.getenv("TMPDIR") or "/tmp") .. "/stoa-demo-lua-comments.db"
  io.stderr:write("comments.lua: ", tostring(db), "; using ", tmp, "\n")
  db = open(tmp)
end

local MAX_NAME, MAX_COMMENT = 80, 2000
local visits = stoa.shared.demo   -- one count for every worker ([lua.shared])

local function escape(s)
  return (s:gsub("[&<>\"']", {
    ["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;", ["'"] = "&#39;",
  }))
end

local function page(status, title, body)
  return status, { ["content-type"] = "text/html; charset=utf-8" }, table.concat({
    '<!DOCTYPE html>\n<html lang="en">\n<head><meta charset="utf-8"><title>', title,
    '</title><link rel="stylesheet" href="/style.css"></head>\n<body>\n', body, '\n</body>\n</html>\n',
  })
end

local function list(req)
  local rows = db:query("SELECT name, comment, posted FROM comments ORDER BY id DESC")
  local out = {
    '<h1>Comments (Lua)</h1>\n',
    '<form method="post" action="', escape(req.path), '">\n',
    '<p><label>Name <input name="name" maxlength="', MAX_NAME, '" required></label></p>\n',
    '<p><label>Comment <textarea name="comment" maxlength="', MAX_COMMENT, '" required></textarea></label></p>\n',
    '<p><button>Post</button></p>\n</form>\n',
  }
  if #rows == 0 then
    out[#out + 1] = '<p>No comments yet.</p>\n'
  else
    out[#out + 1] = '<h2>' .. #rows .. (#rows == 1 and ' comment' or ' comments') .. '</h2>\n<ul>\n'
    for _, r in ipairs(rows) do
      out[#out + 1] = '<li><strong>' .. escape(r.name) .. '</strong> (' .. escape(r.posted) ..
        ')<br>' .. escape(r.comment) .. '</li>\n'
    end
    out[#out + 1] = '</ul>\n'
  end
  local n = visits and visits:incr("comments-page") or 0
  out[#out + 1] = '<p><small>This page was shown ' .. n .. ' times since Stoa started.</small></p>'
  return page(200, "Comments (Lua)", table.concat(out))
end

return function(req)
  if req.method == "GET" or req.method == "HEAD" then
    return list(req)
  elseif req.method ~= "POST" then
    return 405, { allow = "GET, HEAD, POST" }, ""
  end
  local ctype = (req.headers["content-type"] or ""):lower()
  if ctype:sub(1, 33) ~= "application/x-www-form-urlencoded" then
    return page(415, "Not a form", "<p>Post the form on this page.</p>")
  end
  local name = (req.args.name or ""):match("^%s*(.-)%s*$")
  local comment = (req.args.comment or ""):match("^%s*(.-)%s*$")
  if name == "" or comment == "" then
    return page(400, "Missing", "<p>Both a name and a comment, please.</p>")
  end
  if utf8.len(name) == nil or utf8.len(comment) == nil then
    return page(400, "Not UTF-8", "<p>The form must be sent as UTF-8.</p>")
  end
  if utf8.len(name) > MAX_NAME or utf8.len(comment) > MAX_COMMENT then
    return page(413, "Too long", "<p>Names are at most " .. MAX_NAME ..
      " characters, comments " .. MAX_COMMENT .. ".</p>")
  end
  db:exec("INSERT INTO comments (name, comment) VALUES (?, ?)", name, comment)
  -- 303 back to the page: reloading it does not post again.
  return 303, { location = req.path }, ""
end
