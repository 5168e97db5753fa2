#!/bin/sh
# Generates a C project of N translation units (default 200) and a Makefile in DIR: a
# stand-in for the builds of seeds 000 and 002 that needs nothing but cc and make.
# Usage: gen-c-project.sh DIR [N]
set -eu
dir=$1
n=${2:-200}
mkdir -p "$dir"
cd "$dir"
i=0
objs=""
while [ "$i" -lt "$n" ]; do
  cat > "unit$i.c" <<C
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
static int table$i[256];
int unit$i(int x) {
    for (int k = 0; k < 256; k++) table$i[k] = (k * $i + x) % 97;
    int s = 0;
    for (int k = 0; k < 256; k++) s += table$i[(k * 7) % 256] ^ (int)strlen("unit$i");
    return s;
}
C
  objs="$objs unit$i.o"
  i=$((i + 1))
done
{
  echo "CC ?= cc"
  echo "CFLAGS ?= -O2"
  echo "OBJS =$objs"
  printf 'libunits.a: $(OBJS)\n\tar rcs $@ $(OBJS)\n'
  printf '%%.o: %%.c\n\t$(CC) $(CFLAGS) -c -o $@ $<\n'
  printf 'clean:\n\trm -f *.o libunits.a\n'
  echo ".PHONY: clean"
} > Makefile
