// /health (readiness: the script waits for it) and /headers (the request
// as Tomcat saw it: what the proxy forwarded, Forwarded and X-Forwarded-*
// included, one "name: value" a line).
package stoapeer;

import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.util.Collections;

public class Info extends HttpServlet {
    static String instance() {
        return System.getProperty("stoapeer.instance", "tomcat");
    }

    static String html(String s) {
        if (s == null) {
            return "";
        }
        return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\"", "&quot;");
    }

    @Override
    protected void doGet(HttpServletRequest req, HttpServletResponse res) throws IOException {
        res.setContentType("text/plain; charset=UTF-8");
        res.setHeader("X-Instance", instance());
        if (req.getServletPath().equals("/health")) {
            res.getWriter().print("ok " + instance() + "\n");
            return;
        }
        StringBuilder b = new StringBuilder();
        b.append(req.getMethod()).append(' ').append(req.getRequestURI());
        if (req.getQueryString() != null) {
            b.append('?').append(req.getQueryString());
        }
        b.append(' ').append(req.getProtocol()).append('\n');
        b.append("remote-addr: ").append(req.getRemoteAddr()).append('\n');
        for (String n : Collections.list(req.getHeaderNames())) {
            for (String v : Collections.list(req.getHeaders(n))) {
                b.append(n).append(": ").append(v).append('\n');
            }
        }
        res.getWriter().print(b);
    }
}
