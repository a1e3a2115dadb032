/* replica_placement.h - where the replicas of a job started by
 * adaptdl-torch-launch run (adaptdl-wrap(1) "PYTORCH JOBS"): the hosts of an
 * Open MPI-style hostfile, and the replicas spread over their slots, with
 * the numbers torchrun gives each process (RANK, LOCAL_RANK,
 * LOCAL_WORLD_SIZE, GROUP_RANK).
 *
 * Hostfile lines: `HOST [slots=N] [max_slots=N]`, `#` starts a comment,
 * blank lines are skipped.  A host without slots= has one slot (a host on
 * another machine cannot be asked for its cores); a host named twice adds
 * its slots.  Placement fills the hosts in the order of the file, each up to
 * its slots (Open MPI's default mapping by slot), so that a job uses as few
 * hosts as it can; more replicas than slots is refused.
 *
 * Pure: no allocation, no I/O. */
#ifndef ADAPTSHIM_REPLICA_PLACEMENT_H
#define ADAPTSHIM_REPLICA_PLACEMENT_H

#include <stddef.h>
#include <stdint.h>

#define PLACEMENT_MAX_HOSTS 256
#define PLACEMENT_MAX_HOST_NAME 255
#define PLACEMENT_MAX_REPLICAS 4096

struct placement_host {
    char name[PLACEMENT_MAX_HOST_NAME + 1];
    uint32_t slots;
};

struct hostfile {
    uint32_t host_count;
    struct placement_host hosts[PLACEMENT_MAX_HOSTS];
};

/* Parses a hostfile's text.  Returns 0, or -1 with one line in error that
 * names the line and what is accepted. */
int hostfile_parse(const char *text, size_t length, struct hostfile *out, char *error,
                   size_t error_size);

/* A hostfile of one host, "localhost", with `slots` slots: the layout of a
 * job without a hostfile. */
void hostfile_single_local(struct hostfile *out, uint32_t slots);

/* The hosts a job of `replicas` uses, in rank order: host h runs the ranks
 * first_rank .. first_rank + local_size - 1. */
struct placement_use {
    uint32_t host;          /* index into the hostfile */
    uint32_t first_rank;
    uint32_t local_size;
};

struct replica_placement {
    uint32_t replicas;
    uint32_t host_count;    /* hosts in use */
    struct placement_use uses[PLACEMENT_MAX_HOSTS];
};

/* Spreads `replicas` over the slots of `hosts`.  Returns 0, or -1 with one
 * line in error (no replicas, more than the slots). */
int replica_placement_plan(const struct hostfile *hosts, uint32_t replicas,
                           struct replica_placement *out, char *error, size_t error_size);

/* What one rank is told (torchrun's variables). */
struct replica_place {
    uint32_t rank;
    uint32_t group_rank;    /* the index of its host among those in use */
    uint32_t local_rank;
    uint32_t local_world_size;
    uint32_t host;          /* index into the hostfile */
};

/* The place of `rank` (below placement->replicas). */
void replica_placement_of_rank(const struct replica_placement *placement, uint32_t rank,
                               struct replica_place *out);

/* 1 when every host in use runs as many replicas (then WORLD_SIZE /
 * LOCAL_WORLD_SIZE is the node count, as torchrun's users assume), else 0. */
int replica_placement_is_even(const struct replica_placement *placement);

#endif
