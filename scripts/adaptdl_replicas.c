/* adaptdl_replicas.c - adaptdl-replicas, the launcher's helper that picks
 * the replica count of the next launch from ADAPTDL_HINTS_FILE (adaptdl-wrap(1)
 * "The replica count"; the rule is runtime/replica_choice.h, the reader
 * runtime/hints_file.h).
 *
 *   adaptdl-replicas choose HINTS MIN MAX CURRENT [--speedup S]
 *
 * prints the count on stdout and one line on stderr saying why.  Status 0;
 * 1 when HINTS cannot be read or is malformed (then the current count,
 * moved into MIN..MAX, is printed, after the error line); 2 for bad
 * arguments.  A missing HINTS file is no error: there are no hints yet,
 * and the current count is kept. */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hints_file.h"
#include "replica_choice.h"

#define PROGRAM "adaptdl-replicas"
/* A hints file is a few hundred bytes; anything this large is not one. */
#define HINTS_MAX_BYTES (1 << 20)

static void usage_error(const char *what)
{
    fprintf(stderr,
            PROGRAM ": %s; usage: " PROGRAM " choose HINTS MIN MAX CURRENT [--speedup S]\n",
            what);
    exit(2);
}

static uint32_t parse_count(const char *name, const char *text)
{
    char *end = NULL;
    errno = 0;
    unsigned long value = strtoul(text, &end, 10);
    if (text[0] < '0' || text[0] > '9' || *end != '\0' || errno != 0 || value < 1 ||
        value > 1048576) {
        char what[160];
        snprintf(what, sizeof what, "%s \"%.40s\" is not accepted: an integer from 1 to 1048576",
                 name, text);
        usage_error(what);
    }
    return (uint32_t)value;
}

static double parse_speedup(const char *text)
{
    char *end = NULL;
    double value = strtod(text, &end);
    if (text[0] == '\0' || *end != '\0' || !isfinite(value) || value < 1) {
        char what[160];
        snprintf(what, sizeof what, "--speedup \"%.40s\" is not accepted: a finite number >= 1",
                 text);
        usage_error(what);
    }
    return value;
}

/* The whole file into a buffer the caller frees; NULL with errno set
 * (ENOENT: no hints yet; EFBIG: too large). */
static char *read_hints(const char *path, size_t *length)
{
    FILE *file = fopen(path, "rb");
    if (file == NULL)
        return NULL;
    char *text = malloc(HINTS_MAX_BYTES + 1);
    if (text == NULL) {
        fclose(file);
        errno = ENOMEM;
        return NULL;
    }
    size_t used = fread(text, 1, HINTS_MAX_BYTES + 1, file);
    int failed = ferror(file);
    fclose(file);
    if (failed || used > HINTS_MAX_BYTES) {
        free(text);
        errno = failed ? EIO : EFBIG;
        return NULL;
    }
    *length = used;
    return text;
}

static int choose(const char *path, uint32_t minimum, uint32_t maximum, uint32_t current,
                  double speedup)
{
    struct replica_hints hints;
    memset(&hints, 0, sizeof hints);
    replica_goodputs_clear(&hints.goodputs);
    int status = 0;
    size_t length = 0;
    char *text = read_hints(path, &length);
    bool no_hints_yet = text == NULL && errno == ENOENT;
    if (text == NULL && !no_hints_yet) {
        fprintf(stderr, PROGRAM ": hints file %s cannot be read: %s; the replica count is kept\n",
                path, strerror(errno));
        status = 1;
    } else if (text != NULL) {
        char error[320];
        if (hints_parse(text, length, &hints, error, sizeof error) != 0) {
            fprintf(stderr, PROGRAM ": hints file %s is malformed: %s; the replica count is "
                            "kept\n",
                    path, error);
            status = 1;
        }
    }
    free(text);
    struct replica_choice choice;
    /* arguments were checked: this cannot fail */
    if (replica_choice_pick(&hints.goodputs, minimum, maximum, current, speedup, &choice) != 0)
        usage_error("MIN is above MAX");
    if (status == 0) {
        char line[320];
        if (no_hints_yet)
            fprintf(stderr, "%u %s%s kept: no hints yet (%s does not exist)\n", choice.replicas,
                    choice.replicas == 1 ? "replica" : "replicas",
                    choice.clamped ? " (moved into range)" : "", path);
        else
            fprintf(stderr, "%s\n", replica_choice_describe(&choice, line, sizeof line));
    }
    printf("%u\n", choice.replicas);
    return status;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        usage_error("no command");
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        printf("usage: " PROGRAM " choose HINTS MIN MAX CURRENT [--speedup S]\n\n"
               "Prints the replica count to launch with next: among MIN..MAX, the count with\n"
               "the best predicted goodput in the hints file (ADAPTDL_HINTS_FILE), when it\n"
               "beats the CURRENT count's by more than S (default %.2f, as ADAPTDL_SPEEDUP);\n"
               "else CURRENT.  One line on stderr says why.  Status 0; 1 when HINTS is\n"
               "malformed (CURRENT is printed); 2 for bad arguments.\n",
               REPLICA_CHOICE_DEFAULT_SPEEDUP);
        return 0;
    }
    if (strcmp(argv[1], "choose") != 0) {
        char what[128];
        snprintf(what, sizeof what, "unknown command \"%.40s\"", argv[1]);
        usage_error(what);
    }
    if (argc != 6 && !(argc == 8 && strcmp(argv[6], "--speedup") == 0))
        usage_error("choose takes HINTS MIN MAX CURRENT and optionally --speedup S");
    if (argv[2][0] == '\0')
        usage_error("HINTS is an empty path");
    uint32_t minimum = parse_count("MIN", argv[3]);
    uint32_t maximum = parse_count("MAX", argv[4]);
    uint32_t current = parse_count("CURRENT", argv[5]);
    double speedup = argc == 8 ? parse_speedup(argv[7]) : REPLICA_CHOICE_DEFAULT_SPEEDUP;
    if (minimum > maximum)
        usage_error("MIN is above MAX");
    return choose(argv[2], minimum, maximum, current, speedup);
}
