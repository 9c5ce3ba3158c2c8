#!/usr/bin/env bash
# Keeps docs/sql-api.md honest: runs every ```sql example, in order, in one
# psql session on a fresh database (one transaction, rolled back at the end),
# and compares what psql prints (-A -t: unaligned, tuples only, errors terse)
# with the ```text block that follows the example. UUIDs and timestamps are
# volatile, so both sides have them replaced by <uuid> / <timestamp> before
# comparing. An example with no ```text block must print nothing.
#
#   scripts/docs-check.sh           check; on a difference print a diff, exit 1
#   scripts/docs-check.sh --write   rewrite the ```text blocks with the real output
#
# The fresh database: a scratch database on DATABASE_URL's server when that is
# set (created and dropped here), else a throwaway cluster (scripts/pg.sh).
# Migrations and sql/*.sql are applied with psql, in the gateway's order.
set -euo pipefail
cd "$(dirname "$0")/.."

DOC=${DOC:-docs/sql-api.md}
mode=check
case "${1:-}" in
    "") ;;
    --write) mode=write ;;
    *) echo "usage: $0 [--write]" >&2; exit 2 ;;
esac

tmp=$(mktemp -d)
scratch_db=
admin_url=
cleanup() {
    if [[ -n "$scratch_db" ]]; then
        psql -X -q "$admin_url" -c "DROP DATABASE IF EXISTS $scratch_db" >/dev/null 2>&1 || true
    fi
    scripts/pg.sh stop "$tmp/pg" >/dev/null 2>&1 || true
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [[ -n "${DATABASE_URL:-}" ]]; then
    scratch_db="pgcursor_docs_$$"
    admin_url=$DATABASE_URL
    psql -X -q -v ON_ERROR_STOP=1 "$admin_url" -c "CREATE DATABASE $scratch_db" >/dev/null
    url="${DATABASE_URL%/*}/$scratch_db"
else
    url=$(scripts/pg.sh start "$tmp/pg" 2>/dev/null | tail -n1)
fi

# The schema, as the gateway's bootstrap builds it: migrations by version,
# then the function files by name, in one transaction.
{
    for f in $(ls migrations/V*__*.sql | sort -V); do cat "$f"; echo; done
    for f in sql/*.sql; do cat "$f"; echo; done
} | psql -X -q -1 -v ON_ERROR_STOP=1 "$url" >/dev/null 2>"$tmp/schema.log" \
    || { cat "$tmp/schema.log" >&2; echo "docs-check: applying the schema failed" >&2; exit 1; }

export DOCS_URL=$url DOCS_TMP=$tmp DOCS_MODE=$mode
# Not exec: the EXIT trap must still stop the cluster (or drop the scratch
# database) once perl is done.
perl -x "$0" "$DOC"
exit

#!perl
use strict;
use warnings;

my ($doc) = @ARGV;
my ($url, $tmp, $mode) = @ENV{qw(DOCS_URL DOCS_TMP DOCS_MODE)};

open my $in, '<', $doc or die "docs-check: cannot read $doc: $!\n";
my @lines = <$in>;
close $in;

# Examples: a ```sql block, and the ```text block right after it (blank
# lines between allowed), as line ranges of the file.
my @examples;
for (my $i = 0; $i < @lines; $i++) {
    next unless $lines[$i] =~ /^```sql\s*$/;
    my $start = $i;
    my $end = $start + 1;
    $end++ while $end < @lines && $lines[$end] !~ /^```\s*$/;
    die "docs-check: $doc:" . ($start + 1) . ": unclosed ```sql block\n" if $end >= @lines;
    my %ex = (line => $start + 1, sql => join('', @lines[$start + 1 .. $end - 1]), sql_end => $end);
    my $j = $end + 1;
    $j++ while $j < @lines && $lines[$j] =~ /^\s*$/;
    if ($j < @lines && $lines[$j] =~ /^```text\s*$/) {
        my $k = $j + 1;
        $k++ while $k < @lines && $lines[$k] !~ /^```\s*$/;
        die "docs-check: $doc:" . ($j + 1) . ": unclosed ```text block\n" if $k >= @lines;
        @ex{qw(text_start text_end expected)} = ($j, $k, join('', @lines[$j + 1 .. $k - 1]));
    }
    push @examples, \%ex;
    $i = $ex{text_end} // $end;
}
die "docs-check: no ```sql examples in $doc\n" unless @examples;

# One psql session: markers between the examples, everything rolled back.
my $script = "$tmp/examples.sql";
open my $out, '>', $script or die "docs-check: $script: $!\n";
print $out "SET TimeZone = 'UTC';\nBEGIN;\n";
for my $n (0 .. $#examples) {
    print $out "\\echo '\@\@docs-example $n\@\@'\n", $examples[$n]{sql};
}
print $out "\\echo '\@\@docs-example end\@\@'\nROLLBACK;\n";
close $out;

my @cmd = ('psql', '-X', '-q', '-A', '-t', '-v', 'ON_ERROR_ROLLBACK=on', '-v', 'VERBOSITY=terse',
           '-f', $script, $url);
open my $psql, '-|', join(' ', map { quotemeta } @cmd) . ' 2>&1' or die "docs-check: psql: $!\n";
my (@actual, $current);
while (my $line = <$psql>) {
    if ($line =~ /^\@\@docs-example (\d+|end)\@\@$/) {
        $current = $1 eq 'end' ? undef : $1;
        next;
    }
    next unless defined $current;
    $line =~ s/^psql:[^:]*:\d+: //;    # an error's file:line prefix moves with the doc
    $actual[$current] .= $line;
}
close $psql;

sub tidy { my $s = shift // ''; $s =~ s/\s+\z//; return $s eq '' ? '' : "$s\n" }
sub normalise {
    my $s = tidy(shift);
    $s =~ s/\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b/<uuid>/gi;
    $s =~ s/\b\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d(?::?\d\d)?)?/<timestamp>/g;
    return $s;
}

if ($mode eq 'write') {
    # From the end, so earlier line numbers stay valid.
    for my $n (reverse 0 .. $#examples) {
        my $ex = $examples[$n];
        my $got = tidy($actual[$n]);
        my @block = ("```text\n", ($got eq '' ? () : $got), "```\n");
        if (defined $ex->{text_start}) {
            splice @lines, $ex->{text_start}, $ex->{text_end} - $ex->{text_start} + 1, @block;
        } elsif ($got ne '') {
            splice @lines, $ex->{sql_end} + 1, 0, "\n", @block;
        }
    }
    open my $w, '>', $doc or die "docs-check: cannot write $doc: $!\n";
    print $w @lines;
    close $w;
    print "docs-check: rewrote the outputs of ", scalar(@examples), " examples in $doc\n";
    exit 0;
}

my $failed = 0;
for my $n (0 .. $#examples) {
    my ($want, $got) = (normalise($examples[$n]{expected}), normalise($actual[$n]));
    next if $want eq $got;
    $failed++;
    my ($a, $b) = ("$tmp/documented", "$tmp/actual");
    for ([$a, $want], [$b, $got]) { open my $f, '>', $_->[0] or die; print $f $_->[1]; close $f }
    print "docs-check: $doc:$examples[$n]{line}: the documented output differs\n";
    system('diff', '-u', '--label', 'documented', '--label', 'actual', $a, $b);
}
if ($failed) {
    print "docs-check: $failed of ", scalar(@examples), " examples differ (scripts/docs-check.sh --write rewrites them)\n";
    exit 1;
}
print "docs-check: all ", scalar(@examples), " examples of $doc match\n";
