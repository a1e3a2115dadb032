/* test_sharding.c - K independent processes (ranks from the environment:
 * ADAPTDL_ variables, or torchrun's) each see their share of a dataset read
 * with cat(1): one pass covers every record, each once plus AdaptDL's
 * padding, with equal counts per rank. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define HEADER_SIZE 16
#define RECORD_SIZE 24

/* Records carry their id in their first 8 bytes. */
static char *make_id_dataset(const char *directory, uint64_t records)
{
    char *path = harness_path_in(directory, "ids.bin");
    size_t size = HEADER_SIZE + records * RECORD_SIZE;
    unsigned char *data = calloc(1, size);
    memcpy(data, "IDSHEADER-------", HEADER_SIZE);
    for (uint64_t id = 0; id < records; id++) {
        memcpy(data + HEADER_SIZE + id * RECORD_SIZE, &id, sizeof id);
        memset(data + HEADER_SIZE + id * RECORD_SIZE + 8, (int)(id & 0xff), RECORD_SIZE - 8);
    }
    cr_assert_eq(harness_write_file(path, data, size), 0);
    free(data);
    return path;
}

/* Reads the view with cat, the replica layout given by `layout` (two
 * "NAME=value" settings); returns the ids in view order. */
static uint64_t *read_view_ids_in_layout(const char *path, char *const layout[2],
                                         const char *extra_keys, const char *seed,
                                         size_t *count)
{
    char data[512], seed_text[64];
    snprintf(data, sizeof data, "ADAPTDL_DATA=%s:record=%d:header=%d%s", path, RECORD_SIZE,
             HEADER_SIZE, extra_keys);
    snprintf(seed_text, sizeof seed_text, "ADAPTDL_SEED=%s", seed);
    char *environment[] = {data, layout[0], layout[1], seed_text, NULL};
    char *argv[] = {"/bin/cat", (char *)path, NULL};
    const char *directory = harness_temp_dir();
    char *out_path = harness_path_in(directory, "view");
    pid_t pid = harness_start(argv, environment, true, out_path, NULL);
    cr_assert_eq(harness_wait(pid, 30), 0);
    size_t size;
    unsigned char *view = (unsigned char *)harness_read_file(out_path, &size);
    cr_assert_geq(size, HEADER_SIZE);
    cr_assert_eq(memcmp(view, "IDSHEADER-------", HEADER_SIZE), 0, "header verbatim");
    cr_assert_eq((size - HEADER_SIZE) % RECORD_SIZE, 0);
    *count = (size - HEADER_SIZE) / RECORD_SIZE;
    uint64_t *ids = calloc(*count + 1, sizeof *ids);
    for (size_t i = 0; i < *count; i++) {
        memcpy(&ids[i], view + HEADER_SIZE + i * RECORD_SIZE, sizeof ids[i]);
        unsigned char fill = view[HEADER_SIZE + i * RECORD_SIZE + 8];
        cr_assert_eq(fill, (unsigned char)(ids[i] & 0xff), "record bytes intact");
    }
    free(view);
    harness_remove_temp_dir(directory);
    free((char *)directory);
    free(out_path);
    return ids;
}

/* Reads the view of rank r of K, given by the ADAPTDL_ variables. */
static uint64_t *read_view_ids(const char *path, unsigned replicas, unsigned rank,
                               const char *extra_keys, const char *seed, size_t *count)
{
    char replicas_text[64], rank_text[64];
    snprintf(replicas_text, sizeof replicas_text, "ADAPTDL_NUM_REPLICAS=%u", replicas);
    snprintf(rank_text, sizeof rank_text, "ADAPTDL_REPLICA_RANK=%u", rank);
    char *layout[2] = {replicas_text, rank_text};
    return read_view_ids_in_layout(path, layout, extra_keys, seed, count);
}

static void check_one_pass(uint64_t records, unsigned replicas, const char *keys)
{
    const char *directory = harness_temp_dir();
    char *path = make_id_dataset(directory, records);
    unsigned *seen = calloc(records, sizeof *seen);
    size_t expected_length = (records + replicas - 1) / replicas;
    for (unsigned rank = 0; rank < replicas; rank++) {
        size_t count;
        uint64_t *ids = read_view_ids(path, replicas, rank, keys, "7", &count);
        cr_expect_eq(count, expected_length, "rank %u of %u: %zu records", rank, replicas,
                     count);
        for (size_t i = 0; i < count; i++) {
            cr_assert_lt(ids[i], records);
            seen[ids[i]]++;
        }
        free(ids);
    }
    size_t padding = expected_length * replicas - records;
    size_t twice = 0;
    for (uint64_t id = 0; id < records; id++) {
        cr_expect(seen[id] == 1 || seen[id] == 2, "record %llu seen %u times",
                  (unsigned long long)id, seen[id]);
        if (seen[id] == 2)
            twice++;
    }
    cr_expect_eq(twice, padding, "padding records %zu, expected %zu", twice, padding);
    free(seen);
    free(path);
    harness_remove_temp_dir(directory);
    free((char *)directory);
}

