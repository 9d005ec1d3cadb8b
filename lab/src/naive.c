/* A deliberately naive web server, "your typical C server" of
 * apache-vs-typical-c-server.txt (YTTCS): one thread, blocking calls,
 * one connection at a time. accept, read the request, open the file under
 * the root, read it, write a head and the body, close. No keep-alive, no
 * cache, no concurrency: every client waits its turn in the backlog.
 *
 *   cc -O2 -o naive naive.c && ./naive PORT ROOT
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

static void reply(int c, const char *status, const char *body, size_t len) {
    char head[256];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.0 %s\r\nServer: naive\r\nContent-Type: text/html\r\n"
                     "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                     status, len);
    if (write(c, head, (size_t)n) < 0) return;
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(c, body + off, len - off);
        if (w <= 0) return;
        off += (size_t)w;
    }
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: naive PORT ROOT\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    int s = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((unsigned short)atoi(argv[1]));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(s, (struct sockaddr *)&a, sizeof a) || listen(s, 128)) {
        perror("bind/listen");
        return 1;
    }
    printf("listening on 127.0.0.1:%s\n", argv[1]);
    fflush(stdout);
    for (;;) {
        int c = accept(s, NULL, NULL);
        if (c < 0) continue;
        char req[4096];
        ssize_t n = read(c, req, sizeof req - 1);
        if (n <= 0) { close(c); continue; }
        req[n] = 0;
        char path[1024] = "";
        if (sscanf(req, "GET %1000s", path) != 1 || strstr(path, "..")) {
            reply(c, "400 Bad Request", "bad request\n", 12);
            close(c);
            continue;
        }
        char *q = strchr(path, '?');
        if (q) *q = 0;
        char file[2048];
        snprintf(file, sizeof file, "%s%s%s", argv[2], path,
                 path[strlen(path) - 1] == '/' ? "index.html" : "");
        int f = open(file, O_RDONLY);
        struct stat st;
        if (f < 0 || fstat(f, &st) || !S_ISREG(st.st_mode)) {
            if (f >= 0) close(f);
            reply(c, "404 Not Found", "not found\n", 10);
            close(c);
            continue;
        }
        char *body = malloc((size_t)st.st_size + 1);
        ssize_t got = body ? read(f, body, (size_t)st.st_size) : -1;
        close(f);
        if (got == st.st_size)
            reply(c, "200 OK", body, (size_t)got);
        else
            reply(c, "500 Internal Server Error", "error\n", 6);
        free(body);
        close(c);
    }
}
