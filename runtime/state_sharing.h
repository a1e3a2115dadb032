/* state_sharing.h - the start-up check that every replica sees the same
 * state directory (adaptdl-wrap(1) "Several hosts (hostfile)"): the job record and the
 * snapshots that resume a job live there, so on several hosts it must be
 * on a file system every host sees.  A directory that is only local on
 * some host would make that host's replicas resume from nothing.
 *
 * The check is one marker file and two small collectives, right after MPI
 * is up: rank 0 writes DIR/.shared-check.TOKEN holding a fresh random
 * token, every replica learns the token (a broadcast) and looks for the
 * file, and an all-gather of "seen or not, host name" tells every replica
 * who does not see it.  Rank 0 removes the marker afterwards. */
#ifndef ADAPTSHIM_STATE_SHARING_H
#define ADAPTSHIM_STATE_SHARING_H

#include <stddef.h>
#include <stdint.h>

enum state_sharing_verdict {
    STATE_SHARING_SHARED = 0,       /* every replica sees rank 0's marker */
    STATE_SHARING_NOT_SHARED = 1,   /* some do not: `message` says which */
    STATE_SHARING_UNKNOWN = 2,      /* rank 0 could not write its marker: no verdict */
};

/* Runs the check through replica_collective's transport (every replica
 * must call it, in the same order as its other collectives).  `fresh_token` is rank 0's
 * random token (ignored on the others; 0 is replaced by one of the
 * clock's); `host` this replica's host name.  Returns the verdict, with a
 * one-line `message` (the same on every replica) for NOT_SHARED and
 * UNKNOWN, or -1 with a message in `error` when a collective failed. */
int state_sharing_check(const char *directory, unsigned rank, const char *host,
                        uint64_t fresh_token, char *message, size_t message_size, char *error,
                        size_t error_size);

/* The marker's path for a token (DIR/.shared-check.TOKEN in hex), into
 * `path`; 0, or -1 when it does not fit. */
int state_sharing_marker_path(const char *directory, uint64_t token, char *path,
                              size_t path_size);
/* Whether the marker of `token` is in `directory` and holds that token. */
int state_sharing_sees_marker(const char *directory, uint64_t token);

#endif
