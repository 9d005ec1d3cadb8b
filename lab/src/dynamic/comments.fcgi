#!/usr/bin/perl
# The dynamic-routes application as a FastCGI program (the seeds' Figure 1:
# CGI::Fast, the database connection opened once and kept). Serves on the
# listening socket it finds on fd 0 (Stoa's pool, or lab/src/dynamic/
# fcgi-spawn.py for Apache's mod_proxy_fcgi).
use strict;
use warnings;
use CGI::Fast;
use LabComments;

# FCGI replaces %ENV with each request's variables: read ours first.
my ($SQLITE, $PGHOST, $PGPORT) = ($ENV{LAB_SQLITE}, $ENV{LAB_PGHOST}, $ENV{LAB_PGPORT});
my %dbh;
while (my $q = CGI::Fast->new) {
    my $db = ($q->url_param('db') // '') eq 'pg' ? 'pg' : 'sqlite';
    my $dbh = $dbh{$db} //= LabComments::connect_db($db, $SQLITE, $PGHOST, $PGPORT);
    if ($q->request_method eq 'POST') {
        my $out = LabComments::insert($dbh, scalar $q->param('name'), scalar $q->param('email'),
            scalar $q->param('comments'));
        print "Content-Type: text/html\r\n\r\n", $out;
    } else {
        my $page = LabComments::page($dbh, scalar $q->url_param('t'));
        print "Content-Type: text/html\r\nContent-Length: ", length($page), "\r\n\r\n", $page;
    }
}
