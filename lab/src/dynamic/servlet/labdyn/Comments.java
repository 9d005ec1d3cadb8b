// The dynamic-routes application as a servlet (the seeds' Figure 2) on
// Tomcat 10, behind Stoa's proxy and Apache's mod_proxy. JDBC: SQLite
// (xerial) or PostgreSQL (pgjdbc, over TCP: it has no Unix sockets).
// A persistent connection per request thread (the figure keeps one for the
// whole servlet, which its authors found "strangled" the servlet; a
// connection per thread is what the other routes get: one per process).
//   GET ?t=b1|b2|b3[&db=pg]: SELECT * FROM that table (else `comments`)
//   POST name, email, comments: INSERT INTO comments; "All done OK"
// System properties: lab.sqlite (file), lab.pgurl (jdbc:postgresql://...).
package labdyn;

import jakarta.servlet.ServletException;
import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;

public class Comments extends HttpServlet {
    private static final String HEAD = "<html><head><title>comments</title></head><body>\n<table>\n"
            + "<tr><th>name</th><th>email</th><th>comments</th></tr>\n";
    private static final String FOOT = "</table>\n</body></html>\n";

    private final ThreadLocal<Connection> sqlite = new ThreadLocal<>();
    private final ThreadLocal<Connection> pg = new ThreadLocal<>();

    private Connection db(boolean postgres) throws SQLException {
        ThreadLocal<Connection> slot = postgres ? pg : sqlite;
        Connection c = slot.get();
        if (c == null) {
            if (postgres) {
                c = DriverManager.getConnection(System.getProperty("lab.pgurl"), "lab", "");
            } else {
                c = DriverManager.getConnection("jdbc:sqlite:" + System.getProperty("lab.sqlite"));
                try (Statement s = c.createStatement()) {
                    s.execute("PRAGMA busy_timeout = 5000");
                }
            }
            slot.set(c);
        }
        return c;
    }

    private static void esc(String s, StringBuilder out) {
        for (int i = 0; i < s.length(); i++) {
            char ch = s.charAt(i);
            switch (ch) {
                case '&': out.append("&amp;"); break;
                case '<': out.append("&lt;"); break;
                case '>': out.append("&gt;"); break;
                case '"': out.append("&quot;"); break;
                default: out.append(ch);
            }
        }
    }

    private static void send(HttpServletResponse res, String body) throws IOException {
        byte[] b = body.getBytes(StandardCharsets.UTF_8);
        res.setContentType("text/html");
        res.setContentLength(b.length);
        try (OutputStream o = res.getOutputStream()) {
            o.write(b);
        }
    }

    @Override
    protected void doGet(HttpServletRequest req, HttpServletResponse res)
            throws ServletException, IOException {
        String t = req.getParameter("t");
        String table = ("b1".equals(t) || "b2".equals(t) || "b3".equals(t)) ? t : "comments";
        StringBuilder out = new StringBuilder(256 * 1024);
        out.append(HEAD);
        boolean postgres = "pg".equals(req.getParameter("db"));
        try (Statement s = db(postgres).createStatement();
             ResultSet r = s.executeQuery("SELECT * FROM " + table)) {
            while (r.next()) {
                out.append("<tr><td>");
                esc(r.getString(1), out);
                out.append("</td><td>");
                esc(r.getString(2), out);
                out.append("</td><td>");
                esc(r.getString(3), out);
                out.append("</td></tr>\n");
            }
        } catch (SQLException e) {
            (postgres ? pg : sqlite).remove();
            throw new ServletException(e);
        }
        out.append(FOOT);
        send(res, out.toString());
    }

    @Override
    protected void doPost(HttpServletRequest req, HttpServletResponse res)
            throws ServletException, IOException {
        req.setCharacterEncoding("UTF-8");
        boolean postgres = "pg".equals(req.getParameter("db"));
        try (PreparedStatement p = db(postgres).prepareStatement("INSERT INTO comments VALUES (?, ?, ?)")) {
            p.setString(1, nz(req.getParameter("name")));
            p.setString(2, nz(req.getParameter("email")));
            p.setString(3, nz(req.getParameter("comments")));
            p.executeUpdate();
        } catch (SQLException e) {
            (postgres ? pg : sqlite).remove();
            throw new ServletException(e);
        }
        send(res, "All done OK\n");
    }

    private static String nz(String s) {
        return s == null ? "" : s;
    }
}
