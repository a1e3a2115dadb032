/* hints_file.c - a small strict JSON reader for ADAPTDL_HINTS_FILE (see
 * hints_file.h).  Recursive descent over RFC 8259's grammar with a depth
 * limit; only the members it needs are converted, everything else is
 * checked and skipped. */
#include "hints_file.h"

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Deeper nesting than any hints file has: refused rather than recursed. */
#define HINTS_MAX_DEPTH 32

struct hints_reader {
    const char *text;
    size_t length;
    size_t at;
    char *error;
    size_t error_size;
    bool failed;
};

static int hints_fail(struct hints_reader *reader, const char *format, ...)
    __attribute__((format(printf, 2, 3)));
static int hints_fail(struct hints_reader *reader, const char *format, ...)
{
    if (reader->failed)
        return -1;
    reader->failed = true;
    char what[256];
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(what, sizeof what, format, arguments);
    va_end(arguments);
    if (reader->at >= reader->length)
        snprintf(reader->error, reader->error_size, "at its end: %s", what);
    else
        snprintf(reader->error, reader->error_size, "byte %zu: %s", reader->at + 1, what);
    return -1;
}

static void hints_skip_space(struct hints_reader *reader)
{
    while (reader->at < reader->length) {
        char c = reader->text[reader->at];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
            return;
        reader->at++;
    }
}

/* The next byte after blanks, or 0 at the end. */
static char hints_peek(struct hints_reader *reader)
{
    hints_skip_space(reader);
    return reader->at < reader->length ? reader->text[reader->at] : 0;
}

static int hints_expect(struct hints_reader *reader, char wanted, const char *what)
{
    if (hints_peek(reader) != wanted)
        return hints_fail(reader, "expected %s", what);
    reader->at++;
    return 0;
}

static bool hints_is_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* A string; its raw bytes (escapes not decoded) are copied into `out`
 * when it is not NULL (truncated to out_size - 1; keys we look for are
 * short and contain no escapes). */
static int hints_string(struct hints_reader *reader, char *out, size_t out_size)
{
    if (hints_expect(reader, '"', "a string") != 0)
        return -1;
    size_t used = 0;
    while (reader->at < reader->length) {
        unsigned char c = (unsigned char)reader->text[reader->at];
        if (c == '"') {
            reader->at++;
            if (out != NULL)
                out[used] = '\0';
            return 0;
        }
        if (c < 0x20)
            return hints_fail(reader, "a control character inside a string");
        if (c == '\\') {
            reader->at++;
            char escaped = reader->at < reader->length ? reader->text[reader->at] : 0;
            if (escaped == 'u') {
                for (int i = 1; i <= 4; i++)
                    if (reader->at + i >= reader->length ||
                        !hints_is_hex(reader->text[reader->at + i]))
                        return hints_fail(reader, "a \\u escape without four hex digits");
                reader->at += 4;
            } else if (escaped == 0 || strchr("\"\\/bfnrt", escaped) == NULL) {
                return hints_fail(reader, "an unknown escape in a string");
            }
        }
        if (out != NULL && used + 1 < out_size)
            out[used++] = (char)c;
        reader->at++;
    }
    return hints_fail(reader, "a string that never ends");
}

static bool hints_is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* A JSON number, converted with strtod. */
static int hints_number(struct hints_reader *reader, double *value)
{
    hints_skip_space(reader);
    size_t start = reader->at, at = reader->at;
    const char *text = reader->text;
    size_t length = reader->length;
    if (at < length && text[at] == '-')
        at++;
    if (at < length && text[at] == '0') {
        at++;
    } else if (at < length && hints_is_digit(text[at])) {
        while (at < length && hints_is_digit(text[at]))
            at++;
    } else {
        return hints_fail(reader, "expected a number");
    }
    if (at < length && text[at] == '.') {
        at++;
        if (at >= length || !hints_is_digit(text[at]))
            return hints_fail(reader, "a number with no digit after its '.'");
        while (at < length && hints_is_digit(text[at]))
            at++;
    }
    if (at < length && (text[at] == 'e' || text[at] == 'E')) {
        at++;
        if (at < length && (text[at] == '+' || text[at] == '-'))
            at++;
        if (at >= length || !hints_is_digit(text[at]))
            return hints_fail(reader, "a number with no digit in its exponent");
        while (at < length && hints_is_digit(text[at]))
            at++;
    }
    char digits[64];
    if (at - start >= sizeof digits)
        return hints_fail(reader, "a number longer than %zu characters", sizeof digits - 1);
    memcpy(digits, text + start, at - start);
    digits[at - start] = '\0';
    *value = strtod(digits, NULL);
    reader->at = at;
    return 0;
}

static int hints_word(struct hints_reader *reader, const char *word)
{
    size_t length = strlen(word);
    if (reader->length - reader->at < length ||
        memcmp(reader->text + reader->at, word, length) != 0)
        return hints_fail(reader, "expected a JSON value");
    reader->at += length;
    return 0;
}

static int hints_skip_value(struct hints_reader *reader, int depth);

