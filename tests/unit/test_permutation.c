/* test_permutation.c - record permutations and sharded view arithmetic.
 *
 * Modelled on AdaptDL's ElasticSampler tests: every replica's view has the
 * same length, the union of the views covers every remaining record, padding
 * repeats records at most once, and the shuffle is a deterministic function
 * of (seed, basename, record count, pass, wrap).  On top of that the Feistel
 * permutation itself is checked to be a bijection exhaustively for small N
 * and around powers of two (where the domain width b changes, and where the
 * two Feistel parts alternate between equal and unequal widths), and by
 * sampling for N up to 2^64 - 1. */
#include <criterion/criterion.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "permutation.h"

#define TEST_SEED_COUNT 4
static const uint64_t test_seeds[TEST_SEED_COUNT] = {0, 1, 42, UINT64_C(0xdeadbeefcafef00d)};

static struct record_permutation shuffled(uint64_t record_count, uint64_t seed,
                                          const char *file_basename, uint64_t pass,
                                          uint64_t wrap)
{
    struct record_permutation permutation;
    record_permutation_init(&permutation, record_count, true, seed, file_basename, pass, wrap);
    return permutation;
}

/* Asserts that the permutation maps [0, N) onto [0, N), using a byte map. */
static void assert_bijection_exhaustive(const struct record_permutation *permutation)
{
    uint64_t record_count = permutation->record_count;
    unsigned char *seen = calloc(record_count ? record_count : 1, 1);
    cr_assert_not_null(seen);
    for (uint64_t index = 0; index < record_count; index++) {
        /* Plain tests in the hot loop: millions of cr_assert calls would
         * dominate the running time. */
        uint64_t image = record_permutation_apply(permutation, index);
        if (image >= record_count || seen[image])
            cr_assert_fail("N=%llu perm(%llu)=%llu is out of range or a collision",
                           (unsigned long long)record_count, (unsigned long long)index,
                           (unsigned long long)image);
        seen[image] = 1;
    }
    free(seen);
}

static int compare_uint64(const void *left, const void *right)
{
    uint64_t a = *(const uint64_t *)left, b = *(const uint64_t *)right;
    return (a > b) - (a < b);
}

/* xorshift64*: a tiny PRNG for picking sample indices in the tests. */
static uint64_t test_random_next(uint64_t *state)
{
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return *state * UINT64_C(0x2545f4914f6cdd1d);
}

/* Samples 100k distinct indices of a huge domain (a strided run, a run at the
 * very end, and random ones), and checks that their images are in range and
 * pairwise distinct. */
static void assert_bijection_sampled(uint64_t record_count, uint64_t seed)
{
    enum { SAMPLE_COUNT = 100000, RUN_COUNT = 1000 };
    struct record_permutation permutation = shuffled(record_count, seed, "train.bin", 3, 0);
    uint64_t *indices = malloc(SAMPLE_COUNT * sizeof *indices);
    uint64_t *images = malloc(SAMPLE_COUNT * sizeof *images);
    cr_assert(indices != NULL && images != NULL);

    size_t count = 0;
    for (uint64_t index = 0; index < RUN_COUNT; index++)
        indices[count++] = index;
    for (uint64_t index = 0; index < RUN_COUNT; index++)
        indices[count++] = record_count - 1 - index;
    uint64_t random_state = seed * 2 + 1;
    while (count < SAMPLE_COUNT)
        indices[count++] = test_random_next(&random_state) % record_count;

    /* Random samples may repeat each other or the runs: keep distinct ones. */
    qsort(indices, count, sizeof *indices, compare_uint64);
    size_t distinct = 0;
    for (size_t i = 0; i < count; i++)
        if (distinct == 0 || indices[i] != indices[distinct - 1])
            indices[distinct++] = indices[i];
    cr_assert_gt(distinct, SAMPLE_COUNT * 9 / 10);

    for (size_t i = 0; i < distinct; i++) {
        images[i] = record_permutation_apply(&permutation, indices[i]);
        cr_assert_lt(images[i], record_count);
    }
    qsort(images, distinct, sizeof *images, compare_uint64);
    for (size_t i = 1; i < distinct; i++)
        cr_assert_neq(images[i], images[i - 1], "collision at %llu",
                      (unsigned long long)images[i]);
    free(indices);
    free(images);
}

