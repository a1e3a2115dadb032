/* config_typos.c - ADAPTDL_* variables adaptshim does not know (adaptshim(7) ENVIRONMENT):
 * a typo is not an error but a one-line warning that names the closest
 * known variable, by edit distance.  The known names are config.c's table
 * and the few variables read outside it. */
#include "config.h"
#include "config_text.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define COUNT_OF CONFIG_COUNT_OF

/* ADAPTDL_* names that are known but not in config.c's table: read by
 * parse_disable_variable and the replica layout, documented in adaptshim(7)
 * for the stop deadline, or the launcher's own (ADAPTDL_LIB,
 * which reaches the trainer's environment with the rest). */
static const char *const other_known_variables[] = {
    "ADAPTDL_DISABLE",      "ADAPTDL_NUM_REPLICAS", "ADAPTDL_REPLICA_RANK",
    "ADAPTDL_STOP_SECONDS", "ADAPTDL_LIB",
};

/* The index-th known name: config.c's table first, then the others; NULL
 * past the last. */
static const char *known_variable(size_t index)
{
    size_t table_count = config_table_variable_count();
    if (index < table_count)
        return config_table_variable_name(index);
    index -= table_count;
    return index < COUNT_OF(other_known_variables) ? other_known_variables[index] : NULL;
}

/* Names longer than this are compared on their first characters only: a
 * typo is short, and the distance table stays on the stack. */
#define TYPO_NAME_LIMIT 64

/* Edit distance with adjacent transpositions (optimal string alignment):
 * ADAPTDL_SEDE is one edit from ADAPTDL_SEED, as a reader would count. */
static size_t typo_distance(const char *a, size_t a_length, const char *b, size_t b_length)
{
    if (a_length > TYPO_NAME_LIMIT)
        a_length = TYPO_NAME_LIMIT;
    if (b_length > TYPO_NAME_LIMIT)
        b_length = TYPO_NAME_LIMIT;
    size_t rows[3][TYPO_NAME_LIMIT + 1];
    size_t *before = rows[0], *previous = rows[1], *current = rows[2];
    for (size_t j = 0; j <= b_length; j++)
        previous[j] = j;
    for (size_t i = 1; i <= a_length; i++) {
        current[0] = i;
        for (size_t j = 1; j <= b_length; j++) {
            size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
            size_t best = previous[j - 1] + cost;
            if (previous[j] + 1 < best)
                best = previous[j] + 1;
            if (current[j - 1] + 1 < best)
                best = current[j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                before[j - 2] + 1 < best)
                best = before[j - 2] + 1;
            current[j] = best;
        }
        size_t *recycled = before;
        before = previous;
        previous = current;
        current = recycled;
    }
    return previous[b_length];
}

bool config_is_known_variable(const char *name, size_t name_length)
{
    for (size_t i = 0; known_variable(i) != NULL; i++)
        if (strlen(known_variable(i)) == name_length &&
            memcmp(known_variable(i), name, name_length) == 0)
            return true;
    return false;
}

const char *config_closest_variable(const char *name, size_t name_length)
{
    const char *closest = known_variable(0);
    size_t closest_distance = SIZE_MAX;
    for (size_t i = 0; known_variable(i) != NULL; i++) {
        const char *known = known_variable(i);
        size_t distance = typo_distance(name, name_length, known, strlen(known));
        if (distance < closest_distance) {
            closest = known;
            closest_distance = distance;
        }
    }
    return closest;
}

bool config_next_unknown_variable(char *const *envp, size_t *cursor, char *message,
                                  size_t message_size)
{
    if (envp == NULL)
        return false;
    for (; envp[*cursor] != NULL; (*cursor)++) {
        const char *entry = envp[*cursor];
        if (strncmp(entry, "ADAPTDL_", strlen("ADAPTDL_")) != 0)
            continue;
        const char *equals = strchr(entry, '=');
        size_t name_length = equals != NULL ? (size_t)(equals - entry) : strlen(entry);
        if (config_is_known_variable(entry, name_length))
            continue;
        char quoted[QUOTED_SIZE];
        config_quote_for_message(quoted, sizeof quoted, entry, name_length);
        snprintf(message, message_size,
                 "%s is not a variable adaptshim knows, so it is ignored; the closest known "
                 "one is %s", quoted, config_closest_variable(entry, name_length));
        (*cursor)++;
        return true;
    }
    return false;
}
