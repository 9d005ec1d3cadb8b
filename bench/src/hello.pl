#!/usr/bin/perl
# hello.pl - Perl CGI for bench/cgi.sh, same page as hello.c
my $q = $ENV{QUERY_STRING} // '';
print "Content-Type: text/html\r\n\r\n",
  "<!DOCTYPE html>\n<html><head><title>hello</title></head><body>\n",
  "<h1>Hello, world!</h1>\n<p>QUERY_STRING: [$q]</p>\n<pre>\n",
  "The quick brown fox jumps over the lazy dog. 0123456789\n" x 21,
  "</pre>\n</body></html>\n";