/* Number of positions in [0, N) where two permutations disagree. */
static uint64_t count_differences(const struct record_permutation *first,
                                  const struct record_permutation *second)
{
    uint64_t differences = 0;
    for (uint64_t index = 0; index < first->record_count; index++)
        differences += record_permutation_apply(first, index) !=
                       record_permutation_apply(second, index);
    return differences;
}

/* Two random permutations of 1000 agree on about one position; demand at
 * least 90% disagreement to call them different orders. */
static void assert_orders_differ(const struct record_permutation *first,
                                 const struct record_permutation *second)
{
    cr_assert_eq(first->record_count, second->record_count);
    cr_assert_gt(count_differences(first, second), first->record_count * 9 / 10);
}

/* ---- identity and trivial sizes ---------------------------------------- */

Test(permutation, shuffle_off_is_identity)
{
    struct record_permutation permutation;
    record_permutation_init(&permutation, 1000, false, 7, "train.bin", 5, 2);
    cr_assert(permutation.identity);
    for (uint64_t index = 0; index < 1000; index++)
        cr_assert_eq(record_permutation_apply(&permutation, index), index);

    record_permutation_init(&permutation, UINT64_C(1) << 62, false, 7, "train.bin", 0, 0);
    cr_assert(permutation.identity);
    cr_assert_eq(record_permutation_apply(&permutation, UINT64_C(123456789012)),
                 UINT64_C(123456789012));
}

Test(permutation, zero_and_one_records_are_safe)
{
    struct record_permutation permutation = shuffled(0, 1, "x", 0, 0);
    cr_assert(permutation.identity);
    cr_assert_eq(permutation.record_count, 0);
    cr_assert_eq(view_length(0, 4, 0), 0);
    cr_assert_eq(view_current_index(0, 4, 0, 10), 0);
    cr_assert_eq(view_logical_index(0, 4, 1, 0, 0), 0);

    permutation = shuffled(1, 1, "x", 9, 9);
    cr_assert(permutation.identity);
    cr_assert_eq(record_permutation_apply(&permutation, 0), 0);
    cr_assert_eq(view_length(1, 4, 0), 1);
    for (uint64_t rank = 0; rank < 4; rank++)
        cr_assert_eq(view_logical_index(1, 4, rank, 0, 0), 0);
}

Test(permutation, domain_bits_is_smallest_covering_width)
{
    static const struct {
        uint64_t record_count;
        unsigned domain_bits;
    } cases[] = {
        {2, 1},
        {3, 2},
        {4, 2},
        {5, 3},
        {8, 3},
        {9, 4},
        {16, 4},
        {17, 5},
        {1000, 10},
        {1024, 10},
        {1025, 11},
        {1000000000, 30},
        {(UINT64_C(1) << 40) + 3, 41},
        {UINT64_C(1) << 62, 62},
        {(UINT64_C(1) << 62) + 1, 63},
        {(UINT64_C(1) << 63) - 25, 63},
        {UINT64_C(1) << 63, 63},
        {(UINT64_C(1) << 63) + 1, 64},
        {UINT64_MAX, 64},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct record_permutation permutation = shuffled(cases[i].record_count, 1, "f", 0, 0);
        unsigned domain_bits = cases[i].domain_bits;
        cr_assert_not(permutation.identity);
        cr_assert_eq(permutation.domain_bits, domain_bits, "N=%llu: b=%u, expected %u",
                     (unsigned long long)cases[i].record_count, permutation.domain_bits,
                     domain_bits);
        /* High part ceil(b/2) bits, low part floor(b/2) bits. */
        cr_assert_eq(permutation.high_bits, (domain_bits + 1) / 2);
        cr_assert_eq(permutation.low_bits, domain_bits / 2);
        cr_assert_eq(permutation.high_mask, (UINT64_C(1) << permutation.high_bits) - 1);
        cr_assert_eq(permutation.low_mask, (UINT64_C(1) << permutation.low_bits) - 1);
    }
}

