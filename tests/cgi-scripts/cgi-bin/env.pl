#!/usr/bin/perl
# Dumps its whole environment as sorted NAME=value lines, then the request
# body it read from stdin (up to EOF, so the server must close stdin).
use strict;
use warnings;
binmode STDIN;
binmode STDOUT;
my $body = '';
if (defined $ENV{CONTENT_LENGTH}) {
    local $/;
    $body = <STDIN> // '';
}
print "Content-Type: text/plain\r\nX-Script: env.pl\r\n\r\n";
print "$_=$ENV{$_}\n" for sort keys %ENV;
print "--body--\n", $body;
