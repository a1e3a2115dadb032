/* script_reader.c - what runs when the trainer is a #! script: the
 * interpreter and its argument as Linux reads them, the program
 * `#!/usr/bin/env COMMAND` runs, and the lookup of a command through PATH,
 * as execvp does it.  LD_PRELOAD reaches that program, not the script. */
#include "elf_inspect.h"
#include "inspect_internal.h"

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The last path component (the whole string if it has no slash). */
static const char *inspect_base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash != NULL ? slash + 1 : path;
}

/* ------------------------------------------------------------------------
 * PATH lookup, as execvp does it
 * ------------------------------------------------------------------------ */

static bool inspect_is_executable_file(const char *path)
{
    struct stat status;
    return stat(path, &status) == 0 && S_ISREG(status.st_mode) && access(path, X_OK) == 0;
}

int inspect_resolve_command(const char *name, char *out, size_t out_size)
{
    if (name == NULL || name[0] == '\0' || out == NULL || out_size == 0)
        return -1;
    if (strchr(name, '/') != NULL) {
        int written = snprintf(out, out_size, "%s", name);
        return written >= 0 && (size_t)written < out_size ? 0 : -1;
    }
    /* execvp's default when PATH is unset (glibc). */
    const char *search = getenv("PATH");
    if (search == NULL)
        search = "/bin:/usr/bin";
    const char *entry = search;
    for (;;) {
        const char *end = strchr(entry, ':');
        size_t length = end != NULL ? (size_t)(end - entry) : strlen(entry);
        /* An empty entry means the current directory. */
        int written = length == 0
                          ? snprintf(out, out_size, "./%s", name)
                          : snprintf(out, out_size, "%.*s/%s", (int)length, entry, name);
        if (written >= 0 && (size_t)written < out_size && inspect_is_executable_file(out))
            return 0;
        if (end == NULL)
            break;
        entry = end + 1;
    }
    out[0] = '\0';
    return -1;
}

/* ------------------------------------------------------------------------
 * Scripts
 * ------------------------------------------------------------------------ */

static bool inspect_is_blank(char c)
{
    return c == ' ' || c == '\t';
}

/* For "#!/usr/bin/env [OPTIONS] [NAME=VALUE...] COMMAND [ARGS]" the program
 * that runs is COMMAND.  Copies it into command, or returns -1 if the
 * argument names none.  env's -u and -C take a value; -S splits its value
 * into words, which the word loop does anyway. */
static int inspect_env_command(const char *argument, char *command, size_t command_size)
{
    const char *cursor = argument;
    bool skip_next_word = false;
    while (*cursor != '\0') {
        while (inspect_is_blank(*cursor))
            cursor++;
        if (*cursor == '\0')
            break;
        const char *word = cursor;
        while (*cursor != '\0' && !inspect_is_blank(*cursor))
            cursor++;
        size_t length = (size_t)(cursor - word);
        if (skip_next_word) {
            skip_next_word = false;
            continue;
        }
        if (word[0] == '-') {
            skip_next_word = (length == 2 && (word[1] == 'u' || word[1] == 'C'));
            continue;
        }
        if (memchr(word, '=', length) != NULL)
            continue;
        if (length >= command_size)
            return -1;
        memcpy(command, word, length);
        command[length] = '\0';
        return 0;
    }
    return -1;
}

/* Parses a #! line as Linux does: the interpreter path, then everything
 * after it up to the end of the line as one argument, both trimmed of
 * blanks. */
int inspect_read_script(struct inspect_elf_file *file, const char *head, size_t length,
                        char *error, size_t error_size)
{
    char line[INSPECT_HEAD_SIZE + 1];
    size_t line_length = 0;
    for (size_t i = 2; i < length && head[i] != '\n' && line_length < INSPECT_HEAD_SIZE; i++)
        line[line_length++] = head[i];
    line[line_length] = '\0';

    char *cursor = line;
    while (inspect_is_blank(*cursor))
        cursor++;
    char *interpreter = cursor;
    while (*cursor != '\0' && !inspect_is_blank(*cursor))
        cursor++;
    if (cursor == interpreter)
        return error_message(error, error_size, "%s: a #! line without an interpreter",
                            file->path);
    char *argument = NULL;
    if (*cursor != '\0') {
        *cursor++ = '\0';
        while (inspect_is_blank(*cursor))
            cursor++;
        char *end = cursor + strlen(cursor);
        while (end > cursor && inspect_is_blank(end[-1]))
            *--end = '\0';
        if (*cursor != '\0')
            argument = cursor;
    }

    file->kind = INSPECT_KIND_SCRIPT;
    file->interpreter = strdup(interpreter);
    if (file->interpreter == NULL)
        return error_message(error, error_size, "%s: out of memory", file->path);
    if (argument != NULL) {
        file->interpreter_argument = strdup(argument);
        if (file->interpreter_argument == NULL)
            return error_message(error, error_size, "%s: out of memory", file->path);
    }

    /* The program LD_PRELOAD reaches is the interpreter, or what env runs. */
    if (strcmp(inspect_base_name(interpreter), "env") == 0 && argument != NULL) {
        char command[INSPECT_HEAD_SIZE + 1];
        char resolved[PATH_MAX];
        if (inspect_env_command(argument, command, sizeof command) < 0)
            return 0;  /* env with options only: env itself runs */
        if (inspect_resolve_command(command, resolved, sizeof resolved) < 0)
            return 0;  /* script_program stays NULL: the report says so */
        file->script_program = strdup(resolved);
    } else {
        file->script_program = strdup(interpreter);
    }
    if (file->script_program == NULL)
        return error_message(error, error_size, "%s: out of memory", file->path);
    return 0;
}
