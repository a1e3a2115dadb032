/* real_probe.c - what a wrapper does when the shim cannot find the function
 * it wraps (tests/integration/test_real_functions.c).
 *
 *   real_probe optional LIB   statx twice through the shim's own statx
 *   real_probe required LIB   close(-1) through the shim's own close
 *   real_probe mpi            MPI_Barrier in a process without any MPI library
 *
 * optional and required run with LD_PRELOAD="LIBC LIB": libc ahead of the
 * shim, so that the shim's dlsym(RTLD_NEXT) finds nothing after itself, and
 * the program's own calls bind to libc.  The probe reaches the shim's
 * definitions through dlopen(LIB, RTLD_NOLOAD) and dlsym on that handle.
 * mpi runs with the shim preloaded as usual; the probe does not link libmpi
 * and finds MPI_Barrier, the shim's, with dlsym(RTLD_DEFAULT).
 *
 * Output: "statx RESULT ERRNO" per call; "close RESULT ERRNO" or "barrier
 * RESULT" should those calls ever return.  Usage errors: status 2; a symbol
 * not found: 3. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

typedef int (*statx_function)(int, const char *, int, unsigned, struct statx *);
typedef int (*close_function)(int);

static void *shim_symbol(const char *library, const char *name)
{
    void *handle = dlopen(library, RTLD_NOW | RTLD_NOLOAD);
    void *symbol = handle != NULL ? dlsym(handle, name) : NULL;
    if (symbol == NULL) {
        fprintf(stderr, "real_probe: %s not found in %s (is it preloaded?)\n", name, library);
        return NULL;
    }
    return symbol;
}

typedef int (*barrier_function)(void *);

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "mpi") == 0) {
        barrier_function barrier = (barrier_function)dlsym(RTLD_DEFAULT, "MPI_Barrier");
        if (barrier == NULL) {
            fprintf(stderr, "real_probe: MPI_Barrier not found (is the shim preloaded?)\n");
            return 3;
        }
        fflush(stdout);
        printf("barrier %d\n", barrier(NULL));
        return fflush(stdout) == 0 ? 0 : 1;
    }
    if (argc != 3 || (strcmp(argv[1], "optional") != 0 && strcmp(argv[1], "required") != 0)) {
        fprintf(stderr, "usage: real_probe optional|required LIBRARY, or real_probe mpi\n");
        return 2;
    }
    if (strcmp(argv[1], "optional") == 0) {
        statx_function shim_statx = (statx_function)shim_symbol(argv[2], "statx");
        if (shim_statx == NULL)
            return 3;
        for (int call = 0; call < 2; call++) {
            struct statx status;
            errno = 0;
            int result = shim_statx(AT_FDCWD, "/", 0, STATX_SIZE, &status);
            printf("statx %d %d\n", result, errno);
        }
        return fflush(stdout) == 0 ? 0 : 1;
    }
    close_function shim_close = (close_function)shim_symbol(argv[2], "close");
    if (shim_close == NULL)
        return 3;
    fflush(stdout);
    int result = shim_close(-1);
    printf("close %d %d\n", result, errno);
    return fflush(stdout) == 0 ? 0 : 1;
}
