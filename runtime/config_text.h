/* config_text.h - the words and numbers of the ADAPTDL_* contract, shared
 * by the variables' parsers (config.c), the ADAPTDL_DATA grammar
 * (data_entry.c), the typo warnings (config_typos.c) and whatever quotes a
 * value into a one-line message (glob_pattern.c, the session...).
 *
 * Who includes it: any module that reads or quotes the contract's text.
 * It is below config.h and includes nothing of the project's: config.c
 * includes it, so it must not include config.h. */
#ifndef ADAPTSHIM_CONFIG_TEXT_H
#define ADAPTSHIM_CONFIG_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CONFIG_COUNT_OF(array) (sizeof(array) / sizeof((array)[0]))

/* Room for one quoted value inside a message; longer values are cut. */
#define QUOTED_SIZE 128
/* Room for an "accepted: ..." list built from a table. */
#define LIST_SIZE 256

/* Copies `length` bytes of text into out for use between double quotes in a
 * one-line message: control bytes become \xNN (a newline inside a value must
 * not break the line), a double quote becomes \", and long values end in
 * "...".  Returns out. */
const char *config_quote_for_message(char *out, size_t out_size, const char *text,
                                     size_t length);

/* Appends ", item" (or just "item" to an empty list), cutting at out_size. */
void config_append_to_list(char *out, size_t out_size, const char *item);

enum number_status { NUMBER_OK, NUMBER_MALFORMED, NUMBER_TOO_SMALL, NUMBER_TOO_LARGE };

/* text[0..length) as an unsigned decimal in [minimum, maximum]: no sign, no
 * blanks, no hex, no trailing garbage. */
enum number_status config_parse_decimal_span(const char *text, size_t length, uint64_t minimum,
                                             uint64_t maximum, uint64_t *out);
enum number_status config_parse_decimal(const char *text, uint64_t minimum, uint64_t maximum,
                                        uint64_t *out);
/* What is wrong with a number, for a message ("must be at least 1", ...). */
const char *config_describe_number_problem(enum number_status status, uint64_t minimum);
/* A finite real number, the whole text. */
bool config_parse_finite_number(const char *text, double *out);

struct word_choice {
    const char *word;
    int value;
};

bool config_find_word_choice(const struct word_choice *choices, size_t count, const char *word,
                             int *value);
/* "a, b, c": the words of a table, for an "accepted: ..." list. */
const char *config_join_word_choices(char *out, size_t out_size,
                                     const struct word_choice *choices, size_t count);

/* The variables of config.c's table, in its order: how many, and the name
 * of the index-th (NULL past the last). */
size_t config_table_variable_count(void);
const char *config_table_variable_name(size_t index);

#endif
