/* injection.c - reads and rewrites the trainer's batch-size and learning-rate
 * arguments (adaptshim(7) "BATCH-SIZE CONTROL"); the rules are in injection.h.
 *
 * Two pieces do the work.  find_next_flag_occurrence() walks argv exactly
 * once per caller, yielding each occurrence of the flag with where its value
 * is; reading and rewriting both loop over it, so they can never disagree
 * about what counts as the flag.  The rewritten arrays are built in one
 * allocation: a first pass measures the bytes of the new strings, a second
 * fills the pointer array and copies the strings right behind it.  Freeing is
 * then a single free(), and no failure can leave half the strings allocated.
 *
 * Messages follow config.c's shape, on one line:
 *
 *     VARIABLE (argv:FLAG): what is wrong with "value"; accepted: ... */
#include "config_text.h"
#include "error_message.h"
#include "injection.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Room for one quoted value or flag inside a message; longer ones are cut. */
#define QUOTED_SIZE 128
/* Room for "ADAPTDL_BSZ_ARG (argv:--batch-size)". */
#define TARGET_DESCRIPTION_SIZE (QUOTED_SIZE + 32)

/* ------------------------------------------------------------------------
 * Messages
 * ---------------------------------------------------------------------- */

/* Quotes text for a one-line message (see config_quote_for_message). */
static const char *quote_for_message(char *out, size_t out_size, const char *text)
{
    return config_quote_for_message(out, out_size, text, strlen(text));
}

const char *injection_variable_name(enum injection_quantity quantity)
{
    return quantity == INJECTION_LEARNING_RATE ? "ADAPTDL_LR_ARG" : "ADAPTDL_BSZ_ARG";
}

static const char *injection_kind_prefix(enum injection_kind kind)
{
    switch (kind) {
    case INJECT_ARGV:
        return "argv:";
    case INJECT_ENV:
        return "env:";
    case INJECT_NONE:
        break;
    }
    return "";
}

/* "ADAPTDL_BSZ_ARG (argv:--batch-size)": the start of every message. */
static const char *describe_target(char *out, size_t out_size,
                                   const struct injection_target *target,
                                   enum injection_quantity quantity)
{
    char quoted_name[QUOTED_SIZE];
    const char *name = target->name != NULL ? target->name : "";

    snprintf(out, out_size, "%s (%s%s)", injection_variable_name(quantity),
             injection_kind_prefix(target->kind),
             quote_for_message(quoted_name, sizeof quoted_name, name));
    return out;
}

static const char *quantity_noun(enum injection_quantity quantity)
{
    return quantity == INJECTION_LEARNING_RATE ? "a learning rate" : "a batch size";
}

static const char *accepted_values(enum injection_quantity quantity)
{
    if (quantity == INJECTION_LEARNING_RATE)
        return "a finite decimal number such as 0.1 or 1e-3 (no hex, inf, nan or blanks)";
    return "a positive decimal integer such as 32, at most 1099511627776 (digits only)";
}

/* `location` is "argv[3]" or "its environment". */
static int report_bad_value(const struct injection_target *target,
                            enum injection_quantity quantity, const char *bad_value,
                            const char *location, char *error, size_t error_size)
{
    char description[TARGET_DESCRIPTION_SIZE];
    char quoted_value[QUOTED_SIZE];

    return error_message(error, error_size,
                        "%s: the trainer's value \"%s\" in %s is not %s; accepted: %s",
                        describe_target(description, sizeof description, target, quantity),
                        quote_for_message(quoted_value, sizeof quoted_value, bad_value),
                        location, quantity_noun(quantity), accepted_values(quantity));
}

/* "-b", not "--" or "-bs": the flags that also take getopt's attached
 * form -bVALUE. */
static bool is_single_letter_short_flag(const char *flag)
{
    return flag[0] == '-' && flag[1] != '-' && flag[1] != '\0' && flag[2] == '\0';
}