/* `{` members `}` or `[` values `]`, checked and skipped. */
static int hints_skip_container(struct hints_reader *reader, int depth, char close)
{
    if (depth >= HINTS_MAX_DEPTH)
        return hints_fail(reader, "values nested deeper than %d levels", HINTS_MAX_DEPTH);
    reader->at++;
    if (hints_peek(reader) == close) {
        reader->at++;
        return 0;
    }
    for (;;) {
        if (close == '}' &&
            (hints_string(reader, NULL, 0) != 0 || hints_expect(reader, ':', "':'") != 0))
            return -1;
        if (hints_skip_value(reader, depth + 1) != 0)
            return -1;
        char next = hints_peek(reader);
        reader->at++;
        if (next == close)
            return 0;
        if (next != ',') {
            reader->at--;
            return hints_fail(reader, close == '}' ? "expected ',' or '}'" : "expected ',' or ']'");
        }
    }
}

static int hints_skip_value(struct hints_reader *reader, int depth)
{
    double ignored;
    switch (hints_peek(reader)) {
    case '{':
        return hints_skip_container(reader, depth, '}');
    case '[':
        return hints_skip_container(reader, depth, ']');
    case '"':
        return hints_string(reader, NULL, 0);
    case 't':
        return hints_word(reader, "true");
    case 'f':
        return hints_word(reader, "false");
    case 'n':
        return hints_word(reader, "null");
    default:
        return hints_number(reader, &ignored);
    }
}

/* A key of goodput_by_replicas: a decimal replica count 1..64. */
static bool hints_replica_key(const char *key, uint32_t *replicas)
{
    if (key[0] < '1' || key[0] > '9' || strlen(key) > 2)
        return false;
    unsigned value = 0;
    for (const char *c = key; *c != '\0'; c++) {
        if (!hints_is_digit(*c))
            return false;
        value = value * 10 + (unsigned)(*c - '0');
    }
    if (value > REPLICA_CHOICE_MAX_REPLICAS)
        return false;
    *replicas = value;
    return true;
}

static int hints_goodput_table(struct hints_reader *reader, struct replica_goodputs *table)
{
    if (hints_peek(reader) != '{')
        return hints_fail(reader, "goodput_by_replicas is not an object");
    reader->at++;
    if (hints_peek(reader) == '}') {
        reader->at++;
        return 0;
    }
    for (;;) {
        char key[16];
        size_t key_at = reader->at;
        if (hints_string(reader, key, sizeof key) != 0)
            return -1;
        uint32_t replicas;
        if (!hints_replica_key(key, &replicas)) {
            reader->at = key_at;
            hints_skip_space(reader);
            return hints_fail(reader, "goodput_by_replicas has the key \"%s\"; accepted: "
                                      "replica counts from \"1\" to \"%d\"",
                              key, REPLICA_CHOICE_MAX_REPLICAS);
        }
        if (hints_expect(reader, ':', "':'") != 0)
            return -1;
        char first = hints_peek(reader);
        if (first == 'n') {
            if (hints_word(reader, "null") != 0)
                return -1;
            table->goodput[replicas] = NAN;
        } else if (first == '-' || hints_is_digit(first)) {
            if (hints_number(reader, &table->goodput[replicas]) != 0)
                return -1;
        } else {
            return hints_fail(reader, "expected a number or null as the goodput of %u replicas",
                              replicas);
        }
        char next = hints_peek(reader);
        reader->at++;
        if (next == '}')
            return 0;
        if (next != ',') {
            reader->at--;
            return hints_fail(reader, "expected ',' or '}' in goodput_by_replicas");
        }
    }
}

static int hints_top_object(struct hints_reader *reader, struct replica_hints *hints)
{
    bool have_table = false;
    if (hints_peek(reader) != '{')
        return hints_fail(reader, "expected a JSON object ('{')");
    reader->at++;
    if (hints_peek(reader) == '}') {
        reader->at++;
    } else {
        for (;;) {
            char key[64];
            if (hints_string(reader, key, sizeof key) != 0 ||
                hints_expect(reader, ':', "':'") != 0)
                return -1;
            if (strcmp(key, "goodput_by_replicas") == 0) {
                if (hints_goodput_table(reader, &hints->goodputs) != 0)
                    return -1;
                have_table = true;
            } else if (strcmp(key, "max_profiled_replicas") == 0) {
                double most;
                if (hints_number(reader, &most) != 0)
                    return -1;
                hints->max_profiled_replicas =
                    most >= 0 && most <= UINT32_MAX ? (uint32_t)most : 0;
            } else if (hints_skip_value(reader, 1) != 0) {
                return -1;
            }
            char next = hints_peek(reader);
            reader->at++;
            if (next == '}')
                break;
            if (next != ',') {
                reader->at--;
                return hints_fail(reader, "expected ',' or '}'");
            }
        }
    }
    if (hints_peek(reader) != 0)
        return hints_fail(reader, "text after the JSON object");
    if (!have_table)
        return hints_fail(reader, "no \"goodput_by_replicas\" member");
    return 0;
}

int hints_parse(const char *text, size_t length, struct replica_hints *hints, char *error,
                size_t error_size)
{
    struct hints_reader reader = {
        .text = text, .length = length, .error = error, .error_size = error_size};
    memset(hints, 0, sizeof *hints);
    replica_goodputs_clear(&hints->goodputs);
    if (error != NULL && error_size > 0)
        error[0] = '\0';
    if (memchr(text, '\0', length) != NULL) {
        reader.at = (size_t)((const char *)memchr(text, '\0', length) - text);
        hints_fail(&reader, "a NUL byte: not a text file");
    } else if (hints_top_object(&reader, hints) == 0) {
        return 0;
    }
    struct replica_hints empty = {.max_profiled_replicas = 0};
    replica_goodputs_clear(&empty.goodputs);
    *hints = empty;
    return -1;
}
