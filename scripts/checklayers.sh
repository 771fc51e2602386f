#!/usr/bin/env bash
#
# `make lint`: keeps the include graph of services/ pointing downwards
# (README.md, "Architecture"). Checks every `#include "..."` of every .c
# and .h file under services/ and prints file:line: why for each one that
# breaks a rule; exits 1 when there is any.
#
# services/relay/ is split into folders in layers, top first (RELAY_LAYERS
# below). A file in folder F may include, with quotes:
#   - a header of its own folder, by name ("write_int.h");
#   - a header at the top of services/relay/ ("relay.h", "protocol_limits.h");
#   - the public header of a folder in a lower layer, and only that one:
#     "X/X.h" ("read/read.h"), never X's *_int.h or other headers;
#   - libcomb's headers ("comb/...").
# The top-level files are the bottom layer (top-level headers and comb/
# only), except main.c, which may include every folder's public header.
# Every other service (services/capture/, services/admin/) is flat: its
# own headers by name and comb/, nothing of another service.
#
#   scripts/checklayers.sh [ROOT]     check ROOT (default: the repository)
#   scripts/checklayers.sh --self-test
#       check the repository, then a copy of services/ with planted
#       back-includes, which must fail (run by CTest as lint/layers)
set -euo pipefail

# Layers of services/relay/, top first; folders on one line are peers and
# may not include each other.
RELAY_LAYERS=(
	"http ws"
	"sync"
	"session write read"
	"feed"
	"hub proto"
	"metrics"
	"request"
	"access client_addr readpos revcache"
)

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

check() {
	local root=$1
	local -a files
	mapfile -t files < <(cd "$root" && find services -type f \( -name '*.c' -o -name '*.h' \) | sort)
	if [ ${#files[@]} -eq 0 ]; then
		echo "checklayers: no C files under $root/services"
		return 1
	fi
	(cd "$root" && LAYERS="$(printf '%s\n' "${RELAY_LAYERS[@]}")" perl -e '
		use strict;
		use warnings;
		my %level;
		my $n = 0;
		for my $line (split /\n/, $ENV{LAYERS}) {
			$level{$_} = $n for split " ", $line;
			$n++;
		}
		my $bad = 0;
		sub fail { my ($f, $l, $why) = @_; print "$f:$l: $why\n"; $bad++; }
		for my $file (@ARGV) {
			my ($service, $rest) = $file =~ m{^services/([^/]+)/(.+)$} or next;
			my @dirs = split m{/}, $rest;
			my $base = pop @dirs;
			my $folder = join "/", @dirs;       # "" at the top of the service
			my $layered = $service eq "relay";
			if ($layered && $folder ne "" && !exists $level{$folder}) {
				fail($file, 1, "folder services/relay/$folder is not in RELAY_LAYERS (scripts/checklayers.sh)");
				next;
			}
			if (!$layered && $folder ne "") {
				fail($file, 1, "services/$service is flat: no subfolders");
				next;
			}
			open(my $fh, "<", $file) or die "checklayers: $file: $!\n";
			my $ln = 0;
			while (my $line = <$fh>) {
				$ln++;
				my ($inc) = $line =~ /^\s*#\s*include\s*"([^"]+)"/ or next;
				next if $inc =~ m{^comb/[\w.]+\.h$};
				my $svc = "services/$service";
				my $own = $folder eq "" ? $svc : "$svc/$folder";
				if ($inc !~ m{/}) {
					next if -f "$own/$inc";
					next if $layered && -f "$svc/$inc";
					fail($file, $ln, "\"$inc\" is neither in $own/ nor a top-level header of $svc/");
					next;
				}
				if (!$layered) {
					fail($file, $ln, "\"$inc\": $svc/ may include only its own headers and comb/");
					next;
				}
				my ($dir, $name) = $inc =~ m{^([\w]+)/([\w.]+)$};
				if (!defined $dir || !exists $level{$dir}) {
					fail($file, $ln, "\"$inc\" is not a header of a services/relay folder or comb/");
					next;
				}
				if ($name ne "$dir.h") {
					fail($file, $ln, "\"$inc\": only $dir/$dir.h is public; other folders may not include $inc");
					next;
				}
				if (!-f "$svc/$inc") {
					fail($file, $ln, "\"$inc\" does not exist");
					next;
				}
				next if $folder eq "" && $base eq "main.c";
				if ($folder eq "") {
					fail($file, $ln, "\"$inc\": the top of services/relay is below every folder and includes none");
				} elsif ($dir eq $folder) {
					fail($file, $ln, "\"$inc\": include your own folder'"'"'s headers by name");
				} elsif ($level{$dir} <= $level{$folder}) {
					fail($file, $ln, "\"$inc\": $dir/ is not below $folder/ (RELAY_LAYERS in scripts/checklayers.sh)");
				}
			}
			close($fh);
		}
		if ($bad) {
			print "checklayers: $bad include(s) break the layering of services/\n";
			exit 1;
		}
	' "${files[@]}") || return 1
	echo "checklayers: ${#files[@]} files keep their layers"
}

self_test() {
	local tmp out
	check "$here/.."
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' RETURN
	(cd "$here/.." && find services -type f \( -name '*.c' -o -name '*.h' \) -print0 |
		tar -c --null -T - -f -) | tar -x -C "$tmp" -f -
	# A lower layer reaching up, a peer, another folder's internals, and
	# two services including each other.
	echo '#include "ws/ws.h"' >>"$tmp/services/relay/feed/feed.c"
	echo '#include "read/read.h"' >>"$tmp/services/relay/write/events.c"
	echo '#include "write/write_int.h"' >>"$tmp/services/relay/ws/ws.c"
	echo '#include "../relay/relay.h"' >>"$tmp/services/capture/main.c"
	if out=$(check "$tmp"); then
		echo "checklayers: self-test: planted back-includes were not found"
		return 1
	fi
	for want in "feed/feed.c:.*ws/ws.h" "write/events.c:.*read/read.h" \
		"ws/ws.c:.*write/write_int.h" "capture/main.c:.*relay/relay.h"; do
		if ! grep -q "$want" <<<"$out"; then
			printf '%s\n' "$out"
			echo "checklayers: self-test: no complaint matching $want"
			return 1
		fi
	done
	echo "checklayers: self-test: planted back-includes refused"
}

if [ "${1:-}" = "--self-test" ]; then
	self_test
else
	check "${1:-$here/..}"
fi
