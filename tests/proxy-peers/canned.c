/*
 * canned: a canned-response HTTP/1.1 backend for bench/proxy.sh (issue 12),
 * fast enough that the proxy in front of it, not the backend, is measured;
 * also the floor server of bench/static.sh (issue 16, server name `floor`):
 * the least work an HTTP server can do per request on this machine.
 *
 * One epoll loop per process; per readiness one read() and, for every
 * request head completed in it, the same canned 200 response, all of them
 * in one write(). Connections are kept alive until the client closes, or
 * until a read holding a request with "Connection: close" is answered (one
 * response, with "Connection: close", then close(): the per-new-connection
 * floor for wrk -H "Connection: close", which otherwise would reuse the
 * connection and measure keep-alive instead).
 * GET requests without bodies only (what wrk sends): a request body would
 * be read as the start of the next head. Level-triggered, so a short write
 * keeps the rest and waits for EPOLLOUT.
 *
 * Build (the script that needs it does this):
 *   cc -O2 -Wall -o "$RUN/canned" tests/proxy-peers/canned.c
 * Run:
 *   canned PORT [BODY_BYTES] [PROCESSES]
 *     PORT        listens on 127.0.0.1:PORT (0: any free port)
 *     BODY_BYTES  body size, default 13 ("Hello, world\n", padded with 'x')
 *     PROCESSES   default 1; more fork after bind and share the socket
 *   First stdout line: "listening on 127.0.0.1:PORT". Stops on SIGTERM/SIGINT.
 * Example:
 *   cc -O2 -o /tmp/canned tests/proxy-peers/canned.c && /tmp/canned 18597 &
 *   wrk -t1 -c60 -d5s http://127.0.0.1:18597/
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_FDS 65536
#define READ_SIZE 65536
/* Responses queued per read at most; a client pipelining more gets the
 * rest after the next read (it keeps sending, so it keeps being read). */
#define MAX_BATCH 64

struct conn {
    unsigned char match; /* bytes of "\r\n\r\n" seen at the end of the last read */
    unsigned char close_after; /* close once the pending output is written */
    char *pending;       /* unwritten output after a short write */
    size_t pending_len, pending_off;
};

static struct conn *conns;
static char *response, *close_response;
static size_t response_len, close_response_len;

static void close_conn(int fd) {
    /* No EPOLL_CTL_DEL: close() of the only descriptor of the socket
     * removes it from the epoll set, and the floor should not pay a
     * syscall a server need not make. */
    free(conns[fd].pending);
    memset(&conns[fd], 0, sizeof conns[fd]);
    close(fd);
}

/* Counts request heads completed in buf: occurrences of CRLF CRLF,
 * carried across reads by the per-connection matcher state. */
static int count_heads(struct conn *c, const char *buf, ssize_t n) {
    static const char end[4] = {'\r', '\n', '\r', '\n'};
    int heads = 0;
    unsigned m = c->match;
    for (ssize_t i = 0; i < n; i++) {
        if (buf[i] == end[m]) {
            if (++m == 4) {
                heads++;
                m = 0;
            }
        } else {
            m = buf[i] == '\r' ? 1 : 0;
        }
    }
    c->match = (unsigned char)m;
    return heads;
}

