#!/usr/bin/env python3
"""The dynamic-routes data: tables whose "Select *" page has the paper's sizes.

gen.py OUTDIR writes OUTDIR/comments.db (SQLite: tables comments, b1, b2,
b3, each `name, email, comments`), OUTDIR/comments.sql (the same for psql),
and OUTDIR/expected-b1.html ... the exact page every route must answer for
`?t=b1` ... (the HTML table each version of the application writes).
b1: 73.5 KB (BENCH1), b2: 195 KB (BENCH2), b3: 50 KB (BENCH3 and BENCH4).
The rows are the same on every run (fixed words, no randomness).
"""
import os, sqlite3, sys

HEAD = ("<html><head><title>comments</title></head><body>\n<table>\n"
        "<tr><th>name</th><th>email</th><th>comments</th></tr>\n")
FOOT = "</table>\n</body></html>\n"
SIZES = {"b1": 75264, "b2": 199680, "b3": 51200}
WORDS = ("the server answered every request before the deadline and the page "
         "came back whole with all of its rows in order as the form had stored them").split()


def row_html(r):
    return "<tr><td>%s</td><td>%s</td><td>%s</td></tr>\n" % r


def rows_for(size):
    rows, total, i = [], len(HEAD) + len(FOOT), 0
    while True:
        i += 1
        n = 6 + (i * 7) % 13                      # 6..18 words
        text = " ".join(WORDS[(i + k) % len(WORDS)] for k in range(n))
        r = ("Reader %04d" % i, "reader%04d@example.org" % i, text)
        h = len(row_html(r))
        left = size - total
        if left - h < 80:                          # the last row takes what is left
            base = len(row_html((r[0], r[1], "")))
            fill = (text + " " + " ".join(WORDS) * 4)[:left - base].rstrip()
            fill += "." * (left - base - len(fill))
            r = (r[0], r[1], fill)
            assert len(row_html(r)) == left, (left, len(row_html(r)))
            rows.append(r)
            return rows
        rows.append(r)
        total += h


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    db = os.path.join(out, "comments.db")
    if os.path.exists(db):
        os.remove(db)
    c = sqlite3.connect(db)
    sql = ["DROP TABLE IF EXISTS comments, b1, b2, b3;",
           "CREATE TABLE comments (name TEXT, email TEXT, comments TEXT);"]
    c.execute("CREATE TABLE comments (name TEXT, email TEXT, comments TEXT)")
    for t, size in SIZES.items():
        rows = rows_for(size)
        c.execute("CREATE TABLE %s (name TEXT, email TEXT, comments TEXT)" % t)
        c.executemany("INSERT INTO %s VALUES (?, ?, ?)" % t, rows)
        sql.append("CREATE TABLE %s (name TEXT, email TEXT, comments TEXT);" % t)
        sql.append("COPY %s FROM stdin;" % t)
        sql.extend("\t".join(r) for r in rows)
        sql.append("\\.")
        page = HEAD + "".join(row_html(r) for r in rows) + FOOT
        assert len(page.encode()) == size
        with open(os.path.join(out, "expected-%s.html" % t), "w") as f:
            f.write(page)
        print("%s: %d rows, %d bytes" % (t, len(rows), size))
    c.commit()
    c.close()
    with open(os.path.join(out, "comments.sql"), "w") as f:
        f.write("\n".join(sql) + "\n")


if __name__ == "__main__":
    main()
