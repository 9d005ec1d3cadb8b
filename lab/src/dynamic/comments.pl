#!/usr/bin/perl
# The dynamic-routes application as a CGI script (a process and a database
# connection per request) and, unchanged, under mod_perl's ModPerl::Registry
# (where Apache::DBI keeps each child's connection): the seeds' Figure 4.
use strict;
use warnings;
use CGI;
use LabComments;

my $q = CGI->new;
my $db = ($q->url_param('db') // '') eq 'pg' ? 'pg' : 'sqlite';
my $dbh = LabComments::connect_db($db, $ENV{LAB_SQLITE}, $ENV{LAB_PGHOST}, $ENV{LAB_PGPORT});
if ($q->request_method eq 'POST') {
    my $out = LabComments::insert($dbh, scalar $q->param('name'), scalar $q->param('email'),
        scalar $q->param('comments'));
    print "Content-Type: text/html\r\n\r\n", $out;
} else {
    my $page = LabComments::page($dbh, scalar $q->url_param('t'));
    print "Content-Type: text/html\r\nContent-Length: ", length($page), "\r\n\r\n", $page;
}
