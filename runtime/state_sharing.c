/* state_sharing.c - does every replica see the state directory rank 0
 * writes in?  One marker file and two collectives at start-up (see
 * state_sharing.h); the shim runs it once MPI is up on several replicas. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "error_message.h"
#include "replica_collective.h"
#include "state_sharing.h"
#include "sysio.h"

/* What each replica contributes to the all-gather: whether it saw the
 * marker, then its host name (NUL-terminated, cut to fit). */
#define STATE_SHARING_HOST_MAX 128

int state_sharing_marker_path(const char *directory, uint64_t token, char *path,
                              size_t path_size)
{
    int length = snprintf(path, path_size, "%s/.shared-check.%016" PRIx64, directory, token);
    return length < 0 || (size_t)length >= path_size ? -1 : 0;
}

int state_sharing_sees_marker(const char *directory, uint64_t token)
{
    char path[4096];
    if (state_sharing_marker_path(directory, token, path, sizeof path) != 0)
        return 0;
    int fd = runtime_sysio.open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    char text[32] = {0};
    ssize_t got = sysio_pread_full(fd, text, sizeof text - 1, 0);
    runtime_sysio.close(fd);
    if (got <= 0)
        return 0;
    char expected[32];
    snprintf(expected, sizeof expected, "%016" PRIx64 "\n", token);
    return strcmp(text, expected) == 0;
}

/* Rank 0's marker: written whole, then seen by the others (a network file
 * system shows a closed file to other hosts: close-to-open consistency). */
static int state_sharing_write_marker(const char *directory, uint64_t token)
{
    char path[4096];
    if (state_sharing_marker_path(directory, token, path, sizeof path) != 0)
        return -1;
    int fd = runtime_sysio.open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    char text[32];
    int length = snprintf(text, sizeof text, "%016" PRIx64 "\n", token);
    int written = sysio_write_all(fd, text, (size_t)length);
    if (runtime_sysio.close(fd) != 0 || written != 0) {
        runtime_sysio.unlink(path);
        return -1;
    }
    return 0;
}

static uint64_t state_sharing_clock_token(void)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    uint64_t token = ((uint64_t)now.tv_sec * 1000000007u) ^ (uint64_t)now.tv_nsec ^
                     ((uint64_t)getpid() << 32);
    return token ? token : 1;
}

/* Appends ", NAME" (or "NAME" first) to `list` unless NAME is in it. */
static void state_sharing_add_host(char *list, size_t list_size, const char *name)
{
    size_t name_length = strlen(name);
    for (const char *at = list; (at = strstr(at, name)) != NULL; at += name_length) {
        bool starts = at == list || (at >= list + 2 && at[-2] == ',' && at[-1] == ' ');
        bool ends = at[name_length] == '\0' || at[name_length] == ',';
        if (starts && ends)
            return;
    }
    size_t used = strlen(list);
    snprintf(list + used, list_size - used, "%s%s", used ? ", " : "", name);
}

/* Rank 0's token to every replica: an all-gather through the transport
 * itself, not replica_collective_allgather, whose check against the
 * cooperative API's view of the job is not this check's business (it runs
 * right after MPI_Init, before a trainer may have asked the API anything). */
static int state_sharing_broadcast_token(uint64_t token, uint64_t *agreed, char *error,
                                         size_t error_size)
{
    struct replica_gathered gathered;
    if (replica_collective.allgather(replica_collective.context, &token, sizeof token,
                                     &gathered, error, error_size) != 0)
        return -1;
    int status = 0;
    if (gathered.replicas == 0 || gathered.sizes[0] != sizeof token)
        status = error_message(error, error_size, "rank 0 sent no token");
    else
        memcpy(agreed, gathered.parts[0], sizeof *agreed);
    replica_gathered_free(&gathered);
    return status;
}

int state_sharing_check(const char *directory, unsigned rank, const char *host,
                        uint64_t fresh_token, char *message, size_t message_size, char *error,
                        size_t error_size)
{
    message[0] = '\0';
    uint64_t token = 0;
    if (rank == 0) {
        token = fresh_token ? fresh_token : state_sharing_clock_token();
        if (state_sharing_write_marker(directory, token) != 0) {
            error_message(message, message_size,
                          "cannot write a marker in the state directory \"%s\" (%s): "
                          "whether every host sees it is not checked",
                          directory, strerror(errno));
            token = 0;
        }
    }
    uint64_t agreed = 0;
    if (state_sharing_broadcast_token(token, &agreed, error, error_size) != 0) {
        if (token != 0) {
            char path[4096];
            if (state_sharing_marker_path(directory, token, path, sizeof path) == 0)
                runtime_sysio.unlink(path);
        }
        return -1;
    }
    if (agreed == 0) {
        if (rank != 0)
            error_message(message, message_size,
                          "rank 0 could not write a marker in the state directory \"%s\": "
                          "whether every host sees it is not checked",
                          directory);
        return STATE_SHARING_UNKNOWN;
    }

    unsigned char mine[1 + STATE_SHARING_HOST_MAX] = {0};
    mine[0] = rank == 0 || state_sharing_sees_marker(directory, agreed) ? 1 : 0;
    snprintf((char *)mine + 1, STATE_SHARING_HOST_MAX, "%s", host ? host : "?");
    struct replica_gathered gathered;
    int gathered_status = replica_collective.allgather(replica_collective.context, mine,
                                                       sizeof mine, &gathered, error,
                                                       error_size);
    if (rank == 0) {
        /* every replica has looked once the all-gather is done */
        char path[4096];
        if (state_sharing_marker_path(directory, agreed, path, sizeof path) == 0)
            runtime_sysio.unlink(path);
    }
    if (gathered_status != 0)
        return -1;

    unsigned blind = 0, first_blind = 0;
    char hosts[512] = "";
    for (unsigned r = 0; r < gathered.replicas; r++) {
        const unsigned char *part = gathered.parts[r];
        if (gathered.sizes[r] != sizeof mine || part[0] != 0)
            continue;
        if (blind++ == 0)
            first_blind = r;
        char name[STATE_SHARING_HOST_MAX];
        snprintf(name, sizeof name, "%s", (const char *)part + 1);
        state_sharing_add_host(hosts, sizeof hosts, name);
    }
    char rank0_host[STATE_SHARING_HOST_MAX] = "?";
    if (gathered.replicas > 0 && gathered.sizes[0] == sizeof mine)
        snprintf(rank0_host, sizeof rank0_host, "%s", (const char *)gathered.parts[0] + 1);
    unsigned replicas = gathered.replicas;
    replica_gathered_free(&gathered);
    if (blind == 0)
        return STATE_SHARING_SHARED;
    error_message(message, message_size,
                  "the state directory \"%s\" (ADAPTDL_CHECKPOINT_PATH) is not shared by "
                  "every host: %u of %u ranks (the first: rank %u; host %s) do not see "
                  "the file rank 0 on host %s wrote there; put it on a file system every "
                  "host mounts at the same path",
                  directory, blind, replicas, first_blind, hosts, rank0_host);
    return STATE_SHARING_NOT_SHARED;
}
