/* unit_helpers.c - the set-up several unit test files share (unit_helpers.h). */
#include "unit_helpers.h"

#include <criterion/criterion.h>

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *unit_make_temp_directory(const char *template)
{
    char *directory = strdup(template);
    cr_assert_not_null(directory);
    cr_assert_not_null(mkdtemp(directory), "mkdtemp %s: %s", template, strerror(errno));
    return directory;
}

static int unit_remove_entry(const char *path, const struct stat *status, int type,
                             struct FTW *walk)
{
    (void)status, (void)type, (void)walk;
    return remove(path);
}

void unit_remove_temp_directory(char *directory)
{
    nftw(directory, unit_remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(directory);
}

char *unit_path_join(const char *directory, const char *name)
{
    char *path = NULL;
    cr_assert_gt(asprintf(&path, "%s/%s", directory, name), 0);
    return path;
}

uint64_t unit_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

size_t unit_directory_count_matching(const char *directory, bool (*matches)(const char *name))
{
    DIR *listing = opendir(directory);
    cr_assert_not_null(listing, "%s", directory);
    size_t count = 0;
    for (struct dirent *entry; (entry = readdir(listing)) != NULL;)
        if (strcmp(entry->d_name, ".") != 0 && strcmp(entry->d_name, "..") != 0 &&
            (matches == NULL || matches(entry->d_name)))
            count++;
    closedir(listing);
    return count;
}

size_t unit_directory_entry_count(const char *directory)
{
    return unit_directory_count_matching(directory, NULL);
}
