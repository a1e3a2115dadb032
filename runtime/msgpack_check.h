/* msgpack_check.h - is a buffer exactly one complete msgpack object whose
 * containers and blobs all fit in it?  Checked on the raw bytes before
 * msgpack-c unpacks a state file, so that a truncated or lying file can
 * never make it allocate counts the buffer cannot hold. */
#ifndef ADAPTSHIM_MSGPACK_CHECK_H
#define ADAPTSHIM_MSGPACK_CHECK_H

#include <stddef.h>
#include <stdint.h>

/* 0, or -1 with a one-line message (truncation, an invalid type byte,
 * trailing bytes, a count larger than the bytes left). */
int msgpack_structure_check(const unsigned char *data, size_t size, char *error,
                            size_t error_size);

/* The `count`-byte big-endian number at bytes (msgpack's length fields). */
uint64_t msgpack_read_big_endian(const unsigned char *bytes, size_t count);

#endif
