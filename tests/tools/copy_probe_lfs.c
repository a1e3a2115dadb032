/* copy_probe_lfs.c - copy_probe built with _FILE_OFFSET_BITS=64: its
 * sendfile and fcntl calls bind to sendfile64 and fcntl64. */
#define _FILE_OFFSET_BITS 64
#include "copy_probe.c"
