#!/usr/bin/perl
# Form handling by hand (no CGI.pm): fields from the query string, from an
# application/x-www-form-urlencoded body and from a multipart/form-data body
# (RFC 7578), whose file parts are echoed back with their length.
use strict;
use warnings;
binmode STDIN;
binmode STDOUT;

sub url_decode {
    my $s = shift;
    $s =~ tr/+/ /;
    $s =~ s/%([0-9A-Fa-f]{2})/chr(hex($1))/ge;
    return $s;
}

sub urlencoded {
    my @pairs;
    for my $p (split /[&;]/, shift) {
        next if $p eq '';
        my ($k, $v) = split /=/, $p, 2;
        push @pairs, [url_decode($k), url_decode($v // '')];
    }
    return @pairs;
}

my $method = $ENV{REQUEST_METHOD} // '';
my @fields = urlencoded($ENV{QUERY_STRING} // '');
my @files;
if ($method eq 'POST') {
    my $len = $ENV{CONTENT_LENGTH} // 0;
    my $body = '';
    while (length($body) < $len) {
        my $n = read(STDIN, $body, $len - length($body), length($body));
        die "form.pl: body ended after " . length($body) . " of $len bytes\n" unless $n;
    }
    my $type = $ENV{CONTENT_TYPE} // '';
    if ($type =~ m{^application/x-www-form-urlencoded}i) {
        push @fields, urlencoded($body);
    } elsif ($type =~ m{^multipart/form-data\s*;.*boundary="?([^";]+)"?}i) {
        my $boundary = $1;
        my @parts = split /\r\n--\Q$boundary\E/, "\r\n$body";
        shift @parts;    # the (empty) preamble
        for my $part (@parts) {
            last if $part =~ /^--/;    # the close delimiter
            $part =~ s/^\r\n//;
            my ($head, $content) = split /\r\n\r\n/, $part, 2;
            my ($name) = $head =~ /\bname="([^"]*)"/i;
            my ($filename) = $head =~ /\bfilename="([^"]*)"/i;
            if (defined $filename) {
                push @files, [$name, $filename, $content];
            } else {
                push @fields, [$name, $content];
            }
        }
    } else {
        print "Status: 415 Unsupported Media Type\r\nContent-Type: text/plain\r\n\r\n";
        print "unsupported content type $type\n";
        exit 0;
    }
}
print "Content-Type: text/plain; charset=utf-8\r\n\r\n";
print "method=$method\n";
print "field $_->[0]=$_->[1]\n" for @fields;
for my $f (@files) {
    printf "file %s filename=%s length=%d\n", $f->[0], $f->[1], length($f->[2]);
    print $f->[2], "\n--end of file--\n";
}
