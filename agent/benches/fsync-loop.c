/* The C reference for platter's fsync workload overhead benchmark (src/bin/fsync-vs-c.rs).
 * Does exactly what the Rust timed loop does: preallocate, then N times
 * clock_gettime, pwrite(1 byte at offset 0), fdatasync, clock_gettime, store the latency
 * in a preallocated, pre-touched array. Prints the monotonic time around the loop in ns.
 *
 * Build: gcc -O2 -o /tmp/loop c/loop.c
 * Usage: /tmp/loop FILE [COUNT [untimed|tsc]]   (COUNT defaults to 200000)
 *
 * With `untimed`, the loop reads no clock per operation: only pwrite + fdatasync, the
 * floor any loop that times each operation is measured against. With `tsc` (x86-64), it
 * does what platter's loop does where the clocksource is the TSC: one `rdtsc` per
 * operation, each latency ending where the next begins, stored in the array: what timing
 * every operation costs at the least.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* One operation: pwrite of `size` bytes at offset 0, then fdatasync; exits on failure. */
static inline void write_and_sync(int fd, const char *buf, size_t size) {
    if (pwrite(fd, buf, size, 0) != (ssize_t)size) {
        perror("pwrite");
        exit(1);
    }
    if (fdatasync(fd) != 0) {
        perror("fdatasync");
        exit(1);
    }
}

/* Prints the loop's total in ns and the mean latency (in ns, or TSC ticks for `tsc`),
 * which uses the samples so that their stores cannot be optimized away. */
static int report(int fd, uint64_t total, const uint64_t *lat, long count) {
    uint64_t sum = 0;
    for (long i = 0; i < count; i++)
        sum += lat[i];
    close(fd);
    printf("%llu %llu\n", (unsigned long long)total, (unsigned long long)(sum / count));
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE [COUNT [untimed|tsc]]\n", argv[0]);
        return 2;
    }
    long count = argc > 2 ? atol(argv[2]) : 200000;
    int untimed = argc > 3 && strcmp(argv[3], "untimed") == 0;
    int tsc = argc > 3 && strcmp(argv[3], "tsc") == 0;
    if (count < 1) {
        fprintf(stderr, "COUNT must be >= 1\n");
        return 2;
    }
    const size_t size = 1;
    char buf[1] = {'q'};

    int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        perror("open");
        return 1;
    }
    int rc = posix_fallocate(fd, 0, (off_t)(size * count));
    if (rc != 0) {
        fprintf(stderr, "posix_fallocate: %s\n", strerror(rc));
        return 1;
    }
    uint64_t *lat = malloc(sizeof(uint64_t) * count);
    if (lat == NULL) {
        perror("malloc");
        return 1;
    }
    /* Take the page faults now, as the Rust side does for its histogram. */
    memset(lat, 0, sizeof(uint64_t) * count);

    uint64_t start = now_ns();
    if (untimed) {
        for (long i = 0; i < count; i++) {
            write_and_sync(fd, buf, size);
        }
        uint64_t total = now_ns() - start;
        close(fd);
        printf("%llu 0\n", (unsigned long long)total);
        return 0;
    }
#if defined(__x86_64__)
    if (tsc) {
        uint64_t t0 = __rdtsc();
        for (long i = 0; i < count; i++) {
            write_and_sync(fd, buf, size);
            uint64_t t1 = __rdtsc();
            lat[i] = t1 - t0;
            t0 = t1;
        }
        return report(fd, now_ns() - start, lat, count);
    }
#else
    if (tsc) {
        fprintf(stderr, "tsc: x86-64 only\n");
        return 2;
    }
#endif
    for (long i = 0; i < count; i++) {
        uint64_t t0 = now_ns();
        write_and_sync(fd, buf, size);
        lat[i] = now_ns() - t0;
    }
    return report(fd, now_ns() - start, lat, count);
}
