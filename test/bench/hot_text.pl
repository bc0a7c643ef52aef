#!/usr/bin/perl
# Writes cmake/hot-text.ld from a profile: the input sections of dsh-confine's code that a call
# ran, listed for the linker to place first, together (docs/performance.md, "The code a call
# runs"). test/bench/hot_text.sh runs the workload and calls this; run by hand as
#
#   perl hot_text.pl LINK_MAP BINARY SAMPLES > cmake/hot-text.ld
#
# LINK_MAP is the linker's map of BINARY (-Wl,-Map, which the build writes next to it), SAMPLES
# the symbols of `perf script --no-demangle -F ip,sym,symoff` of BINARY's own code ("name+0xoffset").
# A sample's address (the symbol's, from nm, plus the offset) falls in one input section of the
# map; every section that had a sample is listed once, in the order of its address in BINARY,
# so code that sat together stays together. A section of an archive member is named with its
# archive and member (libc.a:malloc.o), any other by its own name, which -ffunction-sections
# makes the function's (.text._ZN3dsh...), or with its file where the name is a shared one.
use strict;
use warnings;

my ($map, $binary, $samples) = @ARGV;
die "usage: hot_text.pl LINK_MAP BINARY SAMPLES\n" unless defined $samples;

# The input .text sections the map places, with their address, size and file.
my (@start, @size, @pattern);
open(my $m, '<', $map) or die "hot_text.pl: $map: $!\n";
my ($placing, $pending) = (0, undef);
while (my $line = <$m>) {
    chomp $line;
    if (!$placing) { $placing = $line =~ /^Linker script and memory map/; next; }
    my ($name, $rest);
    if ($line =~ /^ (\.text\S*)\s+(0x\S+\s+0x\S+\s+\S.*)$/) { ($name, $rest) = ($1, $2); }
    elsif ($line =~ /^ (\.text\S*)$/) { $pending = $1; next; }
    elsif (defined $pending && $line =~ /^\s+(0x\S+\s+0x\S+\s+\S.*)$/) { ($name, $rest) = ($pending, $1); }
    $pending = undef;
    next unless defined $name;
    my ($address, $bytes, $file) = $rest =~ /^(0x\S+)\s+(0x\S+)\s+(.*)$/;
    next unless hex($bytes) > 0;
    # A section name libraries share (.text, .text.evex512) is only one file's with the file.
    my $shared = $name !~ /^\.text\.[^.]*_/;
    my $where = $file =~ m{([^/]+\.a)\(([^)]+)\)$} ? "*$1:$2" : $shared ? '*' . ($file =~ m{([^/]+)$})[0] : '*';
    push @start, hex($address);
    push @size, hex($bytes);
    push @pattern, "$where($name)";
}
close $m;
die "hot_text.pl: no placed .text sections in $map\n" unless @start;
my @order = sort { $start[$a] <=> $start[$b] } 0 .. $#start;
@start = @start[@order];
@size = @size[@order];
@pattern = @pattern[@order];

my %symbol;
open(my $nm, '-|', 'nm', '--defined-only', $binary) or die "hot_text.pl: nm: $!\n";
while (<$nm>) {
    my ($address, $type, $name) = split;
    $symbol{$name} //= hex($address) if defined $name;
}
close $nm;

# The section holding ADDRESS (binary search over the sorted starts), or -1.
sub section_of {
    my ($address) = @_;
    my ($low, $high) = (0, $#start);
    while ($low < $high) {
        my $mid = int(($low + $high + 1) / 2);
        if ($start[$mid] <= $address) { $low = $mid; } else { $high = $mid - 1; }
    }
    return $start[$low] <= $address && $address < $start[$low] + $size[$low] ? $low : -1;
}

my (%hit, $total, $missed);
open(my $s, '<', $samples) or die "hot_text.pl: $samples: $!\n";
while (<$s>) {
    my ($name, $offset) = /^\s*(\S+)\+0x([0-9a-f]+)\s*$/ or next;
    ++$total;
    my $section = exists $symbol{$name} ? section_of($symbol{$name} + hex($offset)) : -1;
    if ($section < 0) { ++$missed; next; }
    $hit{$section} = 1;
}
close $s;
die "hot_text.pl: no sample fell in a .text section of $binary\n" unless %hit;

my ($bytes, %listed) = (0);
$bytes += $size[$_] for keys %hit;
printf "/* The code a dsh-confine call runs, placed first and together in .text: fewer pages to map\n"
     . "   per call (docs/performance.md). Written by test/bench/hot_text.sh from a profile of the\n"
     . "   calls users make; do not edit by hand. A line that matches nothing (code renamed since)\n"
     . "   is ignored by the linker, and code missing here is only placed as before.\n"
     . "   %d sections, %d KiB; %d of %d samples outside them. */\n", scalar(keys %hit), $bytes / 1024, $missed // 0, $total;
print "SECTIONS\n{\n  .text.hot :\n  {\n";
for my $section (sort { $a <=> $b } keys %hit) {
    next if $listed{$pattern[$section]}++;
    print "    $pattern[$section]\n";
}
print "  }\n}\nINSERT BEFORE .text;\n";
