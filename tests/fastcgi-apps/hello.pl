#!/usr/bin/perl
# hello.pl: a FastCGI application with Perl's FCGI module (Debian package
# libfcgi-perl), for Stoa's integration tests. Started by a web server with
# its listening socket as fd 0 (FastCGI 2.2), which FCGI::Request() uses.
#
# Answers each request with a text/plain report, one key=value per line:
# pid, lang=perl, method, query, content_length ("-" when absent),
# body_len, body_sum (the 32-bit sum of the body's bytes, in decimal) and
# served. `sleep=MS` in the query waits MS milliseconds first.
use strict;
use warnings;
use FCGI;

my $req = FCGI::Request();
my $served = 0;
while ($req->Accept() >= 0) {
    my $qs = defined $ENV{QUERY_STRING} ? $ENV{QUERY_STRING} : '';
    my %q;
    for my $kv (split /&/, $qs) {
        my ($k, $v) = split /=/, $kv, 2;
        $q{$k} = defined $v ? $v : '';
    }
    my $cl = $ENV{CONTENT_LENGTH};
    my $body = '';
    if (defined $cl && $cl =~ /^\d+$/ && $cl > 0) {
        while (length($body) < $cl) {
            my $got = read(STDIN, my $piece, $cl - length($body));
            last unless $got;
            $body .= $piece;
        }
    }
    select(undef, undef, undef, $q{sleep} / 1000) if $q{sleep};
    my $sum = unpack('%32C*', $body);
    my $text = join '',
        "pid=$$\n",
        "lang=perl\n",
        'method=', (defined $ENV{REQUEST_METHOD} ? $ENV{REQUEST_METHOD} : ''), "\n",
        "query=$qs\n",
        'content_length=', (defined $cl ? $cl : '-'), "\n",
        'body_len=', length($body), "\n",
        "body_sum=$sum\n",
        "served=$served\n";
    print "Content-Type: text/plain\r\nX-Pid: $$\r\nContent-Length: ",
        length($text), "\r\n\r\n", $text;
    $served++;
}
