/* hints_file.h - reading ADAPTDL_HINTS_FILE (SPEC §7 "Events"): the goodput
 * table a launcher or scheduler chooses the replica count from.
 *
 * The shim writes the file (shim/events.c) as one JSON object,
 *
 *   {"type": "hints", "time": T, "perf_params": {...}, ...,
 *    "max_profiled_replicas": 1, "goodput_by_replicas": {"1": 1781.0, "2": 2374.6}}
 *
 * but the reader does not rely on that layout: it parses any JSON object
 * (members in any order, any spacing, nested values it skips), so that a
 * file written by a scheduler or edited by hand is read too.  What it needs
 * is a member "goodput_by_replicas" holding an object whose keys are
 * replica counts ("1" .. "64") and whose values are numbers (or null: no
 * prediction).  Anything else is an error with one line naming what was
 * wrong and where. */
#ifndef ADAPTSHIM_HINTS_FILE_H
#define ADAPTSHIM_HINTS_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "replica_choice.h"

struct replica_hints {
    struct replica_goodputs goodputs;
    uint32_t max_profiled_replicas;   /* 0 when the member is absent */
};

/* Parses `length` bytes of text.  Returns 0 with *hints filled, or -1 with
 * a one-line message such as "byte 57: expected a number or null as the
 * goodput of 2 replicas" (hints left with every goodput NAN). */
int hints_parse(const char *text, size_t length, struct replica_hints *hints, char *error,
                size_t error_size);

#endif
