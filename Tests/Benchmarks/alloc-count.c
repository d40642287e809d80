// Counts a process's heap allocations (malloc, calloc, realloc, posix_memalign, aligned_alloc),
// loaded with LD_PRELOAD; at exit appends one line to the file $ALLOC_COUNT_OUT:
//   "allocations N (malloc M calloc C realloc R aligned A)"
// Each call is passed on to glibc's own function; only a count is added, so what is counted is
// what the program asks for, whatever glibc does with it. allocations.sh builds and uses it.
// Build: cc -O2 -shared -fPIC -o alloc-count.so Tests/Benchmarks/alloc-count.c
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

static atomic_long mallocs, callocs, reallocs, aligned;

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

void *malloc(size_t size) {
    atomic_fetch_add_explicit(&mallocs, 1, memory_order_relaxed);
    return __libc_malloc(size);
}

void *calloc(size_t count, size_t size) {
    atomic_fetch_add_explicit(&callocs, 1, memory_order_relaxed);
    return __libc_calloc(count, size);
}

void *realloc(void *pointer, size_t size) {
    atomic_fetch_add_explicit(&reallocs, 1, memory_order_relaxed);
    return __libc_realloc(pointer, size);
}

int posix_memalign(void **pointer, size_t alignment, size_t size) {
    atomic_fetch_add_explicit(&aligned, 1, memory_order_relaxed);
    *pointer = __libc_memalign(alignment, size);
    return *pointer ? 0 : 12;  // ENOMEM
}

void *aligned_alloc(size_t alignment, size_t size) {
    atomic_fetch_add_explicit(&aligned, 1, memory_order_relaxed);
    return __libc_memalign(alignment, size);
}

__attribute__((destructor)) static void report(void) {
    const char *path = getenv("ALLOC_COUNT_OUT");
    if (!path) return;
    FILE *out = fopen(path, "a");
    if (!out) return;
    long m = mallocs, c = callocs, r = reallocs, a = aligned;
    fprintf(out, "allocations %ld (malloc %ld calloc %ld realloc %ld aligned %ld)\n", m + c + r + a, m, c, r, a);
    fclose(out);
}
