#!/bin/sh
# A CGI script in the demo: prints its request's meta-variables.
printf 'Content-Type: text/plain; charset=utf-8\n\n'
printf 'Hello from CGI. You asked for %s with query "%s".\n' "$SCRIPT_NAME$PATH_INFO" "$QUERY_STRING"
