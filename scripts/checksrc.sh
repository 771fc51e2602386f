#!/usr/bin/env bash
#
# `make lint`: refuses calls to C functions that write or parse without a
# bound (sprintf, vsprintf, strcpy, strcat, atoi, gets) in the project's C
# sources and headers under shared/ services/ plugins/ tests/. Comments and
# string literals are ignored, so a comment may still name them. Prints
# file:line: text for each hit and exits 1 when there is any.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

mapfile -t files < <(find shared services plugins tests -type f \( -name '*.c' -o -name '*.h' \) \
	-not -path '*/corpus/*' 2>/dev/null | sort)
if [ ${#files[@]} -eq 0 ]; then
	echo "checksrc: no C files found"
	exit 0
fi

# Blank out comments and string/char literals (keeping line numbers), then
# look for a banned name followed by an opening parenthesis.
perl -e '
	my $banned = qr/\b(sprintf|vsprintf|strcpy|strcat|atoi|gets)\s*\(/;
	my $hits = 0;
	for my $file (@ARGV) {
		open(my $fh, "<", $file) or die "checksrc: $file: $!\n";
		local $/;
		my $src = <$fh>;
		close($fh);
		my $orig = $src;
		$src =~ s{
			(/\*.*?\*/)                 # block comment
			| (//[^\n]*)                # line comment
			| ("(?:\\.|[^"\\\n])*")     # string literal
			| (\x27(?:\\.|[^\x27\\\n])*\x27)  # char literal
		}{ my $m = $&; $m =~ s/[^\n]/ /g; $m }gsex;
		my @lines = split(/\n/, $src, -1);
		my @olines = split(/\n/, $orig, -1);
		for my $i (0 .. $#lines) {
			while ($lines[$i] =~ /$banned/g) {
				print "$file:", $i + 1, ": $1 is not allowed: $olines[$i]\n";
				$hits++;
			}
		}
	}
	if ($hits) {
		print "checksrc: $hits banned call(s); use snprintf, memcpy with a length, strtol\n";
		exit 1;
	}
' "${files[@]}"
echo "checksrc: ${#files[@]} files clean"
