#!/usr/bin/perl
# SPDX-License-Identifier: GPL-2.0
# view_shape.pl DOC SCREEN: what differs between the shape of a view pasted
# in a document and that of a view the code drew; nothing when they agree.
# Each view (a file) as its shape: the lines that are no module's, numbers
# and names made N; each module in its order, with the phrases of its
# totals, numbers made N, details with numbers dropped ("(10.50.1.2
# 1500)", "(of the top 10)"), plurals made singular; the phrases of its
# "last N s" line, which must be phrases of its totals.
use strict;
use warnings;
sub norm {
	my $t = shift;
	$t =~ s/ \([^)]*[0-9][^)]*\)//g;
	$t =~ s/ \([^)]*$//;
	$t =~ s/[0-9]+(?:\.[0-9]+)?/N/g;
	$t =~ s/\b(\w+?(?:ch|sh))es\b/$1/g;
	$t =~ s/\b(\w+?)s\b/$1/g;
	return $t;
}
# The phrases of a text, "a, b, c"; a phrase cut ("...") is dropped.
sub phrases {
	my $t = shift;
	$t =~ s/(?:^|, )[^,]*\.\.\.$// if $t =~ /\.\.\.$/;
	$t =~ s/ \([^)]*[0-9][^)]*\)//g;
	return map { norm($_) } grep { length } split /, /, $t;
}
sub shape {
	my $f = shift;
	my (@order, %total, %last, @other, $mod);
	open(my $fh, "<", $f) or die "$f: $!";
	while (<$fh>) {
		chomp;
		s/\s+$//;
		next unless length;
		if (/^(tcpstats|rehash|pmtu|fragguard) +(\S.*)/) {
			$mod = $1; push @order, $mod; $total{$mod} = $2;
		} elsif ($mod && /^ {11}last [0-9]+ s, per s: (.*)/) {
			$last{$mod} = $1;
		} elsif ($mod && !exists $last{$mod} && /^ {11}(\S.*)/) {
			$total{$mod} .= " $1";
		} else {
			$mod = undef;
			s/cgroup [^,]+/cgroup C/; s/iface \S+/iface I/;
			push @other, norm($_);
		}
	}
	return { order => "@order", other => join("\n", @other),
		 total => { map { $_ => [sort(phrases($total{$_}))] } @order },
		 last => { map { $_ => [phrases($last{$_})] } keys %last } };
}
my ($doc, $code) = (shape($ARGV[0]), shape($ARGV[1]));
my @bad;
push @bad, "modules: '$doc->{order}', the code shows '$code->{order}'" if $doc->{order} ne $code->{order};
push @bad, "other lines:\n$doc->{other}\nthe code shows:\n$code->{other}" if $doc->{other} ne $code->{other};
for my $m (split / /, $code->{order}) {
	my ($d, $c) = (join(" | ", @{$doc->{total}{$m} || []}), join(" | ", @{$code->{total}{$m}}));
	push @bad, "$m: '$d', the code says '$c'" if $d ne $c;
	my %said = map { $_ => 1 } @{$code->{total}{$m}};
	for (@{$doc->{last}{$m} || []}) {
		push @bad, "${m}'s last line: '$_' is none of its phrases" unless $said{$_} || $_ eq "nothing new";
	}
}
print "$_\n" for @bad;
