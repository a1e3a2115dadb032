/* mmap_probe.c - maps a fixed-record data file and prints what the mapping
 * holds: the probe of the mmap rule (adaptshim(7) "Mappings").
 *
 *   mmap_probe MODE PATH HEADER RECORD [PASSES=1]
 *
 * Each pass opens PATH, takes its size from fstat, maps it, prints
 *   "pass P size S hash H" (H: 64-bit FNV-1a of the S mapped bytes, hex)
 * and then "id I" for every record (I: its first 8 bytes, little-endian),
 * unmaps it and closes the file: a trainer that reopens its file per epoch.
 * MODE:
 *   private        mmap(PROT_READ, MAP_PRIVATE) of the whole file
 *   private64      the same through mmap64
 *   shared-read    mmap(PROT_READ, MAP_SHARED), as numpy's memmap(mode='r')
 *   private-write  mmap(PROT_READ|PROT_WRITE, MAP_PRIVATE)
 *   shared-write   mmap(PROT_READ|PROT_WRITE, MAP_SHARED) (the file is opened O_RDONLY)
 *   window         mmap of 5000 bytes from offset 4096 only; prints
 *                  "window bytes B hash H zeros Z" instead of records: B the
 *                  bytes before the view's end, H their hash, Z "yes" when
 *                  the rest of the mapping's last page reads as zeros
 *   reuse          private, then after munmap(map, size) an anonymous page
 *                  of the program's own is mapped where the view's last
 *                  page was, and
 *                  grown with mremap: prints "reuse mremap ok", or "reuse
 *                  mremap failed: ERRNO-NAME" (the memory is no view any
 *                  more, whatever the unmapped length's last page held)
 * A failing mmap prints "mmap failed: ERRNO-NAME" and exits with status 3;
 * other errors exit 1, usage 2. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "probe_common.h"

#define WINDOW_OFFSET 4096
#define WINDOW_LENGTH 5000

static void fail(const char *what, const char *path)
{
    fprintf(stderr, "mmap_probe: %s %s: %s\n", what, path, strerror(errno));
    exit(1);
}

static const char *errno_name(int error)
{
    switch (error) {
    case EACCES: return "EACCES";
    case ENOMEM: return "ENOMEM";
    case EINVAL: return "EINVAL";
    case ENODEV: return "ENODEV";
    default: return "other";
    }
}

static void *map_or_exit(const char *mode, size_t length, int fd, off_t offset)
{
    int protection = PROT_READ;
    int flags = MAP_PRIVATE;
    if (strcmp(mode, "shared-read") == 0 || strcmp(mode, "shared-write") == 0)
        flags = MAP_SHARED;
    if (strstr(mode, "-write") != NULL)
        protection |= PROT_WRITE;
    void *map = strcmp(mode, "private64") == 0
                    ? mmap64(NULL, length, protection, flags, fd, (off64_t)offset)
                    : mmap(NULL, length, protection, flags, fd, offset);
    if (map == MAP_FAILED) {
        printf("mmap failed: %s\n", errno_name(errno));
        exit(3);
    }
    return map;
}

static void print_records(const unsigned char *map, size_t size, size_t header, size_t record)
{
    for (size_t at = header; at + record <= size; at += record) {
        uint64_t id = 0;
        for (int b = 0; b < 8; b++)
            id |= (uint64_t)map[at + (size_t)b] << (8 * b);
        printf("id %" PRIu64 "\n", id);
    }
}

static void probe_window(const char *path, int fd, size_t size)
{
    long page = sysconf(_SC_PAGESIZE);
    unsigned char *map = map_or_exit("private", WINDOW_LENGTH, fd, WINDOW_OFFSET);
    size_t in_view = size > WINDOW_OFFSET ? size - WINDOW_OFFSET : 0;
    if (in_view > WINDOW_LENGTH)
        in_view = WINDOW_LENGTH;
    size_t last_page_end = (WINDOW_LENGTH + (size_t)page - 1) / (size_t)page * (size_t)page;
    size_t valid_end = (in_view + (size_t)page - 1) / (size_t)page * (size_t)page;
    if (valid_end > last_page_end)
        valid_end = last_page_end;
    const char *zeros = "yes";
    for (size_t i = in_view; i < valid_end; i++)
        if (map[i] != 0)
            zeros = "no";
    printf("window bytes %zu hash %016" PRIx64 " zeros %s\n", in_view, probe_fnv1a(map, in_view),
           zeros);
    if (munmap(map, WINDOW_LENGTH) != 0)
        fail("munmap of", path);
}

/* The program's own anonymous page where a view was mapped and unmapped:
 * growing it is none of the shim's business. */
static void probe_reuse(void *where)
{
    long page = sysconf(_SC_PAGESIZE);
    void *own = mmap(where, (size_t)page, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (own == MAP_FAILED || own != where) {
        printf("reuse mmap failed: %s\n", errno_name(errno));
        exit(3);
    }
    void *grown = mremap(own, (size_t)page, 2 * (size_t)page, MREMAP_MAYMOVE);
    if (grown == MAP_FAILED) {
        printf("reuse mremap failed: %s\n", errno_name(errno));
        munmap(own, (size_t)page);
        return;
    }
    printf("reuse mremap ok\n");
    munmap(grown, 2 * (size_t)page);
}

static void probe_pass(const char *mode, const char *path, unsigned pass, size_t header,
                       size_t record)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        fail("open", path);
    struct stat status;
    if (fstat(fd, &status) != 0)
        fail("fstat", path);
    size_t size = (size_t)status.st_size;
    if (strcmp(mode, "window") == 0) {
        probe_window(path, fd, size);
    } else if (size > 0) {
        bool reuse = strcmp(mode, "reuse") == 0;
        unsigned char *map = map_or_exit(reuse ? "private" : mode, size, fd, 0);
        printf("pass %u size %zu hash %016" PRIx64 "\n", pass, size, probe_fnv1a(map, size));
        print_records(map, size, header, record);
        if (munmap(map, size) != 0)
            fail("munmap of", path);
        long page = sysconf(_SC_PAGESIZE);
        if (reuse)
            probe_reuse(map + (size - 1) / (size_t)page * (size_t)page);
    }
    close(fd);
}

int main(int argc, char **argv)
{
    if (argc < 5 || argc > 6) {
        fprintf(stderr, "usage: %s MODE PATH HEADER RECORD [PASSES]\n", argv[0]);
        return 2;
    }
    size_t header = strtoull(argv[3], NULL, 10);
    size_t record = strtoull(argv[4], NULL, 10);
    unsigned passes = argc == 6 ? (unsigned)strtoul(argv[5], NULL, 10) : 1;
    if (record == 0) {
        fprintf(stderr, "mmap_probe: RECORD must be at least 1\n");
        return 2;
    }
    for (unsigned pass = 0; pass < passes; pass++)
        probe_pass(argv[1], argv[2], pass, header, record);
    return 0;
}
