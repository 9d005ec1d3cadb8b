// The seeds' Figure 2 (apache-dynamic-content-technologies.txt §2.2, "Form
// processing with servlets") on Jakarta Servlet 6 and SQLite: POST stores a
// comment (name, email, comments) and answers "All done ok"; GET lists them.
// Unlike the figure, a PreparedStatement (the figure concatenates SQL) and
// one connection per request (SQLite connections are not thread-safe, and
// opening one is a file open).
package stoapeer;

import jakarta.servlet.ServletException;
import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.io.PrintWriter;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;

public class Comments extends HttpServlet {
    private String url;

    @Override
    public void init() throws ServletException {
        // The database lives in the instance's CATALINA_BASE unless told.
        String db = System.getProperty("stoapeer.db",
                System.getProperty("catalina.base") + "/comments.db");
        url = "jdbc:sqlite:" + db;
        try (Connection c = DriverManager.getConnection(url);
             Statement s = c.createStatement()) {
            // Two Tomcat instances may share one file: wait for the lock
            // rather than fail.
            s.execute("PRAGMA busy_timeout = 5000");
            s.execute("PRAGMA journal_mode = WAL");
            s.execute("CREATE TABLE IF NOT EXISTS comments ("
                    + "id INTEGER PRIMARY KEY, name TEXT, email TEXT, comments TEXT)");
        } catch (SQLException e) {
            throw new ServletException("opening " + url, e);
        }
    }

    private Connection open() throws SQLException {
        Connection c = DriverManager.getConnection(url);
        try (Statement s = c.createStatement()) {
            s.execute("PRAGMA busy_timeout = 5000");
        }
        return c;
    }

    @Override
    protected void doPost(HttpServletRequest req, HttpServletResponse res)
            throws ServletException, IOException {
        req.setCharacterEncoding("UTF-8");
        String name = req.getParameter("name");
        String email = req.getParameter("email");
        String comments = req.getParameter("comments");
        if (name == null || comments == null) {
            res.sendError(400, "name and comments are required");
            return;
        }
        try (Connection c = open();
             PreparedStatement p = c.prepareStatement(
                     "INSERT INTO comments (name, email, comments) VALUES (?, ?, ?)")) {
            p.setString(1, name);
            p.setString(2, email == null ? "" : email);
            p.setString(3, comments);
            p.executeUpdate();
        } catch (SQLException e) {
            throw new ServletException(e);
        }
        res.setContentType("text/html; charset=UTF-8");
        res.setHeader("X-Instance", Info.instance());
        PrintWriter out = res.getWriter();
        out.println("<HTML><BODY>All done ok</BODY></HTML>");
    }

    @Override
    protected void doGet(HttpServletRequest req, HttpServletResponse res)
            throws ServletException, IOException {
        res.setContentType("text/html; charset=UTF-8");
        res.setHeader("X-Instance", Info.instance());
        StringBuilder b = new StringBuilder("<HTML><BODY><ul>\n");
        try (Connection c = open();
             Statement s = c.createStatement();
             ResultSet r = s.executeQuery("SELECT name, email, comments FROM comments ORDER BY id")) {
            while (r.next()) {
                b.append("<li>").append(Info.html(r.getString(1)))
                 .append(" &lt;").append(Info.html(r.getString(2))).append("&gt;: ")
                 .append(Info.html(r.getString(3))).append("</li>\n");
            }
        } catch (SQLException e) {
            throw new ServletException(e);
        }
        b.append("</ul>\n<form method=\"post\"><input name=\"name\"> <input name=\"email\"> "
                + "<textarea name=\"comments\"></textarea> <button>Send</button></form>\n"
                + "</BODY></HTML>\n");
        res.getWriter().print(b);
    }
}