Test(sharding, one_pass_covers_every_record_for_k_1_to_5)
{
    for (unsigned replicas = 1; replicas <= 5; replicas++)
        check_one_pass(103, replicas, "");
}

/* Views without a shuffle: a rank's shard is strided (s + r + j*K, padded
 * from the start), and with sharding off too a rank reads the file. */
Test(sharding, unshuffled_views_are_in_file_order)
{
    static const uint64_t strided[] = {2, 5, 8, 1};
    static const struct {
        const char *name;
        uint64_t records;
        unsigned replicas, rank;
        const char *keys, *seed;
        size_t count;
        const uint64_t *ids;    /* NULL: the records in file order */
    } cases[] = {
        {"unshuffled_shards_are_strided", 10, 3, 2, ":shuffle=0", "0", 4, strided},
        {"shard_zero_shuffle_zero_is_the_file", 77, 4, 3, ":shard=0:shuffle=0", "3", 77, NULL},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const char *directory = harness_temp_dir();
        char *path = make_id_dataset(directory, cases[c].records);
        size_t count;
        uint64_t *ids = read_view_ids(path, cases[c].replicas, cases[c].rank, cases[c].keys,
                                      cases[c].seed, &count);
        cr_assert_eq(count, cases[c].count, "%s: %zu records", cases[c].name, count);
        for (size_t i = 0; i < count; i++)
            cr_expect_eq(ids[i], cases[c].ids != NULL ? cases[c].ids[i] : i, "%s: position %zu",
                         cases[c].name, i);
        free(ids);
        free(path);
        harness_remove_temp_dir(directory);
        free((char *)directory);
    }
}

Test(sharding, shuffle_is_deterministic_and_seeded)
{
    const char *directory = harness_temp_dir();
    char *path = make_id_dataset(directory, 500);
    size_t a_count, b_count, c_count;
    uint64_t *a = read_view_ids(path, 1, 0, "", "11", &a_count);
    uint64_t *b = read_view_ids(path, 1, 0, "", "11", &b_count);
    uint64_t *c = read_view_ids(path, 1, 0, "", "12", &c_count);
    cr_assert_eq(a_count, 500);
    cr_expect_eq(memcmp(a, b, 500 * sizeof *a), 0, "same seed, same order");
    cr_expect_neq(memcmp(a, c, 500 * sizeof *a), 0, "other seed, other order");
    size_t in_place = 0;
    for (size_t i = 0; i < 500; i++)
        in_place += a[i] == i;
    cr_expect_lt(in_place, 50, "shuffled: %zu records in place", in_place);
    free(a);
    free(b);
    free(c);
    free(path);
    harness_remove_temp_dir(directory);
    free((char *)directory);
}

/* torchrun starts plain processes (no mpirun) with WORLD_SIZE and RANK: two
 * such processes read disjoint halves that together are the dataset once. */
Test(sharding, torchrun_world_size_and_rank_split_the_dataset)
{
    enum { RECORDS = 200, REPLICAS = 2 };
    const char *directory = harness_temp_dir();
    char *path = make_id_dataset(directory, RECORDS);
    unsigned seen[RECORDS] = {0};
    for (unsigned rank = 0; rank < REPLICAS; rank++) {
        char rank_text[32];
        snprintf(rank_text, sizeof rank_text, "RANK=%u", rank);
        char *layout[2] = {"WORLD_SIZE=2", rank_text};
        size_t count;
        uint64_t *ids = read_view_ids_in_layout(path, layout, "", "5", &count);
        cr_expect_eq(count, RECORDS / REPLICAS, "rank %u: %zu records", rank, count);
        for (size_t i = 0; i < count; i++) {
            cr_assert_lt(ids[i], RECORDS);
            seen[ids[i]]++;
        }
        free(ids);
    }
    for (unsigned id = 0; id < RECORDS; id++)
        cr_expect_eq(seen[id], 1, "record %u seen %u times", id, seen[id]);
    free(path);
    harness_remove_temp_dir(directory);
    free((char *)directory);
}
