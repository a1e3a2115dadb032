/* permutation.h - keyed bijections over [0, N) and the sharded view index
 * map of adaptshim(7) "What the trainer sees".
 *
 * A record permutation is an unbalanced (alternating) Feistel network over
 * the smallest power-of-two domain [0, 2^b) covering N, whose two parts have
 * ceil(b/2) and floor(b/2) bits, with cycle-walking to stay inside [0, N):
 * each index is computed in O(1) time and memory (fewer than 2 network
 * passes on average), never by materializing N indices. */
#ifndef ADAPTSHIM_PERMUTATION_H
#define ADAPTSHIM_PERMUTATION_H

#include <stdbool.h>
#include <stdint.h>

/* Must be even: rounds alternate between updating the high and the low
 * part, and each part is updated PERMUTATION_ROUNDS / 2 times.  Why 4 and
 * not 6: see permutation.c. */
#define PERMUTATION_ROUNDS 4

struct record_permutation {
    uint64_t record_count;
    bool identity;
    /* b: the smallest width >= 1 with 2^b >= record_count (1..64). */
    unsigned domain_bits;
    /* The network works on value = high * 2^low_bits + low, with
     * high_bits = ceil(b/2) and low_bits = floor(b/2) (0 when b = 1). */
    unsigned high_bits;
    unsigned low_bits;
    uint64_t high_mask;
    uint64_t low_mask;
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
