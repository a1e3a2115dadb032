/* permutation.h - keyed bijections over [0, N) and the sharded view index
 * map of SPEC §3.
 *
 * A record permutation is a 4-round Feistel network over the smallest even
 * bit width covering N, with cycle-walking to stay inside [0, N): each index
 * is computed in O(1) time and memory, never by materializing N indices. */
#ifndef ADAPTSHIM_PERMUTATION_H
#define ADAPTSHIM_PERMUTATION_H

#include <stdbool.h>
#include <stdint.h>

#define PERMUTATION_ROUNDS 4

struct record_permutation {
    uint64_t record_count;
    bool identity;
    unsigned half_bits;
    uint64_t half_mask;
    uint64_t round_keys[PERMUTATION_ROUNDS];
};

/* Key for (seed, file identity, epoch/pass, wrap count).  The file identity
 * is the basename and the record count, so that replicas mounting the data
 * at different paths agree. */
void record_permutation_init(struct record_permutation *permutation, uint64_t record_count,
                             bool shuffle, uint64_t seed, const char *file_basename,
                             uint64_t pass, uint64_t wrap);
/* perm(index) for index < record_count. */
uint64_t record_permutation_apply(const struct record_permutation *permutation, uint64_t index);

/* View length L = ceil((N - s) / K) for s < N, 0 for s >= N. */
uint64_t view_length(uint64_t record_count, uint64_t replicas, uint64_t start_index);
/* Logical (pre-permutation) index of the j-th record of replica r's view:
 * s + r + j*K, minus N when past the end (AdaptDL's padding; reduced modulo
 * N in the degenerate case K > N - s... documented in permutation.c). */
uint64_t view_logical_index(uint64_t record_count, uint64_t replicas, uint64_t rank,
                            uint64_t start_index, uint64_t position);
/* current_index after `delivered` records: min(N, s + K * delivered). */
uint64_t view_current_index(uint64_t record_count, uint64_t replicas, uint64_t start_index,
                            uint64_t delivered);

#endif
