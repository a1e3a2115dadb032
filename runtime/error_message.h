/* error_message.h - the one way the runtime (and the ELF inspector) writes
 * an error message for its caller: one line into the caller's buffer. */
#ifndef ADAPTSHIM_ERROR_MESSAGE_H
#define ADAPTSHIM_ERROR_MESSAGE_H

#include <stddef.h>

/* Formats into error[0, size) (nothing when error is NULL or size is 0);
 * newlines in what it embeds (file names, values) become spaces, so that
 * the message stays one line.  Returns -1, so that a failing function can
 * `return error_message(...)`. */
int error_message(char *error, size_t size, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

#endif
