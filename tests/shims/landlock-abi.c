/* LD_PRELOAD shim for the end-to-end tests: the Landlock ABI probe,
 * landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION), answers the version in
 * HARNESS_TEST_LANDLOCK_ABI, so that a kernel with a newer Landlock can stand in for an older
 * one. Every other call of syscall() is passed on to libc's. Built by the tests with cc. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/syscall.h>

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#endif
#define LANDLOCK_CREATE_RULESET_VERSION 1L

long syscall(long number, ...) {
    static long (*next)(long, ...);
    long a[6];
    va_list ap;
    va_start(ap, number);
    for (int i = 0; i < 6; i++) {
        a[i] = va_arg(ap, long);
    }
    va_end(ap);
    if (number == SYS_landlock_create_ruleset && a[0] == 0 && a[1] == 0 &&
        a[2] == LANDLOCK_CREATE_RULESET_VERSION) {
        const char *abi = getenv("HARNESS_TEST_LANDLOCK_ABI");
        if (abi != NULL && *abi != '\0') {
            return atol(abi);
        }
    }
    if (next == NULL) {
        next = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
    }
    return next(number, a[0], a[1], a[2], a[3], a[4], a[5]);
}
