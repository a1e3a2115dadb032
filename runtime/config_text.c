/* config_text.c - the words and numbers of the ADAPTDL_* contract: quoting
 * values into one-line messages, plain unsigned decimals, word choices (see
 * config_text.h).  Shared by config.c (the variables) and data_entry.c
 * (the ADAPTDL_DATA grammar). */
#include "config_text.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------
 * Messages
 * ---------------------------------------------------------------------- */

/* Copies text into out for use between double quotes in a one-line message.
 * Control bytes become \xNN (a newline inside a value must not break the
 * line), a double quote becomes \", and long values end in "...". */
const char *config_quote_for_message(char *out, size_t out_size, const char *text,
                                     size_t length)
{
    /* Longest escape (4) + "..." (3) + NUL (1) must always still fit. */
    const size_t reserve = 4 + 3 + 1;
    size_t used = 0;

    for (size_t i = 0; i < length; i++) {
        unsigned char c = (unsigned char)text[i];
        if (used + reserve > out_size) {
            memcpy(out + used, "...", 3);
            used += 3;
            break;
        }
        if (c < 0x20 || c == 0x7f) {
            used += (size_t)snprintf(out + used, out_size - used, "\\x%02x", c);
        } else if (c == '"') {
            out[used++] = '\\';
            out[used++] = '"';
        } else {
            out[used++] = (char)c;
        }
    }
    out[used] = '\0';
    return out;
}

/* Appends ", item" (or just "item" to an empty list), cutting at out_size. */
void config_append_to_list(char *out, size_t out_size, const char *item)
{
    size_t used = strlen(out);
    if (used < out_size)
        snprintf(out + used, out_size - used, "%s%s", used > 0 ? ", " : "", item);
}

/* ------------------------------------------------------------------------
 * Numbers and words
 * ---------------------------------------------------------------------- */

/* Parses text[0..length) as an unsigned decimal in [minimum, maximum].
 * Takes a length so that fields of "OFFSET,TYPE,UNIT" need no copy. */
enum number_status config_parse_decimal_span(const char *text, size_t length, uint64_t minimum,
                                             uint64_t maximum, uint64_t *out)
{
    uint64_t value = 0;

    if (length == 0)
        return NUMBER_MALFORMED;
    /* Check every byte first, so "99999999999999999999x" is called
     * malformed rather than too large. */
    for (size_t i = 0; i < length; i++)
        if (text[i] < '0' || text[i] > '9')
            return NUMBER_MALFORMED;
    for (size_t i = 0; i < length; i++) {
        unsigned digit = (unsigned)(text[i] - '0');
        if (value > (UINT64_MAX - digit) / 10)
            return NUMBER_TOO_LARGE;
        value = value * 10 + digit;
    }
    if (value < minimum)
        return NUMBER_TOO_SMALL;
    if (value > maximum)
        return NUMBER_TOO_LARGE;
    *out = value;
    return NUMBER_OK;
}

enum number_status config_parse_decimal(const char *text, uint64_t minimum, uint64_t maximum,
                                        uint64_t *out)
{
    return config_parse_decimal_span(text, strlen(text), minimum, maximum, out);
}

/* A finite number written entirely in text.  strtod alone would accept
 * leading blanks, "inf", "nan" and a prefix such as "30s".  strtod reads
 * the decimal point of LC_NUMERIC, which is still "C" when the shim parses
 * its configuration before the trainer's main. */
bool config_parse_finite_number(const char *text, double *out)
{
    char *end;
    double value;

    if (text[0] == '\0' || text[0] == ' ' || (text[0] >= '\t' && text[0] <= '\r'))
        return false;
    value = strtod(text, &end);
    if (*end != '\0' || !isfinite(value))
        return false;
    *out = value;
    return true;
}

bool config_find_word_choice(const struct word_choice *choices, size_t count, const char *word,
                             int *value)
{
    for (size_t i = 0; i < count; i++) {
        if (strcmp(choices[i].word, word) == 0) {
            *value = choices[i].value;
            return true;
        }
    }
    return false;
}

const char *config_join_word_choices(char *out, size_t out_size,
                                     const struct word_choice *choices, size_t count)
{
    out[0] = '\0';
    for (size_t i = 0; i < count; i++)
        config_append_to_list(out, out_size, choices[i].word);
    return out;
}

const char *config_describe_number_problem(enum number_status status, uint64_t minimum)
{
    if (status == NUMBER_OK)
        return NULL;
    if (status == NUMBER_TOO_LARGE)
        return "is too large";
    return minimum > 0 ? "is not a positive integer" : "is not an unsigned integer";
}