/* N = 2 is the one-bit domain, where the network reduces to a keyed bit
 * flip: both orders of {0, 1} must occur as the key varies, in roughly equal
 * numbers (binomial(200, 1/2): standard deviation about 7). */
Test(permutation, two_records_are_swapped_by_some_keys_only)
{
    unsigned swapped = 0;
    for (uint64_t pass = 0; pass < 200; pass++) {
        struct record_permutation permutation = shuffled(2, 42, "train.bin", pass, 0);
        uint64_t first = record_permutation_apply(&permutation, 0);
        uint64_t second = record_permutation_apply(&permutation, 1);
        cr_assert(first <= 1 && second == 1 - first, "pass %llu: (%llu, %llu)",
                  (unsigned long long)pass, (unsigned long long)first,
                  (unsigned long long)second);
        swapped += first == 1;
    }
    cr_assert(swapped > 50 && swapped < 150, "%u of 200 keys swap", swapped);
}

Test(permutation, out_of_range_index_is_returned_unchanged)
{
    struct record_permutation permutation = shuffled(1000, 1, "f", 0, 0);
    cr_assert_eq(record_permutation_apply(&permutation, 1000), 1000);
    cr_assert_eq(record_permutation_apply(&permutation, UINT64_MAX), UINT64_MAX);
}

/* ---- bijection --------------------------------------------------------- */

Test(permutation, bijection_exhaustive_up_to_2000)
{
    for (uint64_t record_count = 1; record_count <= 2000; record_count++)
        for (int seed = 0; seed < TEST_SEED_COUNT; seed++) {
            struct record_permutation permutation =
                shuffled(record_count, test_seeds[seed], "train.bin", record_count % 5, 0);
            assert_bijection_exhaustive(&permutation);
        }
}

/* Counts just around powers of two: the cycle walk is longest just above
 * one (2^b close to 2N) and absent at one exactly.  Odd exponents give
 * unequal Feistel parts, even ones equal parts. */
Test(permutation, bijection_exhaustive_around_powers_of_two)
{
    for (unsigned domain_bits = 1; domain_bits <= 20; domain_bits++) {
        uint64_t power = UINT64_C(1) << domain_bits;
        const uint64_t counts[] = {power - 1, power, power + 1};
        for (size_t i = 0; i < 3; i++)
            for (int seed = 0; seed < 2; seed++) {
                struct record_permutation permutation =
                    shuffled(counts[i], test_seeds[seed], "a", 1, domain_bits);
                assert_bijection_exhaustive(&permutation);
            }
    }
}

Test(permutation, bijection_sampled_one_billion)
{
    assert_bijection_sampled(UINT64_C(1000000000), 5);
}

Test(permutation, bijection_sampled_2_40_plus_3)
{
    assert_bijection_sampled((UINT64_C(1) << 40) + 3, 6);
}

Test(permutation, bijection_sampled_2_62_plus_1)
{
    assert_bijection_sampled((UINT64_C(1) << 62) + 1, 9);
}

Test(permutation, bijection_sampled_near_2_63)
{
    assert_bijection_sampled((UINT64_C(1) << 63) - 25, 7);
}

Test(permutation, bijection_sampled_2_63_plus_1)
{
    assert_bijection_sampled((UINT64_C(1) << 63) + 1, 10);
}

Test(permutation, bijection_sampled_full_64_bit_width)
{
    assert_bijection_sampled(UINT64_MAX, 8);
}

/* ---- determinism and keying -------------------------------------------- */