static int report_missing_value(const struct injection_target *target,
                                enum injection_quantity quantity, int flag_index,
                                char *error, size_t error_size)
{
    char description[TARGET_DESCRIPTION_SIZE];
    char quoted_flag[QUOTED_SIZE];
    const char *flag = quote_for_message(quoted_flag, sizeof quoted_flag, target->name);

    if (is_single_letter_short_flag(target->name))
        return error_message(error, error_size,
                            "%s: the flag in argv[%d] is the last argument and has no value; "
                            "accepted: %s VALUE, %s=VALUE or %sVALUE",
                            describe_target(description, sizeof description, target, quantity),
                            flag_index, flag, flag, flag);
    return error_message(error, error_size,
                        "%s: the flag in argv[%d] is the last argument and has no value; "
                        "accepted: %s VALUE or %s=VALUE",
                        describe_target(description, sizeof description, target, quantity),
                        flag_index, flag, flag);
}

static int report_wrong_kind(const struct injection_target *target,
                             enum injection_quantity quantity, const char *needed,
                             char *error, size_t error_size)
{
    char description[TARGET_DESCRIPTION_SIZE];

    return error_message(error, error_size, "%s: not an %s target, so it cannot be rewritten here",
                        describe_target(description, sizeof description, target, quantity),
                        needed);
}

/* ------------------------------------------------------------------------
 * Values
 * ---------------------------------------------------------------------- */

/* Digits only, no sign, no blanks: a silently misread batch size is worse
 * than a refusal to start.  Checking the limit after every digit keeps the
 * next multiplication far from overflow. */
static bool parse_batch_size(const char *text, double *value)
{
    uint64_t number = 0;

    if (*text == '\0')
        return false;
    for (const char *p = text; *p != '\0'; p++) {
        if (*p < '0' || *p > '9')
            return false;
        number = number * 10 + (uint64_t)(*p - '0');
        if (number > INJECTION_BATCH_SIZE_LIMIT)
            return false;
    }
    if (number == 0)
        return false;
    *value = (double)number;
    return true;
}

/* strtod on a plain decimal: the character set rules out hex, inf, nan and
 * leading blanks, which strtod would otherwise take; the end pointer rules
 * out trailing garbage, isfinite() an overflow such as 1e999. */
static bool parse_learning_rate(const char *text, double *value)
{
    char *end;
    double number;

    if (*text == '\0' || text[strspn(text, "0123456789.eE+-")] != '\0')
        return false;
    number = strtod(text, &end);
    if (end == text || *end != '\0' || !isfinite(number))
        return false;
    *value = number;
    return true;
}

static bool parse_injected_value(enum injection_quantity quantity, const char *text,
                                 double *value)
{
    if (quantity == INJECTION_LEARNING_RATE)
        return parse_learning_rate(text, value);
    return parse_batch_size(text, value);
}

/* ------------------------------------------------------------------------
 * Finding the flag in argv
 * ---------------------------------------------------------------------- */

enum flag_form {
    FLAG_FORM_SEPARATE,   /* FLAG VALUE */
    FLAG_FORM_EQUALS,     /* FLAG=VALUE */
    FLAG_FORM_ATTACHED,   /* -XVALUE, single-letter short flags only */
};

/* One occurrence of the flag.  The value is the tail of argv[value_index]
 * after its first kept_length bytes: the whole next argument for the
 * separate form, the part after "FLAG=" or "-X" for the others. */
struct flag_occurrence {
    enum flag_form form;
    int flag_index;
    int value_index;
    size_t kept_length;
    const char *value;    /* NULL: the flag is the last argument */
};

static bool is_end_of_options(const char *argument)
{
    return strcmp(argument, "--") == 0;
}

/* An attached value must start like a number, or `-bias` would be `-b`. */
static bool starts_like_number(char c)
{
    return (c >= '0' && c <= '9') || c == '.' || c == '+' || c == '-';
}

/* True when argument is the flag in one of its forms; *value_offset is where
 * an attached value starts (unused for the separate form). */
