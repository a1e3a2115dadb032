/* fd_probe_lfs.c - fd_probe built with _FILE_OFFSET_BITS=64: its pread,
 * preadv, preadv2, lseek, fstat and fcntl calls bind to the *64 entry points
 * (pread64, preadv64, preadv64v2, lseek64, fstat64, fcntl64...). */
#define _FILE_OFFSET_BITS 64
#include "fd_probe.c"
