/* plain_reader_fortify.c - plain_reader built with _FORTIFY_SOURCE=2 (the
 * Makefile builds tools with -O2, which fortification needs): its reads go
 * through the __read_chk / __pread_chk / __fread_chk ... entry points, as in
 * trainers built on distributions that fortify by default. */
#undef _FORTIFY_SOURCE
#define _FORTIFY_SOURCE 2
#include "../trainers/plain_reader.c"
