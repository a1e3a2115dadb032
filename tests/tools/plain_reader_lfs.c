/* plain_reader_lfs.c - plain_reader built with _FILE_OFFSET_BITS=64: its
 * open, lseek, pread, fstat, stat, fopen and mmap calls bind to the *64
 * entry points (open64, pread64, fstat64, fopen64, mmap64...). */
#define _FILE_OFFSET_BITS 64
#include "../trainers/plain_reader.c"