static void serve(int lfd) {
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = lfd};
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
    static char in[READ_SIZE + 1]; /* + 1: a NUL for strcasestr */
    char *out = malloc(response_len * MAX_BATCH);
    struct epoll_event events[256];
    if (!out) {
        perror("malloc");
        exit(1);
    }
    for (;;) {
        int k = epoll_wait(ep, events, 256, -1);
        if (k < 0) {
            if (errno == EINTR) continue;
            perror("epoll_wait");
            exit(1);
        }
        for (int e = 0; e < k; e++) {
            int fd = events[e].data.fd;
            if (fd == lfd) {
                for (;;) {
                    int c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                    if (c < 0) break;
                    if (c >= MAX_FDS) {
                        close(c);
                        continue;
                    }
                    int one = 1;
                    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    struct epoll_event cev = {.events = EPOLLIN | EPOLLRDHUP, .data.fd = c};
                    epoll_ctl(ep, EPOLL_CTL_ADD, c, &cev);
                }
                continue;
            }
            struct conn *c = &conns[fd];
            if (c->pending) {
                /* Finish the short write before reading more. */
                ssize_t w = send(fd, c->pending + c->pending_off, c->pending_len - c->pending_off, MSG_NOSIGNAL);
                if (w < 0 && errno != EAGAIN) {
                    close_conn(fd);
                    continue;
                }
                if (w > 0) c->pending_off += (size_t)w;
                if (c->pending_off < c->pending_len) continue;
                if (c->close_after) {
                    close_conn(fd);
                    continue;
                }
                free(c->pending);
                c->pending = NULL;
                struct epoll_event cev = {.events = EPOLLIN | EPOLLRDHUP, .data.fd = fd};
                epoll_ctl(ep, EPOLL_CTL_MOD, fd, &cev);
                continue;
            }
            ssize_t n = read(fd, in, READ_SIZE);
            if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
                close_conn(fd);
                continue;
            }
            if (n < 0) continue;
            int heads = count_heads(c, in, n);
            if (heads > MAX_BATCH) heads = MAX_BATCH;
            if (heads == 0) continue;
            in[n] = '\0';
            /* A client asking to close sends one request per connection (wrk
             * -H "Connection: close", ab): answer it alone, then close. */
            int closing = strcasestr(in, "\r\nconnection: close\r\n") != NULL;
            const char *src = out;
            size_t len = 0;
            if (closing) {
                src = close_response;
                len = close_response_len;
            } else {
                for (int h = 0; h < heads; h++, len += response_len) memcpy(out + len, response, response_len);
            }
            ssize_t w = send(fd, src, len, MSG_NOSIGNAL);
            if (w < 0 && errno != EAGAIN) {
                close_conn(fd);
                continue;
            }
            if (w < 0) w = 0;
            if (closing && (size_t)w == len) {
                close_conn(fd);
                continue;
            }
            if ((size_t)w < len) {
                c->pending = malloc(len - (size_t)w);
                if (!c->pending) {
                    close_conn(fd);
                    continue;
                }
                memcpy(c->pending, src + w, len - (size_t)w);
                c->close_after = (unsigned char)closing;
                c->pending_len = len - (size_t)w;
                c->pending_off = 0;
                struct epoll_event cev = {.events = EPOLLOUT | EPOLLRDHUP, .data.fd = fd};
                epoll_ctl(ep, EPOLL_CTL_MOD, fd, &cev);
            }
        }
    }
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s PORT [BODY_BYTES] [PROCESSES]\n", argv[0]);
        return 2;
    }
    int port = atoi(argv[1]);
    long body_len = argc > 2 ? atol(argv[2]) : 13;
    int procs = argc > 3 ? atoi(argv[3]) : 1;
    if (body_len < 0 || body_len > (1 << 20) || procs < 1 || procs > 64) {
        fprintf(stderr, "canned: BODY_BYTES 0..1048576, PROCESSES 1..64\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    conns = calloc(MAX_FDS, sizeof *conns);
    char head[256];
    int hl = snprintf(head, sizeof head,
                      "HTTP/1.1 200 OK\r\nServer: canned\r\nContent-Type: text/plain\r\n"
                      "Content-Length: %ld\r\n\r\n",
                      body_len);
    response_len = (size_t)hl + (size_t)body_len;
    response = malloc(response_len);
    if (!conns || !response) {
        perror("malloc");
        return 1;
    }
    memcpy(response, head, (size_t)hl);
    memset(response + hl, 'x', (size_t)body_len);
    memcpy(response + hl, "Hello, world\n", body_len < 13 ? (size_t)body_len : 13);
    if (body_len >= 13) response[response_len - 1] = '\n';
    /* The same response with "Connection: close" (see the top comment). */
    static const char ka_hdr[] = "Content-Type: text/plain\r\n";
    static const char close_hdr[] = "Content-Type: text/plain\r\nConnection: close\r\n";
    char *at = memmem(response, (size_t)hl, ka_hdr, sizeof ka_hdr - 1);
    size_t pre = (size_t)(at - response), extra = sizeof close_hdr - sizeof ka_hdr;
    close_response_len = response_len + extra;
    close_response = malloc(close_response_len);
    if (!close_response) {
        perror("malloc");
        return 1;
    }
    memcpy(close_response, response, pre);
    memcpy(close_response + pre, close_hdr, sizeof close_hdr - 1);
    memcpy(close_response + pre + sizeof close_hdr - 1, at + sizeof ka_hdr - 1, response_len - pre - (sizeof ka_hdr - 1));

    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(lfd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(lfd, 4096) < 0) {
        perror("canned: bind/listen");
        return 1;
    }
    socklen_t sl = sizeof sa;
    getsockname(lfd, (struct sockaddr *)&sa, &sl);
    printf("listening on 127.0.0.1:%d\n", ntohs(sa.sin_port));
    fflush(stdout);
    for (int i = 1; i < procs; i++) {
        pid_t p = fork();
        if (p == 0) {
            /* The caller owns the first PID only: the others go with it. */
            prctl(PR_SET_PDEATHSIG, SIGTERM);
            if (getppid() == 1) return 0;
            serve(lfd);
        }
        if (p < 0) perror("fork");
    }
    serve(lfd);
    return 0;
}
