/*
 * hello_fcgi: a single-threaded FastCGI application built against libfcgi
 * (Debian package libfcgi-dev), for Stoa's integration tests.
 *
 *   cc -O2 -o hello_fcgi hello_fcgi.c -lfcgi
 *
 * Started by a web server with its listening socket as fd 0 (FastCGI 2.2).
 * Answers each request with a text/plain report, one key=value per line:
 * pid, lang=c, method, query, content_length ("-" when absent), body_len,
 * body_fnv (FNV-1a 64 of the body, 16 hex digits) and served (requests
 * this process answered before). The query string steers it:
 *   sleep=MS   wait MS milliseconds first
 *   exit=CODE  exit the process mid-request (after the sleep)
 *   big=N      answer N bytes ('a' + i % 26) with a Content-Length instead
 *   noread=1   answer without reading the request body (as many real
 *              applications do when they have no use for it)
 */
#include <fcgiapp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The value of query parameter NAME copied into OUT, or -1 if absent. */
static int query_param(const char *qs, const char *name, char *out, size_t cap)
{
    size_t nlen = strlen(name);
    const char *p = qs;
    while (p && *p) {
        const char *end = strchr(p, '&');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len >= nlen && strncmp(p, name, nlen) == 0 &&
            (len == nlen || p[nlen] == '=')) {
            const char *v = len > nlen ? p + nlen + 1 : p + len;
            size_t vlen = (size_t)(p + len - v);
            if (vlen >= cap)
                vlen = cap - 1;
            memcpy(out, v, vlen);
            out[vlen] = '\0';
            return 0;
        }
        p = end ? end + 1 : NULL;
    }
    return -1;
}

static long long query_num(const char *qs, const char *name, long long dflt)
{
    char v[64];
    if (query_param(qs, name, v, sizeof v) != 0)
        return dflt;
    return atoll(v);
}

static void sleep_ms(long long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

int main(void)
{
    FCGX_Request req;
    static char buf[65536];
    unsigned long served = 0;

    if (FCGX_Init() != 0)
        return 1;
    if (FCGX_InitRequest(&req, 0, 0) != 0)
        return 1;
    while (FCGX_Accept_r(&req) >= 0) {
        const char *qs = FCGX_GetParam("QUERY_STRING", req.envp);
        const char *method = FCGX_GetParam("REQUEST_METHOD", req.envp);
        const char *cl = FCGX_GetParam("CONTENT_LENGTH", req.envp);
        uint64_t fnv = 0xcbf29ce484222325ULL;
        unsigned long long body_len = 0;
        long long n;
        int got;

        if (!qs)
            qs = "";
        while (query_num(qs, "noread", 0) == 0 &&
               (got = FCGX_GetStr(buf, sizeof buf, req.in)) > 0) {
            for (int i = 0; i < got; i++) {
                fnv ^= (unsigned char)buf[i];
                fnv *= 0x100000001b3ULL;
            }
            body_len += (unsigned long long)got;
        }
        n = query_num(qs, "sleep", 0);
        if (n > 0)
            sleep_ms(n);
        n = query_num(qs, "exit", -1);
        if (n >= 0) {
            fprintf(stderr, "hello_fcgi[%d]: exiting with %lld mid-request as asked\n",
                    (int)getpid(), n);
            exit((int)n);
        }
        n = query_num(qs, "big", -1);
        if (n >= 0) {
            FCGX_FPrintF(req.out,
                         "Content-Type: application/octet-stream\r\nX-Pid: %d\r\n"
                         "Content-Length: %lld\r\n\r\n",
                         (int)getpid(), n);
            for (long long i = 0; i < n;) {
                int k = 0;
                for (; k < (int)sizeof buf && i < n; k++, i++)
                    buf[k] = (char)('a' + i % 26);
                if (FCGX_PutStr(buf, k, req.out) < 0)
                    break;
            }
        } else {
            char body[1024];
            int len = snprintf(body, sizeof body,
                               "pid=%d\nlang=c\nmethod=%s\nquery=%s\ncontent_length=%s\n"
                               "body_len=%llu\nbody_fnv=%016llx\nserved=%lu\n",
                               (int)getpid(), method ? method : "", qs, cl ? cl : "-",
                               body_len, (unsigned long long)fnv, served);
            FCGX_FPrintF(req.out,
                         "Content-Type: text/plain\r\nX-Pid: %d\r\nContent-Length: %d\r\n\r\n",
                         (int)getpid(), len);
            FCGX_PutStr(body, len, req.out);
        }
        served++;
        FCGX_Finish_r(&req);
    }
    return 0;
}
