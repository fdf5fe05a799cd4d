#!/bin/sh
# Instructions per tick of bench_selfscrape's ways (render: one /metrics
# render; store: one self-scrape into the store), counted by callgrind
# (before the sink took every family, the store's way was called
# "direct"; WAYS picks them): the difference of the totals
# for HI and LO ticks, over HI - LO, so start-up and the recording's load
# cancel out. Needs valgrind.
#   bench/selfscrape_instructions.sh [build-dir] [NPROC] [LO] [HI] [WAYS]
set -eu
build=${1:-build}
nproc=${2:-8}
lo=${3:-100}
hi=${4:-300}
ways=${5:-render store}
rec="$(dirname "$0")/../data/recordings/h200-phases-10hz.csv"
total() {
	valgrind --tool=callgrind --callgrind-out-file=/dev/null \
		"$build/bench/bench_selfscrape" "$rec" "$1" "$2" "$nproc" 2>&1 >/dev/null |
		sed -n 's/.*Collected : *\([0-9]*\).*/\1/p'
}
for way in $ways; do
	a=$(total "$lo" "$way")
	b=$(total "$hi" "$way")
	echo "$way: $(( (b - a) / (hi - lo) )) instructions per tick ($nproc processes per GPU, 8 GPUs)"
done
