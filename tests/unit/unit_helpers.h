/* unit_helpers.h - set-up that several unit test files share: a fresh
 * temporary directory, paths in it, a count of its entries, and its
 * removal; and a seeded random sequence.  The helpers assert with Criterion, so a failure stops the test
 * that called them. */
#ifndef ADAPTSHIM_UNIT_HELPERS_H
#define ADAPTSHIM_UNIT_HELPERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A fresh directory made by mkdtemp from template (which ends in XXXXXX),
 * as a malloc'ed path. */
char *unit_make_temp_directory(const char *template);

/* Removes directory and all below it, and frees the path. */
void unit_remove_temp_directory(char *directory);

/* "directory/name", malloc'ed. */
char *unit_path_join(const char *directory, const char *name);

/* How many entries the directory holds, "." and ".." left out. */
size_t unit_directory_entry_count(const char *directory);

/* How many of those entries have a name for which matches() is true. */
size_t unit_directory_count_matching(const char *directory, bool (*matches)(const char *name));

/* splitmix64: the next number of the sequence seeded by *state; tests that
 * draw random cases use it so that a failure can be replayed. */
uint64_t unit_splitmix64(uint64_t *state);

#endif
