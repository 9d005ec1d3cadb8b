// A session counter: HttpSession (JSESSIONID cookie) counts this client's
// requests, so a test sees whether its requests keep landing on the
// instance that holds its session (affinity = "cookie:JSESSIONID").
package stoapeer;

import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import jakarta.servlet.http.HttpSession;
import java.io.IOException;

public class Counter extends HttpServlet {
    @Override
    protected void doGet(HttpServletRequest req, HttpServletResponse res) throws IOException {
        HttpSession s = req.getSession(true);
        Integer n = (Integer) s.getAttribute("count");
        n = n == null ? 1 : n + 1;
        s.setAttribute("count", n);
        res.setContentType("text/plain; charset=UTF-8");
        res.setHeader("X-Instance", Info.instance());
        res.getWriter().print("count=" + n + " session=" + s.getId()
                + " instance=" + Info.instance() + "\n");
    }
}