static bool match_flag_argument(const char *flag, const char *argument, enum flag_form *form,
                                size_t *value_offset)
{
    size_t flag_length = strlen(flag);

    if (strncmp(argument, flag, flag_length) != 0)
        return false;
    if (argument[flag_length] == '\0') {
        *form = FLAG_FORM_SEPARATE;
        *value_offset = 0;
        return true;
    }
    if (argument[flag_length] == '=') {
        *form = FLAG_FORM_EQUALS;
        *value_offset = flag_length + 1;
        return true;
    }
    if (is_single_letter_short_flag(flag) && starts_like_number(argument[flag_length])) {
        *form = FLAG_FORM_ATTACHED;
        *value_offset = flag_length;
        return true;
    }
    return false;
}

/* Yields the next occurrence of flag at or after argv[*cursor] and moves the
 * cursor past it (and past its value, in the separate form, so a value is
 * never mistaken for a flag).  False at the end of argv or at `--`. */
static bool find_next_flag_occurrence(const char *flag, int argc, char *const argv[],
                                      int *cursor, struct flag_occurrence *occurrence)
{
    enum flag_form form;
    size_t value_offset;

    for (int index = *cursor; index < argc && argv[index] != NULL; index++) {
        const char *argument = argv[index];
        if (is_end_of_options(argument))
            break;
        if (!match_flag_argument(flag, argument, &form, &value_offset))
            continue;
        occurrence->form = form;
        occurrence->flag_index = index;
        if (form == FLAG_FORM_SEPARATE) {
            bool has_next = index + 1 < argc && argv[index + 1] != NULL;
            occurrence->value_index = index + 1;
            occurrence->kept_length = 0;
            occurrence->value = has_next ? argv[index + 1] : NULL;
            *cursor = index + 2;
        } else {
            occurrence->value_index = index;
            occurrence->kept_length = value_offset;
            occurrence->value = argument + value_offset;
            *cursor = index + 1;
        }
        return true;
    }
    *cursor = argc;
    return false;
}

/* ------------------------------------------------------------------------
 * Reading
 * ---------------------------------------------------------------------- */

static bool target_has_name(const struct injection_target *target)
{
    return target != NULL && target->name != NULL && target->name[0] != '\0';
}

/* The value of NAME in envp, first entry first (getenv's rule); NULL when
 * absent. */
static const char *lookup_environment(char *const envp[], const char *name)
{
    size_t name_length = strlen(name);

    if (envp == NULL)
        return NULL;
    for (size_t i = 0; envp[i] != NULL; i++) {
        if (strncmp(envp[i], name, name_length) == 0 && envp[i][name_length] == '=')
            return envp[i] + name_length + 1;
    }
    return NULL;
}

static int read_argv_value(const struct injection_target *target,
                           enum injection_quantity quantity, int argc, char *const argv[],
                           double *value, bool *present, char *error, size_t error_size)
{
    struct flag_occurrence occurrence;
    int cursor = 1;   /* argv[0] is the program */
    double last_value = NAN;
    bool found = false;

    if (argv == NULL)
        return 0;
    while (find_next_flag_occurrence(target->name, argc, argv, &cursor, &occurrence)) {
        char location[32];
        if (occurrence.value == NULL)
            return report_missing_value(target, quantity, occurrence.flag_index, error,
                                        error_size);
        snprintf(location, sizeof location, "argv[%d]", occurrence.value_index);
        if (!parse_injected_value(quantity, occurrence.value, &last_value))
            return report_bad_value(target, quantity, occurrence.value, location, error,
                                    error_size);
        found = true;
    }
    if (found) {
        *value = last_value;
        *present = true;
    }
    return 0;
}

static int read_environment_value(const struct injection_target *target,
                                  enum injection_quantity quantity, char *const envp[],
                                  double *value, bool *present, char *error,
                                  size_t error_size)
{
    const char *text = lookup_environment(envp, target->name);
    double parsed;

    if (text == NULL)
        return 0;
    if (!parse_injected_value(quantity, text, &parsed))
        return report_bad_value(target, quantity, text, "its environment", error, error_size);
    *value = parsed;
    *present = true;
    return 0;
}

