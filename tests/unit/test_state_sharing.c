/* test_state_sharing.c - the start-up check that every replica sees the
 * state directory (runtime/state_sharing.h).  Replicas run as threads
 * joined by thread_replicas.h; a replica that "does not see" the directory
 * is given another, empty directory at the place of the shared one, as a
 * host whose path is a local directory would. */
#include <criterion/criterion.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "replica_collective.h"
#include "state_sharing.h"
#include "thread_replicas.h"
#include "unit_helpers.h"

#define SS_REPLICAS 4

struct sharing_case {
    const char *directories[SS_REPLICAS];   /* what each replica names as the state */
    const char *hosts[SS_REPLICAS];
    int verdicts[SS_REPLICAS];
    char messages[SS_REPLICAS][1024];
    char errors[SS_REPLICAS][256];
};

static void run_check(unsigned rank, unsigned replicas, void *argument)
{
    (void)replicas;
    struct sharing_case *sharing = argument;
    sharing->verdicts[rank] = state_sharing_check(
        sharing->directories[rank], rank, sharing->hosts[rank], 0x1234abcdu + rank,
        sharing->messages[rank], sizeof sharing->messages[rank], sharing->errors[rank],
        sizeof sharing->errors[rank]);
}

/* Runs the check on 4 replicas, ranks 0 and 1 on hostA and ranks 2 and 3
 * on hostB, each naming its entry of directories as the state. */
static void run_on_two_hosts(struct sharing_case *sharing,
                             const char *const directories[SS_REPLICAS])
{
    static const char *const hosts[SS_REPLICAS] = {"hostA", "hostA", "hostB", "hostB"};
    memset(sharing, 0, sizeof *sharing);
    for (unsigned rank = 0; rank < SS_REPLICAS; rank++) {
        sharing->directories[rank] = directories[rank];
        sharing->hosts[rank] = hosts[rank];
    }
    thread_replicas_run(SS_REPLICAS, run_check, sharing);
}

static char *make_directory(const char *name)
{
    char *path = NULL;
    cr_assert(asprintf(&path, "%s/adaptshim-unit-sharing.%d.%s", P_tmpdir, getpid(), name) > 0);
    cr_assert_eq(mkdir(path, 0700), 0, "%s", path);
    return path;
}

Test(state_sharing, every_replica_sees_a_shared_directory_and_the_marker_is_removed)
{
    char *shared = make_directory("shared");
    struct sharing_case sharing;
    run_on_two_hosts(&sharing, (const char *[]){shared, shared, shared, shared});
    for (unsigned rank = 0; rank < SS_REPLICAS; rank++) {
        cr_expect_eq(sharing.verdicts[rank], STATE_SHARING_SHARED, "rank %u: %s %s", rank,
                     sharing.messages[rank], sharing.errors[rank]);
        cr_expect_str_empty(sharing.messages[rank]);
    }
    cr_expect_eq(unit_directory_entry_count(shared), 0, "rank 0 removed its marker");
    rmdir(shared);
    free(shared);
}

Test(state_sharing, the_ranks_of_a_host_that_does_not_see_it_are_named_in_one_line)
{
    char *shared = make_directory("shared");
    char *local = make_directory("local");
    struct sharing_case sharing;
    run_on_two_hosts(&sharing, (const char *[]){shared, shared, local, local});
    for (unsigned rank = 0; rank < SS_REPLICAS; rank++) {
        cr_expect_eq(sharing.verdicts[rank], STATE_SHARING_NOT_SHARED, "rank %u: %s", rank,
                     sharing.errors[rank]);
        cr_expect_null(strchr(sharing.messages[rank], '\n'), "one line");
    }
    const char *message = sharing.messages[0];
    cr_expect(strstr(message, shared) != NULL, "names the directory: %s", message);
    cr_expect(strstr(message, "2 of 4 ranks (the first: rank 2; host hostB)") != NULL,
              "names who does not see it, each host once: %s", message);
    cr_expect(strstr(message, "rank 0 on host hostA") != NULL, "%s", message);
    cr_expect(strstr(message, "file system every host mounts") != NULL,
              "says what is needed: %s", message);
    cr_expect(strstr(sharing.messages[3], "2 of 4 ranks (the first: rank 2; host hostB)") != NULL,
              "every rank reaches the same verdict: %s", sharing.messages[3]);
    cr_expect_eq(unit_directory_entry_count(shared), 0, "rank 0 removed its marker");
    cr_expect_eq(unit_directory_entry_count(local), 0);
    rmdir(shared);
    rmdir(local);
    free(shared);
    free(local);
}

Test(state_sharing, a_directory_rank_0_cannot_write_in_gives_no_verdict)
{
    const char *missing = "/nonexistent/adaptshim-unit-sharing";
    struct sharing_case sharing = {
        .directories = {missing, missing, missing},
        .hosts = {"hostA", "hostB", "hostC"},
    };
    thread_replicas_run(3, run_check, &sharing);
    for (unsigned rank = 0; rank < 3; rank++) {
        cr_expect_eq(sharing.verdicts[rank], STATE_SHARING_UNKNOWN, "rank %u: %s", rank,
                     sharing.errors[rank]);
        cr_expect(strstr(sharing.messages[rank], "not checked") != NULL, "%s",
                  sharing.messages[rank]);
    }
    cr_expect(strstr(sharing.messages[0], missing) != NULL, "%s", sharing.messages[0]);
}

Test(state_sharing, a_marker_is_seen_only_with_its_own_token)
{
    char *directory = make_directory("token");
    char path[4096];
    cr_assert_eq(state_sharing_marker_path(directory, 0xabcu, path, sizeof path), 0);
    FILE *file = fopen(path, "w");
    cr_assert_not_null(file);
    fprintf(file, "%016x\n", 0xabcu);
    fclose(file);
    cr_expect(state_sharing_sees_marker(directory, 0xabcu));
    cr_expect_not(state_sharing_sees_marker(directory, 0xabdu), "another token's file");
    cr_expect_eq(state_sharing_marker_path(directory, 1, path, 8), -1, "too long to fit");
    char other[4096];
    state_sharing_marker_path(directory, 0xabcu, other, sizeof other);
    unlink(other);
    rmdir(directory);
    free(directory);
}