Test(permutation, same_inputs_give_same_order)
{
    struct record_permutation first = shuffled(1000, 42, "train.bin", 3, 1);
    struct record_permutation second = shuffled(1000, 42, "train.bin", 3, 1);
    cr_assert_eq(memcmp(first.round_keys, second.round_keys, sizeof first.round_keys), 0);
    cr_assert_eq(count_differences(&first, &second), 0);

    /* The basename is hashed by content, not by pointer. */
    char copy[] = "train.bin";
    struct record_permutation third = shuffled(1000, 42, copy, 3, 1);
    cr_assert_eq(count_differences(&first, &third), 0);
}

Test(permutation, different_passes_give_different_orders)
{
    for (uint64_t pass = 0; pass < 8; pass++) {
        struct record_permutation current = shuffled(1000, 42, "train.bin", pass, 0);
        struct record_permutation next = shuffled(1000, 42, "train.bin", pass + 1, 0);
        assert_orders_differ(&current, &next);
    }
}

Test(permutation, different_wraps_give_different_orders)
{
    struct record_permutation wrap0 = shuffled(1000, 42, "train.bin", 2, 0);
    struct record_permutation wrap1 = shuffled(1000, 42, "train.bin", 2, 1);
    struct record_permutation wrap2 = shuffled(1000, 42, "train.bin", 2, 2);
    assert_orders_differ(&wrap0, &wrap1);
    assert_orders_differ(&wrap1, &wrap2);
    assert_orders_differ(&wrap0, &wrap2);

    /* Pass and wrap are separate key words: (pass 1, wrap 0) is not
     * (pass 0, wrap 1). */
    struct record_permutation pass1 = shuffled(1000, 42, "train.bin", 1, 0);
    struct record_permutation pass0_wrap1 = shuffled(1000, 42, "train.bin", 0, 1);
    assert_orders_differ(&pass1, &pass0_wrap1);
}

Test(permutation, different_seeds_give_different_orders)
{
    for (int first = 0; first < TEST_SEED_COUNT; first++)
        for (int second = first + 1; second < TEST_SEED_COUNT; second++) {
            struct record_permutation a = shuffled(1000, test_seeds[first], "train.bin", 0, 0);
            struct record_permutation b = shuffled(1000, test_seeds[second], "train.bin", 0, 0);
            assert_orders_differ(&a, &b);
        }
}

Test(permutation, different_basenames_give_different_orders)
{
    static const char *const basenames[] = {"train.bin", "train.bim", "val.bin", "", "a", "b"};
    enum { BASENAME_COUNT = sizeof basenames / sizeof basenames[0] };
    for (int first = 0; first < BASENAME_COUNT; first++)
        for (int second = first + 1; second < BASENAME_COUNT; second++) {
            struct record_permutation a = shuffled(1000, 42, basenames[first], 0, 0);
            struct record_permutation b = shuffled(1000, 42, basenames[second], 0, 0);
            assert_orders_differ(&a, &b);
        }
}

Test(permutation, null_basename_is_empty_basename)
{
    struct record_permutation null_name = shuffled(1000, 42, NULL, 1, 0);
    struct record_permutation empty_name = shuffled(1000, 42, "", 1, 0);
    cr_assert_eq(count_differences(&null_name, &empty_name), 0);
}

/* The record count is a key word too: files of nearly equal size sharing a
 * basename do not share a (truncated) order. */
Test(permutation, record_count_is_part_of_the_key)
{
    struct record_permutation smaller = shuffled(1000, 42, "train.bin", 0, 0);
    struct record_permutation larger = shuffled(1001, 42, "train.bin", 0, 0);
    cr_assert_eq(smaller.domain_bits, larger.domain_bits);
    cr_assert_neq(memcmp(smaller.round_keys, larger.round_keys, sizeof smaller.round_keys), 0);
    uint64_t agreements = 0;
    for (uint64_t index = 0; index < 1000; index++)
        agreements += record_permutation_apply(&smaller, index) ==
                      record_permutation_apply(&larger, index);
    cr_assert_lt(agreements, 100);
}

/* Snapshots resume a pass by its position in this order, so any change to
 * the construction or the key schedule silently reorders resumed passes.
 * These values pin it.  The N = 1000 order (even domain width) is also what
 * the earlier balanced power-of-four network produced: the alternating
 * network computes the same function when both parts are equal. */
