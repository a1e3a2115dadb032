/* path_normalize.c - absolute paths built lexically (see path_normalize.h). */
#include "path_normalize.h"

#include <string.h>

/* Appends one path component to out[0, *length), resolving "." and "..". */
static int path_append_component(char *out, size_t *length, size_t out_size,
                                 const char *component, size_t component_length)
{
    if (component_length == 0 || (component_length == 1 && component[0] == '.'))
        return 0;
    if (component_length == 2 && component[0] == '.' && component[1] == '.') {
        while (*length > 1 && out[*length - 1] != '/')
            (*length)--;
        if (*length > 1)
            (*length)--;
        out[*length] = '\0';
        return 0;
    }
    size_t needed = *length + (out[*length - 1] == '/' ? 0 : 1) + component_length + 1;
    if (needed > out_size)
        return -1;
    if (out[*length - 1] != '/')
        out[(*length)++] = '/';
    memcpy(out + *length, component, component_length);
    *length += component_length;
    out[*length] = '\0';
    return 0;
}

static int path_append(char *out, size_t *length, size_t out_size, const char *path)
{
    const char *cursor = path;
    while (*cursor) {
        const char *slash = strchr(cursor, '/');
        size_t component_length = slash ? (size_t)(slash - cursor) : strlen(cursor);
        if (path_append_component(out, length, out_size, cursor, component_length) != 0)
            return -1;
        cursor += component_length;
        if (*cursor == '/')
            cursor++;
    }
    return 0;
}

int path_normalize_absolute(const char *base, const char *path, char *out, size_t out_size)
{
    if (out_size < 2)
        return -1;
    strcpy(out, "/");
    size_t length = 1;
    if (path[0] != '/' && path_append(out, &length, out_size, base) != 0)
        return -1;
    return path_append(out, &length, out_size, path);
}
