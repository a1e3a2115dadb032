/* bench_permutation.c - cost of computing a shuffled view index on demand.
 *
 * For each record count N, replica 1 of a K = 4 view is walked in order, as
 * a trainer reading its view sequentially would: each step computes the
 * logical index (view_logical_index) and permutes it
 * (record_permutation_apply).  For small N the same walk is then timed
 * against a materialized permutation (a uint64_t array holding the same
 * order), which is what the Feistel network saves memory over: 8 bytes per
 * record.  The target is well under 50 ns per index (adaptshim(7) "What the
 * trainer sees" has the permutation).
 *
 * Each measurement covers at least MEASURE_MIN_INDICES indices (the view is
 * walked again if it is shorter) and at most MEASURE_MAX_INDICES (a prefix of
 * a longer view), which keeps the whole run to a few seconds.  Arrays are
 * only built for N = 10^3 and 10^6: building one for 10^8 took most of the
 * run time (800 MB, page faults included) without telling anything new.
 *
 * The cost per index depends on how far N is below the Feistel domain 2^b:
 * the cycle walk takes at most 2^b / N network passes on average, about
 * 1.02 for N = 10^3, 1.05 for 10^6, 1.34 for 10^8 and 1.07 for 10^9, and
 * just under 2 for N = 2^k + 1, the worst case, which the last lines measure
 * (2^63 + 1 also exercises the full 64-bit domain). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench_common.h"
#include "permutation.h"

#define BENCH_REPLICAS 4
#define BENCH_RANK 1
#define MEASURE_MIN_INDICES UINT64_C(5000000)
#define MEASURE_MAX_INDICES UINT64_C(5000000)

/* Results are summed into a volatile so that the compiler cannot drop the
 * work being measured. */
static volatile uint64_t bench_sink;

/* How many times to walk a view of `length` indices, and how much of it, so
 * that a measurement covers MEASURE_MIN..MAX_INDICES indices. */
static void bench_plan(uint64_t length, uint64_t *repeats, uint64_t *walked)
{
    *walked = length < MEASURE_MAX_INDICES ? length : MEASURE_MAX_INDICES;
    *repeats = (MEASURE_MIN_INDICES + *walked - 1) / *walked;
}

/* Nanoseconds per index for a walk over this rank's view: through the
 * on-demand Feistel permutation, or, where materialized is not NULL, through
 * that materialized permutation instead (the view arithmetic is kept, so
 * only the permutation step differs; the choice between the two is a branch
 * that goes the same way every time, so it costs both walks alike). */
static double bench_walk(const struct record_permutation *permutation,
                         const uint64_t *materialized, uint64_t record_count)
{
    uint64_t repeats, walked;
    bench_plan(view_length(record_count, BENCH_REPLICAS, 0), &repeats, &walked);

    uint64_t sum = 0;
    double start = bench_monotonic_seconds();
    for (uint64_t repeat = 0; repeat < repeats; repeat++)
        for (uint64_t position = 0; position < walked; position++) {
            uint64_t logical =
                view_logical_index(record_count, BENCH_REPLICAS, BENCH_RANK, 0, position);
            sum += materialized != NULL ? materialized[logical]
                                        : record_permutation_apply(permutation, logical);
        }
    double elapsed = bench_monotonic_seconds() - start;
    bench_sink += sum;
    return elapsed * 1e9 / (double)(repeats * walked);
}

/* Prints what a materialized permutation of N records would cost (8N
 * bytes) in the largest decimal unit that keeps the figure at least 1, so
 * that 8 MB and 74 EB both read naturally. */
static void print_array_size(uint64_t record_count)
{
    static const char *const units[] = {"B", "kB", "MB", "GB", "TB", "PB", "EB"};
    double size = (double)record_count * sizeof(uint64_t);
    size_t unit = 0;
    while (size >= 1000 && unit + 1 < sizeof units / sizeof units[0]) {
        size /= 1000;
        unit++;
    }
    printf("%.0f %s", size, units[unit]);
}

/* Times the Feistel view for N records, and the array if `materialize`
 * (the array costs 8N bytes, and building it N permutation calls). */
static void bench_record_count(uint64_t record_count, int materialize, const char *note)
{
    struct record_permutation permutation;
    record_permutation_init(&permutation, record_count, 1, 42, "train.bin", 0, 0);
    double feistel_ns = bench_walk(&permutation, NULL, record_count);

    if (!materialize) {
        printf("N=%-19" PRIu64 " feistel %5.1f ns/index  array n/a (", record_count, feistel_ns);
        print_array_size(record_count);
        printf(")%s\n", note);
        return;
    }

    uint64_t *materialized = malloc(record_count * sizeof *materialized);
    if (materialized == NULL) {
        printf("N=%-19" PRIu64 " feistel %5.1f ns/index  array n/a (out of memory)%s\n",
               record_count, feistel_ns, note);
        return;
    }
    double build_start = bench_monotonic_seconds();
    for (uint64_t index = 0; index < record_count; index++)
        materialized[index] = record_permutation_apply(&permutation, index);
    double build_seconds = bench_monotonic_seconds() - build_start;
    double array_ns = bench_walk(&permutation, materialized, record_count);
    free(materialized);

    printf("N=%-19" PRIu64 " feistel %5.1f ns/index  array %5.1f ns/index  ratio %.1fx"
           "  (array built in %.2f s)%s\n",
           record_count, feistel_ns, array_ns, feistel_ns / array_ns, build_seconds, note);
}

int main(void)
{
    printf("permutation: K=%d r=%d sequential view walk, ns per permuted index\n",
           BENCH_REPLICAS, BENCH_RANK);
    bench_record_count(UINT64_C(1000), 1, "");
    bench_record_count(UINT64_C(1000000), 1, "");
    bench_record_count(UINT64_C(100000000), 0, "");
    bench_record_count(UINT64_C(1000000000), 0, "");
    bench_record_count((UINT64_C(1) << 20) + 1, 0, "  (worst case: 2^20 + 1)");
    bench_record_count((UINT64_C(1) << 28) + 1, 0, "  (worst case: 2^28 + 1)");
    bench_record_count((UINT64_C(1) << 29) + 1, 0, "  (worst case: 2^29 + 1)");
    bench_record_count((UINT64_C(1) << 40) + 1, 0, "  (worst case: 2^40 + 1)");
    bench_record_count((UINT64_C(1) << 63) + 1, 0, "  (worst case: 2^63 + 1)");
    return 0;
}