int injection_read_value(const struct injection_target *target,
                         enum injection_quantity quantity, int argc, char *const argv[],
                         char *const envp[], double *value, bool *present, char *error,
                         size_t error_size)
{
    *value = NAN;
    *present = false;
    if (target == NULL || target->kind == INJECT_NONE)
        return 0;
    if (!target_has_name(target))
        return error_message(error, error_size, "%s: the target names no flag or variable",
                            injection_variable_name(quantity));
    if (target->kind == INJECT_ARGV)
        return read_argv_value(target, quantity, argc, argv, value, present, error,
                               error_size);
    return read_environment_value(target, quantity, envp, value, present, error, error_size);
}

/* ------------------------------------------------------------------------
 * Rewriting
 * ---------------------------------------------------------------------- */

/* Copies prefix_length bytes of prefix, then suffix and a NUL, to *storage;
 * returns the copy and moves *storage past it. */
static char *store_joined(char **storage, const char *prefix, size_t prefix_length,
                          const char *suffix)
{
    char *copy = *storage;
    size_t suffix_length = strlen(suffix);

    memcpy(copy, prefix, prefix_length);
    memcpy(copy + prefix_length, suffix, suffix_length + 1);
    *storage = copy + prefix_length + suffix_length + 1;
    return copy;
}

/* First pass: counts the occurrences and the bytes their new strings take
 * (kept prefix + new value + NUL each); -1 when a flag has no value. */
static int measure_argv_rewrite(const struct injection_target *target,
                                enum injection_quantity quantity, int argc, char *const argv[],
                                const char *new_value, int *occurrence_count,
                                size_t *string_bytes, char *error, size_t error_size)
{
    struct flag_occurrence occurrence;
    int cursor = 1;

    *occurrence_count = 0;
    *string_bytes = 0;
    while (find_next_flag_occurrence(target->name, argc, argv, &cursor, &occurrence)) {
        if (occurrence.value == NULL)
            return report_missing_value(target, quantity, occurrence.flag_index, error,
                                        error_size);
        *occurrence_count += 1;
        *string_bytes += occurrence.kept_length + strlen(new_value) + 1;
    }
    return 0;
}

/* Second pass when the flag occurs: same arguments, each value replaced. */
static void fill_replaced_argv(const char *flag, int argc, char *const argv[],
                               const char *new_value, char **new_argv, char *storage)
{
    struct flag_occurrence occurrence;
    int cursor = 1;

    for (int index = 0; index < argc; index++)
        new_argv[index] = argv[index];
    while (find_next_flag_occurrence(flag, argc, argv, &cursor, &occurrence)) {
        new_argv[occurrence.value_index] =
            store_joined(&storage, argv[occurrence.value_index], occurrence.kept_length,
                         new_value);
    }
}

/* Second pass when the flag is absent: `FLAG VALUE` right after argv[0]. */
static void fill_inserted_argv(const char *flag, int argc, char *const argv[],
                               const char *new_value, char **new_argv, char *storage)
{
    new_argv[0] = argv[0];
    new_argv[1] = store_joined(&storage, flag, strlen(flag), "");
    new_argv[2] = store_joined(&storage, new_value, strlen(new_value), "");
    for (int index = 1; index < argc; index++)
        new_argv[index + 2] = argv[index];
}

/* A rewrite needs a named target of `kind` (written with `prefix`) and a
 * value; fills `description` (TARGET_DESCRIPTION_SIZE bytes) for the
 * rewrite's own messages.  0, or -1 with a message. */
static int check_rewrite_request(const struct injection_target *target,
                                 enum injection_kind kind, const char *prefix,
                                 enum injection_quantity quantity, const char *new_value,
                                 char *description, char *error, size_t error_size)
{
    if (target == NULL || target->kind != kind || !target_has_name(target)) {
        static const struct injection_target none = {INJECT_NONE, NULL};
        return report_wrong_kind(target != NULL ? target : &none, quantity, prefix, error,
                                 error_size);
    }
    describe_target(description, TARGET_DESCRIPTION_SIZE, target, quantity);
    if (new_value == NULL)
        return error_message(error, error_size, "%s: no value to inject", description);
    return 0;
}

