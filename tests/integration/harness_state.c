/* harness_state.c - helpers for tests that handle a job's files between
 * runs (see harness.h): copying a checkpoint the way a launcher would, and
 * rewriting the snapshots of a state directory. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "state_store.h"

bool harness_copy_file(const char *from, const char *to)
{
    size_t size;
    char *data = harness_read_file(from, &size);
    if (data == NULL)
        return false;
    cr_assert_eq(harness_write_file(to, data, size), 0, "cannot write %s", to);
    free(data);
    return true;
}

void harness_hand_out_first_checkpoint(const char *directory, unsigned replicas)
{
    char *checkpoint0 = harness_path_in(directory, "ck0");
    for (unsigned rank = 1; rank < replicas; rank++) {
        char name[16];
        snprintf(name, sizeof name, "ck%u", rank);
        char *checkpoint = harness_path_in(directory, name);
        unlink(checkpoint);
        harness_copy_file(checkpoint0, checkpoint);
        free(checkpoint);
    }
    free(checkpoint0);
}

size_t harness_edit_snapshots(const char *state, void (*edit)(struct adaptdl_snapshot *snapshot))
{
    DIR *listing = opendir(state);
    cr_assert_not_null(listing, "no state directory %s", state);
    size_t edited = 0;
    struct dirent *entry;
    while ((entry = readdir(listing)) != NULL) {
        if (strncmp(entry->d_name, "snapshot-", 9) != 0)
            continue;
        void *data;
        size_t size;
        char error[512];
        cr_assert_eq(state_file_read(state, entry->d_name, &data, &size, error, sizeof error), 0,
                     "%s", error);
        struct adaptdl_snapshot snapshot;
        cr_assert_eq(snapshot_decode(data, size, &snapshot, error, sizeof error), 0, "%s", error);
        free(data);
        edit(&snapshot);
        cr_assert_eq(snapshot_save(state, &snapshot, error, sizeof error), 0, "%s", error);
        snapshot_free(&snapshot);
        edited++;
    }
    closedir(listing);
    return edited;
}
