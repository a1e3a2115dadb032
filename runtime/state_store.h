/* state_store.h - saving and loading the shim's persistent state: atomic
 * saves (temp file, fsync, rename, fsync of the directory), loads that
 * validate everything, the bound snapshot's file name, and pruning.
 *
 * The structures and their memory encoding are state_records.h's, the
 * directory and its files state_files.h's; both are included here, so a
 * caller of the store needs this header only. */
#ifndef ADAPTSHIM_STATE_STORE_H
#define ADAPTSHIM_STATE_STORE_H

#include <stddef.h>

#include "content_hash.h"
#include "state_files.h"
#include "state_records.h"

/* File name of the snapshot bound to an identity ("snapshot-<size>-<hash>.msgpack").
 * Any replica that loads the same checkpoint content finds the same name. */
void snapshot_file_name(const struct content_identity *binding, char *name, size_t name_size);

int snapshot_save(const char *directory, const struct adaptdl_snapshot *snapshot,
                  char *error, size_t error_size);
/* 0: found, decoded and in range (snapshot_check.h); 1: no snapshot bound
 * to that identity; -1: error (corrupt, truncated, wrong version, a value
 * out of range...) with a message. */
int snapshot_load_bound(const char *directory, const struct content_identity *binding,
                        struct adaptdl_snapshot *snapshot, char *error, size_t error_size);
int job_record_save(const char *directory, const struct adaptdl_job_record *record,
                    char *error, size_t error_size);
/* 0: loaded; 1: no job record yet (record initialised); -1: error (record
 * initialised too, so a caller that only warns can carry on with it). */
int job_record_load(const char *directory, struct adaptdl_job_record *record,
                    char *error, size_t error_size);

/* The most recently created decodable snapshot in the directory (for
 * messages).  0 found, 1 none, -1 error with a message. */
int snapshot_load_latest(const char *directory, struct adaptdl_snapshot *snapshot,
                         char *error, size_t error_size);

/* Snapshots younger than this are never pruned (see snapshot_prune). */
#define SNAPSHOT_PRUNE_GRACE_SECONDS 30.0

/* Deletes snapshots other than `keep`, older than the grace period, whose
 * bound content no longer exists in any file that could resume: the
 * checkpoint paths named by the snapshots in the directory and, when
 * save_glob (ADAPTDL_SAVE) is given, every file matching it in the
 * directories of those paths and in the glob's own directory (a copy such as
 * ck.bak, a checkpoint another replica keeps).  Returns the number deleted,
 * or -1.  Undecodable snapshot files are left alone, and so is any snapshot
 * with a higher sequence than keep's (its commit may still be in flight).
 * keep may be NULL (keep nothing in particular), save_glob too.  Leftovers
 * of killed writers are removed on the way (state_directory_remove_leftovers). */
int snapshot_prune(const char *directory, const struct content_identity *keep,
                   const char *save_glob, char *error, size_t error_size);

#endif
