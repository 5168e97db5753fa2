#!/bin/sh
# Runs one libFuzzer target on its seed corpora, from the repository root:
#   fuzz/run.sh TARGET [libFuzzer flags...]      e.g. fuzz/run.sh spec -runs=1000000
# New inputs go to fuzz/work/TARGET (ignored by git), crashes to fuzz/artifacts/TARGET.
# The seeds are the same directories coordinator/tests/fuzz_short.rs reads.
set -eu
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: fuzz/run.sh TARGET [libFuzzer flags...]" >&2; exit 2; }
t=$1
shift
case $t in
spec) seeds="fuzz/corpus/spec coordinator/tests/spec-corpus/valid coordinator/tests/spec-corpus/invalid examples" ;;
fio | bonnie | compilebench) seeds="fuzz/corpus/$t agent/tests/fixtures" ;;
smartctl) seeds="fuzz/corpus/$t agent/tests/fixtures/smartctl" ;;
wire | journal) seeds="fuzz/corpus/$t" ;;
*)
	echo "unknown target $t (spec wire journal fio bonnie compilebench smartctl)" >&2
	exit 2
	;;
esac
mkdir -p "fuzz/work/$t"
# cargo-fuzz passes -Z flags to rustc; RUSTC_BOOTSTRAP lets a stable toolchain take them.
# shellcheck disable=SC2086 # $seeds is a list of directories
RUSTC_BOOTSTRAP=1 exec cargo fuzz run "$t" "fuzz/work/$t" $seeds -- "$@"