Test(permutation, orders_are_pinned_for_resumption)
{
    static const struct {
        uint64_t record_count;
        uint64_t images[6];
    } cases[] = {
        {1000, {312, 110, 412, 157, 806, 179}},
        {1025, {179, 114, 211, 508, 235, 131}},
        {(UINT64_C(1) << 63) + 1,
         {UINT64_C(5866631298049705738), UINT64_C(8095346066355704969),
          UINT64_C(2666548554584278024), UINT64_C(8733060405039036128),
          UINT64_C(4235403660317727595), UINT64_C(1215751953946235161)}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct record_permutation permutation =
            shuffled(cases[i].record_count, 42, "train.bin", 3, 1);
        for (uint64_t index = 0; index < 6; index++)
            cr_assert_eq(record_permutation_apply(&permutation, index), cases[i].images[index],
                         "N=%llu perm(%llu)", (unsigned long long)cases[i].record_count,
                         (unsigned long long)index);
    }
}

/* ---- statistical sanity ------------------------------------------------ */

/* Record counts for the statistical tests: an even domain width (equal
 * Feistel parts), and two odd ones (parts of 6 and 5 bits) at both ends of
 * the cycle-walk range: 1025 walks almost twice per index, 2047 hardly at
 * all. */
#define STATISTICS_COUNT_CASES 3
static const uint64_t statistics_record_counts[STATISTICS_COUNT_CASES] = {1000, 1025, 2047};

/* Over many passes, the position at which record 0 appears is uniform on
 * [0, N): mean (N - 1) / 2, standard deviation of the mean over P passes
 * sqrt((N^2 - 1) / 12 / P), about 9.1 for N = 1000 and P = 1000.  The bound
 * is 10 standard deviations wide (compared as squares: no libm needed). */
static void assert_record_zero_position_centred(uint64_t record_count)
{
    enum { PASS_COUNT = 1000 };
    double position_sum = 0;
    for (uint64_t pass = 0; pass < PASS_COUNT; pass++) {
        struct record_permutation permutation = shuffled(record_count, 42, "train.bin", pass, 0);
        uint64_t position = 0;
        while (record_permutation_apply(&permutation, position) != 0)
            position++;
        position_sum += (double)position;
    }
    double count = (double)record_count;
    double mean = position_sum / PASS_COUNT;
    double expected = (count - 1) / 2;
    double variance_of_mean = (count * count - 1) / 12 / PASS_COUNT;
    double error = mean - expected;
    cr_assert(error * error < 100 * variance_of_mean,
              "N=%llu: mean position of record 0 is %.1f, expected %.1f",
              (unsigned long long)record_count, mean, expected);
}

Test(permutation, record_zero_position_is_centred_over_passes)
{
    for (int i = 0; i < STATISTICS_COUNT_CASES; i++)
        assert_record_zero_position_centred(statistics_record_counts[i]);
}

/* A trivially structured shuffle (a rotation, a stride, a bit reversal)
 * would show long monotone runs, consecutive pairs, or many fixed points.  A
 * random permutation of N has about 1 fixed point, 1 pair with
 * perm(i+1) = perm(i) + 1, and as many ascents as descents: (N - 1) / 2 on
 * average, standard deviation sqrt((N + 1) / 12), about 9.1 for N = 1000.
 * The ascent bound is about 8.7 standard deviations wide (+-80 for
 * N = 1000), compared as squares. */
static void assert_shuffle_has_no_obvious_structure(uint64_t record_count)
{
    enum { PASS_COUNT = 20 };
    double expected_ascents = (double)(record_count - 1) / 2;
    double ascent_variance = (double)(record_count + 1) / 12;
    for (uint64_t pass = 0; pass < PASS_COUNT; pass++) {
        struct record_permutation permutation = shuffled(record_count, 7, "train.bin", pass, 0);
        unsigned fixed_points = 0, successor_pairs = 0, ascents = 0;
        uint64_t previous = record_permutation_apply(&permutation, 0);
        fixed_points += previous == 0;
        for (uint64_t index = 1; index < record_count; index++) {
            uint64_t image = record_permutation_apply(&permutation, index);
            fixed_points += image == index;
            successor_pairs += image == previous + 1;
            ascents += image > previous;
            previous = image;
        }
        cr_assert_lt(fixed_points, 10, "N=%llu pass %llu: %u fixed points",
                     (unsigned long long)record_count, (unsigned long long)pass, fixed_points);
        cr_assert_lt(successor_pairs, 10, "N=%llu pass %llu: %u successor pairs",
                     (unsigned long long)record_count, (unsigned long long)pass,
                     successor_pairs);
        double ascent_error = ascents - expected_ascents;
        cr_assert(ascent_error * ascent_error < 8.7 * 8.7 * ascent_variance,
                  "N=%llu pass %llu: %u ascents", (unsigned long long)record_count,
                  (unsigned long long)pass, ascents);
    }
}

Test(permutation, shuffle_has_no_obvious_structure)
{
    for (int i = 0; i < STATISTICS_COUNT_CASES; i++)
        assert_shuffle_has_no_obvious_structure(statistics_record_counts[i]);
}

/* ---- view length ------------------------------------------------------- */

Test(view, length_is_ceiling_of_remaining_over_replicas)
{
    cr_assert_eq(view_length(10, 1, 0), 10);
    cr_assert_eq(view_length(10, 4, 0), 3);
    cr_assert_eq(view_length(10, 5, 0), 2);
    cr_assert_eq(view_length(10, 4, 3), 2);
    cr_assert_eq(view_length(10, 4, 9), 1);
    cr_assert_eq(view_length(10, 16, 0), 1);
    cr_assert_eq(view_length(UINT64_MAX, 2, 0), UINT64_C(1) << 63);
    cr_assert_eq(view_length(UINT64_MAX, UINT64_MAX, 0), 1);
    cr_assert_eq(view_length((UINT64_C(1) << 63) - 25, 8, 0), (UINT64_C(1) << 60) - 3);
}

Test(view, complete_pass_is_empty)
{
    cr_assert_eq(view_length(10, 4, 10), 0);
    cr_assert_eq(view_length(10, 1, 10), 0);
    cr_assert_eq(view_length(10, 4, 11), 0);
    cr_assert_eq(view_length(UINT64_MAX, 3, UINT64_MAX), 0);
}

/* ---- view indices ------------------------------------------------------ */

/* Worked examples of adaptshim(7) "WHAT THE TRAINER SEES" with N = 10, K = 4. */
Test(view, logical_index_matches_spec_examples)
{
    static const uint64_t fresh_pass[4][3] = {{0, 4, 8}, {1, 5, 9}, {2, 6, 0}, {3, 7, 1}};
    for (uint64_t rank = 0; rank < 4; rank++)
        for (uint64_t position = 0; position < 3; position++)
            cr_assert_eq(view_logical_index(10, 4, rank, 0, position), fresh_pass[rank][position]);

    /* Restored at s = 3: 7 remaining records, L = 2, one padding record
     * taken from the start of the permutation: (3 + 3 + 4) - 10 = 0. */
    static const uint64_t resumed[4][2] = {{3, 7}, {4, 8}, {5, 9}, {6, 0}};
    for (uint64_t rank = 0; rank < 4; rank++)
        for (uint64_t position = 0; position < 2; position++)
            cr_assert_eq(view_logical_index(10, 4, rank, 3, position), resumed[rank][position]);
}

/* The ElasticSampler property: for every K, N and s, each replica's view
 * has length L, together they deliver K*L records covering every remaining
 * record, the K*L - (N - s) extra ones are padding, and with K <= N no
 * record is delivered more than twice.  The same holds after the
 * permutation, since it is a bijection. */
static void assert_views_partition(uint64_t record_count, uint64_t replicas, uint64_t start_index,
                                   unsigned *logical_counts, unsigned *permuted_counts)
{
    uint64_t length = view_length(record_count, replicas, start_index);
    uint64_t remaining = record_count - start_index;
    cr_assert_eq(length, (remaining + replicas - 1) / replicas);
    struct record_permutation permutation = shuffled(record_count, 11, "shard", start_index, 0);

    memset(logical_counts, 0, record_count * sizeof *logical_counts);
    memset(permuted_counts, 0, record_count * sizeof *permuted_counts);
    uint64_t delivered = 0;
    for (uint64_t rank = 0; rank < replicas; rank++)
        for (uint64_t position = 0; position < length; position++) {
            uint64_t logical =
                view_logical_index(record_count, replicas, rank, start_index, position);
            cr_assert_lt(logical, record_count);
            cr_assert_eq(logical, (start_index + rank + position * replicas) % record_count);
            logical_counts[logical]++;
            permuted_counts[record_permutation_apply(&permutation, logical)]++;
            delivered++;
        }
    cr_assert_eq(delivered, replicas * length);

    uint64_t padding = 0;
    for (uint64_t index = 0; index < record_count; index++) {
        if (index >= start_index) {
            cr_assert_geq(logical_counts[index], 1, "N=%llu K=%llu s=%llu: %llu missing",
                          (unsigned long long)record_count, (unsigned long long)replicas,
                          (unsigned long long)start_index, (unsigned long long)index);
            cr_assert_geq(permuted_counts[record_permutation_apply(&permutation, index)], 1);
            padding += logical_counts[index] - 1;
        } else {
            padding += logical_counts[index];
        }
        if (replicas <= record_count)
            cr_assert_leq(logical_counts[index], 2);
    }
    cr_assert_eq(padding, replicas * length - remaining);
    cr_assert_lt(padding, replicas);
}

Test(view, union_of_replicas_covers_remaining_records)
{
    static const uint64_t large_counts[] = {1000, 1001};
    unsigned *logical_counts = malloc(1001 * sizeof *logical_counts);
    unsigned *permuted_counts = malloc(1001 * sizeof *permuted_counts);
    cr_assert(logical_counts != NULL && permuted_counts != NULL);

    for (uint64_t replicas = 1; replicas <= 8; replicas++) {
        for (uint64_t record_count = 1; record_count <= 60; record_count++)
            for (uint64_t start_index = 0; start_index < record_count; start_index++)
                assert_views_partition(record_count, replicas, start_index, logical_counts,
                                       permuted_counts);
        for (size_t i = 0; i < 2; i++)
            for (uint64_t start_index = 0; start_index < large_counts[i]; start_index += 37)
                assert_views_partition(large_counts[i], replicas, start_index, logical_counts,
                                       permuted_counts);
        for (size_t i = 0; i < 2; i++)
            for (uint64_t start_index = large_counts[i] - 10; start_index < large_counts[i];
                 start_index++)
                assert_views_partition(large_counts[i], replicas, start_index, logical_counts,
                                       permuted_counts);
    }
    free(logical_counts);
    free(permuted_counts);
}

Test(view, complete_pass_delivers_nothing_to_any_replica)
{
    for (uint64_t replicas = 1; replicas <= 8; replicas++)
        for (uint64_t record_count = 0; record_count <= 60; record_count++) {
            cr_assert_eq(view_length(record_count, replicas, record_count), 0);
            cr_assert_eq(view_current_index(record_count, replicas, record_count, 0),
                         record_count);
        }
}

/* More replicas than remaining records: every replica still gets one record,
 * the padding wraps around the permutation (modulo N), and every index is
 * valid. */
Test(view, more_replicas_than_records_wraps_modulo_count)
{
    cr_assert_eq(view_length(3, 8, 1), 1);
    static const uint64_t expected[8] = {1, 2, 0, 1, 2, 0, 1, 2};
    for (uint64_t rank = 0; rank < 8; rank++)
        cr_assert_eq(view_logical_index(3, 8, rank, 1, 0), expected[rank]);

    cr_assert_eq(view_length(2, 1000, 0), 1);
    for (uint64_t rank = 0; rank < 1000; rank++)
        cr_assert_eq(view_logical_index(2, 1000, rank, 0, 0), rank % 2);
}

/* Near 2^63 the naive s + r + j*K stays representable here, but the code
 * never forms it: check the last positions of each replica against the
 * exact arithmetic. */
Test(view, logical_index_near_2_63_does_not_overflow)
{
    const uint64_t record_count = (UINT64_C(1) << 63) - 25;
    const uint64_t replicas = 7;
    const uint64_t start_index = record_count - 10;
    uint64_t length = view_length(record_count, replicas, start_index);
    cr_assert_eq(length, 2);
    /* Offsets 0..9 are real records, 10..13 padding from index 0. */
    for (uint64_t rank = 0; rank < replicas; rank++)
        for (uint64_t position = 0; position < length; position++) {
            uint64_t offset = rank + position * replicas;
            uint64_t expected = offset < 10 ? start_index + offset : offset - 10;
            cr_assert_eq(view_logical_index(record_count, replicas, rank, start_index, position),
                         expected);
        }

    /* Full 64-bit count, fresh pass, last position: 2^64 - 1 records over 4
     * replicas leave one padding record, for the last replica. */
    length = view_length(UINT64_MAX, 4, 0);
    cr_assert_eq(length, UINT64_C(1) << 62);
    cr_assert_eq(view_logical_index(UINT64_MAX, 4, 3, 0, length - 1), 0);
    cr_assert_eq(view_logical_index(UINT64_MAX, 4, 2, 0, length - 1), UINT64_MAX - 1);
}

/* ---- progress ---------------------------------------------------------- */

Test(view, current_index_advances_by_replicas_and_caps)
{
    cr_assert_eq(view_current_index(10, 4, 0, 0), 0);
    cr_assert_eq(view_current_index(10, 4, 0, 1), 4);
    cr_assert_eq(view_current_index(10, 4, 0, 2), 8);
    cr_assert_eq(view_current_index(10, 4, 0, 3), 10);
    cr_assert_eq(view_current_index(10, 4, 0, 100), 10);
    cr_assert_eq(view_current_index(10, 4, 3, 1), 7);
    cr_assert_eq(view_current_index(10, 4, 3, 2), 10);
    cr_assert_eq(view_current_index(10, 1, 3, 7), 10);
    cr_assert_eq(view_current_index(10, 1, 3, 6), 9);

    /* After a replica delivers its whole view the pass is complete. */
    for (uint64_t replicas = 1; replicas <= 8; replicas++)
        for (uint64_t start_index = 0; start_index <= 60; start_index++) {
            uint64_t length = view_length(60, replicas, start_index);
            cr_assert_eq(view_current_index(60, replicas, start_index, length), 60);
            if (length > 0)
                cr_assert_lt(view_current_index(60, replicas, start_index, length - 1), 60);
        }
}

Test(view, current_index_does_not_overflow_near_2_63)
{
    const uint64_t record_count = (UINT64_C(1) << 63) - 25;
    cr_assert_eq(view_current_index(record_count, 8, 0, UINT64_MAX), record_count);
    cr_assert_eq(view_current_index(record_count, 8, record_count - 5, UINT64_C(1) << 61),
                 record_count);
    cr_assert_eq(view_current_index(record_count, UINT64_MAX, 0, 2), record_count);
    cr_assert_eq(view_current_index(record_count, 8, 0, UINT64_C(1) << 59), UINT64_C(1) << 62);
    cr_assert_eq(view_current_index(UINT64_MAX, UINT64_C(1) << 32, 0, UINT64_C(1) << 32),
                 UINT64_MAX);
    cr_assert_eq(view_current_index(UINT64_MAX, 2, 1, (UINT64_MAX - 1) / 2), UINT64_MAX);
    cr_assert_eq(view_current_index(UINT64_MAX, 2, 0, (UINT64_MAX - 1) / 2), UINT64_MAX - 1);
}
