/* gen_tokens.c - writes a token file in llm.c's format for the llm.c-style
 * example loader.
 *
 *   gen_tokens --out PATH --records N --tokens-per-record R [--seed S=1]
 *
 * Format (llm.c's .bin token shards): a 1024-byte header of 256 int32le,
 * header[0] = 20240520 (magic), header[1] = 1 (version), header[2] = the
 * token count N*R, the rest 0; then N*R uint16le tokens.  The file is made of
 * N "records" of R tokens (one training batch of B*T tokens each, R = B*T):
 * record `id` starts with the tokens id & 0xffff and id >> 16, so a loader
 * can name the batch it read; its other tokens are pseudo-random in
 * [0, 50257) (GPT-2's vocabulary), drawn from splitmix64 seeded with S, so
 * the same arguments always give the same bytes.
 *
 * llm.c's own shards hold one token more than a whole number of batches
 * (it reads B*T+1 tokens per batch); this file holds exactly N whole
 * records, because a view's payload must be whole records (see adaptshim(7),
 * "Loader styles").  Written to PATH.tmp.PID, then renamed onto PATH. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "probe_common.h"

#define TOKEN_MAGIC 20240520
#define TOKEN_VERSION 1
#define HEADER_INTS 256
#define VOCABULARY 50257

static void put_u32le(unsigned char *out, uint32_t value)
{
    for (int i = 0; i < 4; i++)
        out[i] = (unsigned char)(value >> (8 * i));
}

static void write_or_die(FILE *file, const void *data, size_t size)
{
    if (fwrite(data, 1, size, file) != size) {
        fprintf(stderr, "gen_tokens: writing: %s\n", strerror(errno));
        exit(1);
    }
}

int main(int argc, char **argv)
{
    const char *out = NULL;
    uint64_t records = 0, per_record = 0, seed = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--out") == 0)
            out = argv[i + 1];
        else if (strcmp(argv[i], "--records") == 0)
            records = probe_parse_u64("gen_tokens", argv[i], argv[i + 1]);
        else if (strcmp(argv[i], "--tokens-per-record") == 0)
            per_record = probe_parse_u64("gen_tokens", argv[i], argv[i + 1]);
        else if (strcmp(argv[i], "--seed") == 0)
            seed = probe_parse_u64("gen_tokens", argv[i], argv[i + 1]);
        else {
            fprintf(stderr, "gen_tokens: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    /* two tokens name the record; the count must fit header[2], an int32 */
    if (out == NULL || records == 0 || records > 0xffffffffULL || per_record < 2 ||
        records * per_record > INT32_MAX) {
        fprintf(stderr, "usage: gen_tokens --out PATH --records N --tokens-per-record R>=2 "
                        "[--seed S] (N*R < 2^31)\n");
        return 2;
    }
    char temp[4096];
    snprintf(temp, sizeof temp, "%s.tmp.%ld", out, (long)getpid());
    FILE *file = fopen(temp, "wb");
    if (file == NULL) {
        fprintf(stderr, "gen_tokens: cannot create %s: %s\n", temp, strerror(errno));
        return 1;
    }
    unsigned char header[HEADER_INTS * 4] = {0};
    put_u32le(header, TOKEN_MAGIC);
    put_u32le(header + 4, TOKEN_VERSION);
    put_u32le(header + 8, (uint32_t)(records * per_record));
    write_or_die(file, header, sizeof header);
    uint64_t state = seed;
    for (uint64_t id = 0; id < records; id++) {
        for (uint64_t t = 0; t < per_record; t++) {
            uint16_t token = t == 0   ? (uint16_t)(id & 0xffff)
                             : t == 1 ? (uint16_t)(id >> 16)
                                      : (uint16_t)(probe_splitmix64(&state) % VOCABULARY);
            unsigned char bytes[2] = {(unsigned char)token, (unsigned char)(token >> 8)};
            write_or_die(file, bytes, 2);
        }
    }
    if (fflush(file) != 0 || fsync(fileno(file)) != 0 || fclose(file) != 0 ||
        rename(temp, out) != 0) {
        fprintf(stderr, "gen_tokens: finishing %s: %s\n", out, strerror(errno));
        unlink(temp);
        return 1;
    }
    return 0;
}
