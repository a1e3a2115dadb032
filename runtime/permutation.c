/* permutation.c - keyed bijections over [0, N) and the sharded view index
 * map of adaptshim(7) "What the trainer sees".
 *
 * A shuffled pass must present the N records of a file in a pseudo-random
 * order that every replica computes identically, that changes with the pass
 * and wrap count, and that costs O(1) memory per file no matter how large N
 * is.  Materializing a shuffled array of N indices is out of the question for
 * a token file of 10^10 records, so instead each index is computed on demand:
 *
 *   perm(i) = cycle-walk( Feistel_k( i ) )  restricted to [0, N)
 *
 * The Feistel network is a bijection on the b-bit integers [0, 2^b), where
 * b is the smallest width with 2^b >= N.  A b-bit value is split into a high
 * part of ceil(b/2) bits and a low part of floor(b/2) bits, and the rounds
 * alternate between the two: even rounds XOR the high part with a keyed
 * function of the low part, odd rounds the low part with a keyed function of
 * the high part.  Unlike a balanced network, this works for odd b too, so
 * the domain is a power of two rather than a power of four.  Cycle-walking
 * (re-applying the network until the value falls inside [0, N)) turns it
 * into a bijection on [0, N).  Because b is minimal, 2^(b-1) < N, so the
 * network is applied at most 2^b / N < 2 times per index on average, for
 * every N: about 1.05 for N = 10^6 or 10^9, 1.34 for 10^8, and just under 2
 * immediately above a power of two, the worst case.  (A balanced network
 * needs an even width, a power-of-four domain, and up to 4 passes.)
 *
 * The key schedule absorbs (seed, basename hash, record count, pass, wrap)
 * into a 64-bit state with a strong mixer, then expands that state into
 * PERMUTATION_ROUNDS round keys.  Nothing here is cryptographic; the goal is
 * a shuffle with no visible structure, reproducible from a handful of
 * integers.
 *
 * The second half of the file is the view arithmetic: which logical
 * (pre-permutation) index the j-th record of replica r's view maps to, how
 * long each replica's view is, and how far a pass has progressed.  All of it
 * is written to be overflow-free for N up to 2^63 and beyond.
 *
 * No allocation, no I/O, no global state: every function is pure. */
#include "permutation.h"

#include <stddef.h>

/* ------------------------------------------------------------------------
 * Mixing primitives
 * ------------------------------------------------------------------------ */

/* 2^64 / golden ratio: the splitmix64 increment.  Adding it between mixes
 * keeps consecutive inputs (0, 1, 2...) far apart before they are mixed. */
#define PERMUTATION_GOLDEN_GAMMA UINT64_C(0x9e3779b97f4a7c15)

/* A fixed starting state for the key schedule, so that all-zero inputs do
 * not start from the mixer's fixed point at zero.  Any nothing-up-my-sleeve
 * constant does; this is the first SHA-512 initial hash word (fractional
 * part of sqrt(2)).  Changing it changes every shuffle, which would break
 * resumption: a snapshot resumes a pass by its index into this order. */
#define PERMUTATION_KEY_DOMAIN UINT64_C(0x6a09e667f3bcc908)

/* The splitmix64 finalizer (Stafford's "Mix13" variant).  A bijection on
 * 64-bit integers in which every input bit affects every output bit with
 * probability close to 1/2, so its low bits are as good as its high bits:
 * the Feistel round function keeps only as many low bits as the part it
 * updates. */
