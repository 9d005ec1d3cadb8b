/* A CGI program in C, compiled by the test with `cc`. */
#include <stdio.h>
#include <stdlib.h>

int main(void) {
    const char *method = getenv("REQUEST_METHOD");
    const char *query = getenv("QUERY_STRING");
    long n = 0;
    if (getenv("CONTENT_LENGTH") != NULL) {
        while (getchar() != EOF)
            n++;
    }
    printf("Content-Type: text/plain\r\nX-Lang: C\r\n\r\n");
    printf("hello from C\nmethod=%s\nquery=%s\nread=%ld\n", method ? method : "",
           query ? query : "", n);
    return 0;
}
