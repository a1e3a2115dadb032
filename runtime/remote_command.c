/* remote_command.c - the command line of a replica on another host
 * (remote_command.h). */
#include "remote_command.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* A background list of a non-interactive shell reads /dev/null, so the
 * reader takes the channel as descriptor 3; $$ in it is the shell that
 * becomes the replica by exec. */
static const char remote_control_script[] =
    "exec 3<&0; "
    "{ while read -r name <&3; do kill -s \"$name\" $$; done; kill -s KILL $$; } "
    "</dev/null >/dev/null 2>&1 & "
    "exec \"$@\" </dev/null 3<&-";

struct line_buffer {
    char *text;
    size_t length, capacity;
    bool failed;
};

static void line_append(struct line_buffer *line, const char *text, size_t length)
{
    if (line->failed)
        return;
    if (line->length + length + 1 > line->capacity) {
        size_t capacity = line->capacity ? line->capacity : 256;
        while (capacity < line->length + length + 1)
            capacity *= 2;
        char *grown = realloc(line->text, capacity);
        if (grown == NULL) {
            line->failed = true;
            return;
        }
        line->text = grown;
        line->capacity = capacity;
    }
    memcpy(line->text + line->length, text, length);
    line->length += length;
    line->text[line->length] = '\0';
}

static void line_add(struct line_buffer *line, const char *text)
{
    line_append(line, text, strlen(text));
}

/* One word in single quotes; a quote inside is closed, escaped, reopened. */
static void line_add_quoted(struct line_buffer *line, const char *word)
{
    line_add(line, "'");
    for (const char *at = word; *at != '\0';) {
        size_t plain = strcspn(at, "'");
        line_append(line, at, plain);
        at += plain;
        if (*at == '\'') {
            line_add(line, "'\\''");
            at++;
        }
    }
    line_add(line, "'");
}

char *remote_command_line(const char *directory, char *const variables[],
                          char *const command[])
{
    struct line_buffer line = {0};
    if (directory != NULL) {
        line_add(&line, "cd ");
        line_add_quoted(&line, directory);
        line_add(&line, " && ");
    }
    line_add(&line, "exec env");
    for (size_t i = 0; variables != NULL && variables[i] != NULL; i++) {
        line_add(&line, " ");
        line_add_quoted(&line, variables[i]);
    }
    line_add(&line, " sh -c ");
    line_add_quoted(&line, remote_control_script);
    line_add(&line, " adaptdl-replica");
    for (size_t i = 0; command[i] != NULL; i++) {
        line_add(&line, " ");
        line_add_quoted(&line, command[i]);
    }
    if (line.failed) {
        free(line.text);
        return NULL;
    }
    return line.text;
}