static uint64_t permutation_mix64(uint64_t value)
{
    value = (value ^ (value >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    value = (value ^ (value >> 27)) * UINT64_C(0x94d049bb133111eb);
    return value ^ (value >> 31);
}

/* 64-bit FNV-1a over a NUL-terminated string (NULL hashes like "").  FNV-1a
 * is simple and well known; its weak avalanche does not matter because the
 * result is fed through permutation_mix64 before use.  It only has to make
 * different basenames give different words, which it does for any realistic
 * set of file names. */
static uint64_t permutation_hash_basename(const char *file_basename)
{
    uint64_t hash = UINT64_C(0xcbf29ce484222325); /* FNV-1a 64-bit offset basis */
    if (file_basename == NULL)
        return hash;
    for (const unsigned char *cursor = (const unsigned char *)file_basename; *cursor != '\0';
         cursor++) {
        hash ^= *cursor;
        hash *= UINT64_C(0x100000001b3); /* FNV-1a 64-bit prime */
    }
    return hash;
}

/* Fold one input word into the key-schedule state.  The word is mixed on
 * its own first, so that structured words (small pass numbers, counts) are
 * spread over all 64 bits before they meet the state; then the combination
 * is mixed again, so that the order in which words are absorbed matters
 * (absorbing (a, b) and (b, a) give unrelated states). */
static uint64_t permutation_absorb(uint64_t state, uint64_t word)
{
    return permutation_mix64(state ^ permutation_mix64(word + PERMUTATION_GOLDEN_GAMMA));
}

/* ------------------------------------------------------------------------
 * Record permutation
 * ------------------------------------------------------------------------ */

/* Why 4 rounds (two updates of each part): it is the mixing the earlier
 * balanced network had, and when b is even the two networks are the same
 * function (same keys, same round function), so files whose domain width
 * did not change keep their orders and old snapshots resume unchanged; only
 * N in (4^h, 2 * 4^h] gets a new order.  Measured on the benchmark machine,
 * 6 rounds remove the residual structure 4 rounds leave in the distribution
 * of perm(i+1) - perm(i) for small files (clear below a few hundred
 * records, marginal at 1000, undetectable from about 4096 on, by a
 * chi-square test over 400 keys), but cost 1.5 times as much: the worst case
 * (N = 2^k + 1) goes from about 40 to about 56 ns per index, over the budget of
 * well under 50 ns per index. */
_Static_assert(PERMUTATION_ROUNDS >= 2 && PERMUTATION_ROUNDS % 2 == 0,
               "rounds come in (high, low) pairs");

/* Smallest b >= 1 with 2^b >= record_count.  b never exceeds 64: a 64-bit
 * domain already holds every uint64_t index, so record counts above 2^63 all
 * get b = 64.  The loop stops before computing 1 << 64. */
static unsigned permutation_domain_bits_for(uint64_t record_count)
{
    unsigned domain_bits = 1;
    while (domain_bits < 64 && (UINT64_C(1) << domain_bits) < record_count)
        domain_bits++;
    return domain_bits;
}

/* All-ones in the low `bits` bits, for bits <= 32 (so the shift is always
 * defined; 0 bits give an empty mask). */
static uint64_t permutation_low_mask(unsigned bits)
{
    return (UINT64_C(1) << bits) - 1;
}

/* The identity permutation: shuffling is off, or there is nothing to shuffle
 * (0 or 1 record). */
static void permutation_init_identity(struct record_permutation *permutation,
                                      uint64_t record_count)
{
    *permutation = (struct record_permutation){.record_count = record_count, .identity = true};
}

/* Splits the b-bit domain into a high part of ceil(b/2) bits and a low part
 * of floor(b/2) bits.  Both are at most 32 bits wide, so every shift by a
 * part width is defined even for b = 64, and the round function's 64-bit
 * output has more than enough bits for either part.  For b = 1 the low part
 * is empty (0 bits, mask 0); see permutation_feistel for why that is still
 * a correct, keyed bijection on {0, 1}. */
static void permutation_init_domain(struct record_permutation *permutation,
                                    uint64_t record_count)
{
    unsigned domain_bits = permutation_domain_bits_for(record_count);
    permutation->domain_bits = domain_bits;
    permutation->low_bits = domain_bits / 2;
    permutation->high_bits = domain_bits - permutation->low_bits;
    permutation->low_mask = permutation_low_mask(permutation->low_bits);
    permutation->high_mask = permutation_low_mask(permutation->high_bits);
}

void record_permutation_init(struct record_permutation *permutation, uint64_t record_count,
                             bool shuffle, uint64_t seed, const char *file_basename,
                             uint64_t pass, uint64_t wrap)
{
    if (!shuffle || record_count <= 1) {
        permutation_init_identity(permutation, record_count);
        return;
    }

    permutation->record_count = record_count;
    permutation->identity = false;
    permutation_init_domain(permutation, record_count);

    /* The record count is part of the key as well as of the domain: a file
     * that grows by one record gets an unrelated shuffle, not a slightly
     * perturbed one, and two files with the same basename but different
     * sizes (train.bin of two data sets) do not share an order. */
    uint64_t state = PERMUTATION_KEY_DOMAIN;
    state = permutation_absorb(state, seed);
    state = permutation_absorb(state, permutation_hash_basename(file_basename));
    state = permutation_absorb(state, record_count);
    state = permutation_absorb(state, pass);
    state = permutation_absorb(state, wrap);

    /* Expand the state into round keys as a splitmix64 stream would: each
     * key is the mix of the state advanced by a different multiple of the
     * golden gamma, so the keys are pairwise unrelated. */
    for (int round = 0; round < PERMUTATION_ROUNDS; round++)
        permutation->round_keys[round] =
            permutation_mix64(state + (uint64_t)(round + 1) * PERMUTATION_GOLDEN_GAMMA);
}

/* The Feistel round function: pseudo-random bits (as many as output_mask
 * keeps) from one part of the value and a 64-bit key.  It need not be
 * invertible; the Feistel structure makes the round invertible regardless. */
static uint64_t permutation_round_function(uint64_t part, uint64_t round_key,
                                           uint64_t output_mask)
{
    return permutation_mix64(part ^ round_key) & output_mask;
}

/* One pass through the alternating (unbalanced) Feistel network over b bits.
 * The value is split into high (ceil(b/2) bits) and low (floor(b/2) bits),
 * and the rounds alternate
 *
 *   even round:  high ^= F(low,  k_even) restricted to ceil(b/2) bits
 *   odd round:   low  ^= F(high, k_odd)  restricted to floor(b/2) bits
 *
 * Why this is a bijection on [0, 2^b): each round changes one part by XOR
 * with a function of the other part, which that round leaves untouched, and
 * the masks keep each part within its width.  Applying the same round a
 * second time therefore recomputes the same F value and XORs it away again:
 * every round is its own inverse, hence a bijection of [0, 2^b) onto
 * itself, and so is their composition (the inverse network runs the rounds
 * in reverse order).  No property of F is needed.
 *
 * For b = 1 the low part has 0 bits: low is always 0, odd rounds XOR it with
 * F & 0 = 0 and do nothing, and even rounds XOR the single high bit with the
 * low bit of F(0, k).  The network is then value ^ c for a key-dependent
 * bit c, the keyed bit flip on {0, 1}: one of the two bijections of {0, 1},
 * picked by the key. */
static uint64_t permutation_feistel(const struct record_permutation *permutation, uint64_t value)
{
    unsigned low_bits = permutation->low_bits;
    uint64_t high_mask = permutation->high_mask;
    uint64_t low_mask = permutation->low_mask;
    uint64_t high = value >> low_bits;
    uint64_t low = value & low_mask;

    for (int round = 0; round < PERMUTATION_ROUNDS; round += 2) {
        high ^= permutation_round_function(low, permutation->round_keys[round], high_mask);
        low ^= permutation_round_function(high, permutation->round_keys[round + 1], low_mask);
    }
    return (high << low_bits) | low;
}

/* Cycle-walking.  Let P be the Feistel bijection on D = [0, 2^b) and start
 * from x < N.  The sequence x, P(x), P(P(x)), ... runs around the cycle of P
 * that contains x, and that cycle comes back to x itself, which is < N; so
 * the first element of the sequence after x that lies in [0, N) exists and
 * the loop terminates.  Mapping each x < N to that element is a bijection on
 * [0, N): its inverse walks the same cycle backwards.
 *
 * Cost: the walks started from the N indices of [0, N) split the cycles
 * they touch into disjoint stretches, so together they take at most 2^b
 * steps, i.e. at most 2^b / N < 2 network passes per index on average, for
 * any key (2^(b-1) < N because b is minimal).
 *
 * An index >= N is outside the contract.  It is returned unchanged rather
 * than walked: a walk from outside [0, N) might stay outside forever (on a
 * cycle with no element below N). */
uint64_t record_permutation_apply(const struct record_permutation *permutation, uint64_t index)
{
    if (permutation->identity || index >= permutation->record_count)
        return index;

    uint64_t value = index;
    do {
        value = permutation_feistel(permutation, value);
    } while (value >= permutation->record_count);
    return value;
}

/* ------------------------------------------------------------------------
 * Sharded views
 * ------------------------------------------------------------------------ */

/* A replica count of 0 is meaningless; read it as 1 rather than divide by
 * zero, so that a misconfigured caller gets an unsharded view, not a crash. */
static uint64_t view_effective_replicas(uint64_t replicas)
{
    return replicas == 0 ? 1 : replicas;
}

/* Records left in the pass after start_index; 0 once the pass is complete
 * (and for a start_index past the end, which is out of contract). */
static uint64_t view_remaining_records(uint64_t record_count, uint64_t start_index)
{
    return start_index >= record_count ? 0 : record_count - start_index;
}

uint64_t view_length(uint64_t record_count, uint64_t replicas, uint64_t start_index)
{
    uint64_t remaining = view_remaining_records(record_count, start_index);
    replicas = view_effective_replicas(replicas);
    /* ceil(remaining / replicas) without computing remaining + replicas - 1,
     * which could overflow. */
    return remaining / replicas + (remaining % replicas != 0);
}

/* The logical index is s + r + j*K, wrapped back by N once past the end.
 * That sum is never formed directly; the offset from s is compared with the
 * number of remaining records instead, which keeps every intermediate value
 * small:
 *
 *   offset = r + j*K.  For j < L = ceil(R / K), with R = N - s remaining
 *   records, j*K <= (L - 1)*K < R, and r < K, so offset < R + K: no
 *   overflow unless N + K exceeds 2^64.
 *
 * When offset < R the record is s + offset < N.  Otherwise it is one of the
 * K*L - R < K padding records, and adaptshim(7) "What the trainer sees" (AdaptDL's padding)
 * takes it from the start of the permutation: (s + offset) - N = offset - R.
 *
 * Degenerate case: with more replicas than remaining records (K > R), the
 * padding count K - R can exceed N, so offset - R may still be >= N.  The
 * result is then reduced modulo N, i.e. the padding walks around the
 * permutation as many times as needed.  In every case the result equals
 * (s + r + j*K) mod N, and it is always a valid record index (< N) as long as
 * N > 0, even for out-of-contract arguments; N == 0 yields 0. */
uint64_t view_logical_index(uint64_t record_count, uint64_t replicas, uint64_t rank,
                            uint64_t start_index, uint64_t position)
{
    if (record_count == 0)
        return 0;
    replicas = view_effective_replicas(replicas);

    uint64_t remaining = view_remaining_records(record_count, start_index);
    uint64_t offset = rank + position * replicas;
    if (offset < remaining)
        return start_index + offset;

    uint64_t padding_index = offset - remaining;
    if (padding_index >= record_count)
        padding_index %= record_count;
    return padding_index;
}

/* current_index = min(N, s + K*d).  K*d is only formed when it is known not
 * to exceed the remaining record count R = N - s:  d <= floor(R / K) implies
 * K*d <= R, while d > floor(R / K) implies K*d >= K*(floor(R / K) + 1) > R,
 * so the answer is N without computing the (possibly overflowing) product. */
uint64_t view_current_index(uint64_t record_count, uint64_t replicas, uint64_t start_index,
                            uint64_t delivered)
{
    uint64_t remaining = view_remaining_records(record_count, start_index);
    replicas = view_effective_replicas(replicas);
    if (remaining == 0 || delivered > remaining / replicas)
        return record_count;
    return start_index + replicas * delivered;
}
