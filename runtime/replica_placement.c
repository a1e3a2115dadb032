/* replica_placement.c - the hosts of a hostfile and the replicas spread
 * over their slots (replica_placement.h). */
#include "replica_placement.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "error_message.h"

/* The value of a `slots=N` field: a decimal from 1 to the replica limit. */
static int parse_slot_count(const char *text, size_t length, uint32_t *out)
{
    uint64_t value = 0;
    if (length == 0 || length > 7)
        return -1;
    for (size_t i = 0; i < length; i++) {
        if (text[i] < '0' || text[i] > '9')
            return -1;
        value = value * 10 + (uint64_t)(text[i] - '0');
    }
    if (value < 1 || value > PLACEMENT_MAX_REPLICAS)
        return -1;
    *out = (uint32_t)value;
    return 0;
}

static struct placement_host *find_or_add_host(struct hostfile *out, const char *name,
                                               size_t length)
{
    for (uint32_t i = 0; i < out->host_count; i++)
        if (strlen(out->hosts[i].name) == length && memcmp(out->hosts[i].name, name, length) == 0)
            return &out->hosts[i];
    if (out->host_count == PLACEMENT_MAX_HOSTS)
        return NULL;
    struct placement_host *host = &out->hosts[out->host_count++];
    memcpy(host->name, name, length);
    host->name[length] = '\0';
    host->slots = 0;
    return host;
}

/* One line without its comment: `HOST [slots=N] [max_slots=N]`. */
static int parse_host_line(const char *line, size_t length, unsigned number,
                           struct hostfile *out, char *error, size_t error_size)
{
    size_t at = 0;
    const char *name = NULL;
    size_t name_length = 0;
    uint32_t slots = 1;
    while (at < length) {
        while (at < length && isspace((unsigned char)line[at]))
            at++;
        if (at == length)
            break;
        size_t start = at;
        while (at < length && !isspace((unsigned char)line[at]))
            at++;
        const char *word = line + start;
        size_t word_length = at - start;
        if (name == NULL) {
            if (word_length > PLACEMENT_MAX_HOST_NAME || memchr(word, '=', word_length))
                return error_message(error, error_size,
                                     "hostfile line %u: \"%.*s\" is not a host name; accepted: "
                                     "HOST [slots=N] [max_slots=N]",
                                     number, (int)(word_length > 80 ? 80 : word_length), word);
            name = word;
            name_length = word_length;
        } else if (word_length > 6 && memcmp(word, "slots=", 6) == 0) {
            if (parse_slot_count(word + 6, word_length - 6, &slots) != 0)
                return error_message(error, error_size,
                                     "hostfile line %u: \"%.*s\" is not accepted: slots=N with "
                                     "N from 1 to %d",
                                     number, (int)(word_length > 80 ? 80 : word_length), word,
                                     PLACEMENT_MAX_REPLICAS);
        } else if ((word_length > 10 && memcmp(word, "max_slots=", 10) == 0) ||
                   (word_length > 10 && memcmp(word, "max-slots=", 10) == 0)) {
            /* a ceiling for oversubscription, which the launcher never does */
        } else {
            return error_message(error, error_size,
                                 "hostfile line %u: \"%.*s\" is not accepted; accepted: HOST "
                                 "[slots=N] [max_slots=N]",
                                 number, (int)(word_length > 80 ? 80 : word_length), word);
        }
    }
    if (name == NULL)
        return 0;
    struct placement_host *host = find_or_add_host(out, name, name_length);
    if (host == NULL)
        return error_message(error, error_size, "hostfile line %u: more than %d hosts", number,
                             PLACEMENT_MAX_HOSTS);
    if (host->slots + slots > PLACEMENT_MAX_REPLICAS)
        return error_message(error, error_size, "hostfile line %u: host %s has more than %d "
                             "slots", number, host->name, PLACEMENT_MAX_REPLICAS);
    host->slots += slots;
    return 0;
}

int hostfile_parse(const char *text, size_t length, struct hostfile *out, char *error,
                   size_t error_size)
{
    out->host_count = 0;
    size_t at = 0;
    unsigned number = 0;
    while (at < length) {
        number++;
        const char *line = text + at;
        const char *newline = memchr(line, '\n', length - at);
        size_t line_length = newline ? (size_t)(newline - line) : length - at;
        at += line_length + (newline ? 1 : 0);
        const char *comment = memchr(line, '#', line_length);
        if (comment != NULL)
            line_length = (size_t)(comment - line);
        if (memchr(line, '\0', line_length) != NULL)
            return error_message(error, error_size, "hostfile line %u holds a NUL byte: not a "
                                 "text file", number);
        if (parse_host_line(line, line_length, number, out, error, error_size) != 0)
            return -1;
    }
    if (out->host_count == 0)
        return error_message(error, error_size, "the hostfile names no host; accepted: lines "
                             "HOST [slots=N]");
    return 0;
}

void hostfile_single_local(struct hostfile *out, uint32_t slots)
{
    out->host_count = 1;
    strcpy(out->hosts[0].name, "localhost");
    out->hosts[0].slots = slots;
}

int replica_placement_plan(const struct hostfile *hosts, uint32_t replicas,
                           struct replica_placement *out, char *error, size_t error_size)
{
    if (replicas < 1 || replicas > PLACEMENT_MAX_REPLICAS)
        return error_message(error, error_size, "%" PRIu32 " replicas: accepted from 1 to %d",
                             replicas, PLACEMENT_MAX_REPLICAS);
    uint64_t total = 0;
    for (uint32_t i = 0; i < hosts->host_count; i++)
        total += hosts->hosts[i].slots;
    if (replicas > total)
        return error_message(error, error_size,
                             "%" PRIu32 " replicas need more than the %" PRIu64 " slots of the "
                             "hostfile's %" PRIu32 " host(s); accepted: at most %" PRIu64,
                             replicas, total, hosts->host_count, total);
    out->replicas = replicas;
    out->host_count = 0;
    uint32_t placed = 0;
    for (uint32_t i = 0; i < hosts->host_count && placed < replicas; i++) {
        uint32_t here = hosts->hosts[i].slots;
        if (here > replicas - placed)
            here = replicas - placed;
        out->uses[out->host_count++] =
            (struct placement_use){.host = i, .first_rank = placed, .local_size = here};
        placed += here;
    }
    return 0;
}

void replica_placement_of_rank(const struct replica_placement *placement, uint32_t rank,
                               struct replica_place *out)
{
    uint32_t group = 0;
    while (group + 1 < placement->host_count &&
           rank >= placement->uses[group].first_rank + placement->uses[group].local_size)
        group++;
    const struct placement_use *use = &placement->uses[group];
    *out = (struct replica_place){.rank = rank,
                                  .group_rank = group,
                                  .local_rank = rank - use->first_rank,
                                  .local_world_size = use->local_size,
                                  .host = use->host};
}

int replica_placement_is_even(const struct replica_placement *placement)
{
    for (uint32_t i = 1; i < placement->host_count; i++)
        if (placement->uses[i].local_size != placement->uses[0].local_size)
            return 0;
    return 1;
}
