/* snapshot_check.h - range checks of a decoded snapshot before it is applied
 * (a state file is either used whole or reported and not used).
 *
 * Decoding proves that a snapshot is well formed and that its checksum
 * matches; the checksum is no signature, so a hand-edited or hostile file
 * passes it.  These checks refuse every value that no run could have
 * captured: an index past its pass, a pass no planner makes, an epoch that
 * disagrees with the train positions, a file name with a directory in it.
 * What needs the dataset itself (the record count of the file) is checked
 * where positions are applied, in dataset_registry.c.
 *
 * Who includes it: state_store.c, which checks every snapshot it loads.
 * It includes state_records.h only, never state_store.h. */
#ifndef ADAPTSHIM_SNAPSHOT_CHECK_H
#define ADAPTSHIM_SNAPSHOT_CHECK_H

#include <stddef.h>

#include "state_records.h"

/* 0 when every field is in range; -1 with a one-line message naming the
 * first field that is not, its value and what is accepted. */
int snapshot_check_ranges(const struct adaptdl_snapshot *snapshot, char *error,
                          size_t error_size);

#endif
