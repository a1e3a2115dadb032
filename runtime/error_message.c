/* error_message.c - one-line error messages (see error_message.h). */
#include "error_message.h"

#include <stdarg.h>
#include <stdio.h>

int error_message(char *error, size_t size, const char *format, ...)
{
    if (error == NULL || size == 0)
        return -1;
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(error, size, format, arguments);
    va_end(arguments);
    for (char *cursor = error; *cursor != '\0'; cursor++)
        if (*cursor == '\n' || *cursor == '\r')
            *cursor = ' ';
    return -1;
}