int injection_rewrite_argv(const struct injection_target *target,
                           enum injection_quantity quantity, int argc, char *const argv[],
                           const char *new_value, int *new_argc, char ***new_argv, char *error,
                           size_t error_size)
{
    char description[TARGET_DESCRIPTION_SIZE];
    *new_argv = NULL;
    *new_argc = 0;
    if (check_rewrite_request(target, INJECT_ARGV, "argv:", quantity, new_value, description,
                              error, error_size) != 0)
        return -1;
    if (argc < 1 || argv == NULL || argv[0] == NULL)
        return error_message(error, error_size,
                            "%s: argv has no program name to insert the flag after",
                            description);
    if (argc > INT_MAX - 3)
        return error_message(error, error_size, "%s: argv is too long", description);
    int occurrence_count;
    size_t string_bytes;
    if (measure_argv_rewrite(target, quantity, argc, argv, new_value, &occurrence_count,
                             &string_bytes, error, error_size) != 0)
        return -1;
    if (occurrence_count == 0)
        string_bytes = strlen(target->name) + 1 + strlen(new_value) + 1;
    int count = occurrence_count > 0 ? argc : argc + 2;

    char **array = malloc((size_t)(count + 1) * sizeof *array + string_bytes);
    if (array == NULL)
        return error_message(error, error_size, "%s: out of memory rewriting argv", description);
    char *storage = (char *)(array + count + 1);
    if (occurrence_count > 0)
        fill_replaced_argv(target->name, argc, argv, new_value, array, storage);
    else
        fill_inserted_argv(target->name, argc, argv, new_value, array, storage);
    array[count] = NULL;

    *new_argc = count;
    *new_argv = array;
    return 0;
}

void injection_free_argv(char **new_argv)
{
    free(new_argv);   /* the new strings live in the same block */
}

static bool is_environment_entry_for(const char *entry, const char *name, size_t name_length)
{
    return strncmp(entry, name, name_length) == 0 && entry[name_length] == '=';
}

int injection_rewrite_environment(const struct injection_target *target,
                                  enum injection_quantity quantity, char *const envp[],
                                  const char *new_value, char ***new_envp, char *error,
                                  size_t error_size)
{
    char description[TARGET_DESCRIPTION_SIZE];
    *new_envp = NULL;
    if (check_rewrite_request(target, INJECT_ENV, "env:", quantity, new_value, description,
                              error, error_size) != 0)
        return -1;

    size_t name_length = strlen(target->name);
    size_t entry_count = 0;
    size_t match_count = 0;
    for (; envp != NULL && envp[entry_count] != NULL; entry_count++) {
        if (is_environment_entry_for(envp[entry_count], target->name, name_length))
            match_count++;
    }
    size_t count = match_count > 0 ? entry_count : entry_count + 1;

    char **array = malloc((count + 1) * sizeof *array + name_length + 1 + strlen(new_value) + 1);
    if (array == NULL)
        return error_message(error, error_size, "%s: out of memory rewriting the environment",
                            description);
    char *entry = (char *)(array + count + 1);
    memcpy(entry, target->name, name_length);
    entry[name_length] = '=';
    memcpy(entry + name_length + 1, new_value, strlen(new_value) + 1);

    for (size_t i = 0; i < entry_count; i++) {
        bool matches = is_environment_entry_for(envp[i], target->name, name_length);
        array[i] = matches ? entry : envp[i];
    }
    if (match_count == 0)
        array[entry_count] = entry;
    array[count] = NULL;

    *new_envp = array;
    return 0;
}

void injection_free_environment(char **new_envp)
{
    free(new_envp);   /* the one new entry lives in the same block */
}

/* ------------------------------------------------------------------------
 * Formatting
 * ---------------------------------------------------------------------- */

void injection_format_number(double value, bool integer, char *out, size_t out_size)
{
    if (out == NULL || out_size == 0)
        return;
    /* Adding 0.0 turns -0 into 0, so nothing prints as "-0". */
    if (integer)
        snprintf(out, out_size, "%.0f", round(value) + 0.0);
    else
        snprintf(out, out_size, "%.9g", value + 0.0);
}
