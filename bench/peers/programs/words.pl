# SPDX-License-Identifier: GPL-2.0
# bench/peers/suite: perl (one thread) building, splitting, indexing and
# dropping strings and arrays: perl's own bodies come from its arenas, its
# strings and arrays from malloc.
use strict;
my (%idx, %count, @keep);
for my $i (1 .. 200000) {
	my $s = join(",", map { "w" . (($i * 7 + $_) % 997) } 0 .. ($i % 40));
	my @f = split /,/, $s;
	$idx{"k$i"} = \@f;
	$count{$_}++ for @f;
	delete $idx{"k" . ($i - 5000)} if $i > 5000;
	push @keep, uc($s) if $i % 100 == 0;
}
my @top = (sort { $count{$b} <=> $count{$a} || $a cmp $b } keys %count)[0 .. 4];
print scalar(keys %idx), " ", scalar(@keep), " @top\n";
