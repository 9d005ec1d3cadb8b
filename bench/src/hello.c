/* hello.c - CGI for bench/cgi.sh (from the shared peers folder): a ~1.3 KB HTML page echoing QUERY_STRING.
 * cc -O2 hello.c -o hello                  -> plain CGI
 * cc -O2 -DFCGI hello.c -o hello_fcgi -lfcgi -> FastCGI responder (libfcgi, fcgi_stdio.h) */
#ifdef FCGI
#include <fcgi_stdio.h>
#else
#include <stdio.h>
#endif
#include <stdlib.h>

static void page(void)
{
    const char *q = getenv("QUERY_STRING");
    printf("Content-Type: text/html\r\n\r\n"
           "<!DOCTYPE html>\n<html><head><title>hello</title></head><body>\n"
           "<h1>Hello, world!</h1>\n<p>QUERY_STRING: [%s]</p>\n<pre>\n", q ? q : "");
    for (int i = 0; i < 21; i++)
        fputs("The quick brown fox jumps over the lazy dog. 0123456789\n", stdout);
    fputs("</pre>\n</body></html>\n", stdout);
}

int main(void)
{
#ifdef FCGI
    while (FCGI_Accept() >= 0)
        page();
#else
    page();
#endif
    return 0;
}
