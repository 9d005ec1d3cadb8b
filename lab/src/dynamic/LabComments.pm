# The dynamic-routes application in Perl (lab/src/dynamic): shared by
# comments.pl (CGI, and mod_perl through ModPerl::Registry: the seeds'
# Figure 4, "a script that can be used as a mod perl extension as well as a
# CGI without changes") and comments.fcgi (FastCGI: Figure 1).
#   GET ?t=b1|b2|b3[&db=pg]: SELECT * FROM that table (else `comments`)
#   POST name, email, comments: INSERT INTO comments; "All done OK"
# LAB_SQLITE names the SQLite file; LAB_PGHOST the PostgreSQL socket
# directory and LAB_PGPORT its port (database `comments`, user `lab`).
package LabComments;
use strict;
use warnings;
use DBI;

my %TABLES = (b1 => 1, b2 => 1, b3 => 1);
our $HEAD = "<html><head><title>comments</title></head><body>\n<table>\n"
    . "<tr><th>name</th><th>email</th><th>comments</th></tr>\n";
our $FOOT = "</table>\n</body></html>\n";

# connect_db(WHICH, SQLITE_FILE, PG_HOST, PG_PORT): a new DBI handle (under mod_perl,
# Apache::DBI keeps it: the same call returns the child's kept handle).
sub connect_db {
    my ($which, $sqlite, $pghost, $pgport) = @_;
    if ($which eq 'pg') {
        return DBI->connect("dbi:Pg:dbname=comments;host=$pghost;port=$pgport", 'lab', '',
            { RaiseError => 1, AutoCommit => 1, PrintError => 0 });
    }
    my $dbh = DBI->connect("dbi:SQLite:dbname=$sqlite", '', '',
        { RaiseError => 1, AutoCommit => 1, PrintError => 0, sqlite_unicode => 0 });
    $dbh->sqlite_busy_timeout(5000);
    return $dbh;
}

sub esc {
    my $s = shift;
    $s =~ s/&/&amp;/g; $s =~ s/</&lt;/g; $s =~ s/>/&gt;/g; $s =~ s/"/&quot;/g;
    return $s;
}

sub table_of {
    my $t = shift;
    return (defined $t && $TABLES{$t}) ? $t : 'comments';
}

# The page: Select * as an HTML table.
sub page {
    my ($dbh, $table) = @_;
    my $rows = $dbh->selectall_arrayref("SELECT * FROM " . table_of($table));
    my $html = $HEAD;
    for my $r (@$rows) {
        $html .= "<tr><td>" . esc($r->[0]) . "</td><td>" . esc($r->[1]) . "</td><td>"
            . esc($r->[2]) . "</td></tr>\n";
    }
    return $html . $FOOT;
}

sub insert {
    my ($dbh, $name, $email, $comments) = @_;
    $dbh->do("INSERT INTO comments VALUES (?, ?, ?)", undef,
        $name // '', $email // '', $comments // '');
    return "All done OK\n";
}

1;
