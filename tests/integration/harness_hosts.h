/* harness_hosts.h - several hosts on this machine for the multi-host tests
 * (adaptdl-wrap(1) "Several hosts (hostfile)"): network namespaces joined by a bridge, made and
 * removed by tests/hosts/netns-hosts of the source tree, with Open MPI reaching them
 * through its rsh agent (tests/hosts/netns-rsh).  The file system is the one
 * they share, as a cluster's network file system would be. */
#ifndef ADAPTSHIM_TEST_HARNESS_HOSTS_H
#define ADAPTSHIM_TEST_HARNESS_HOSTS_H

#include <stdbool.h>
#include <sys/types.h>

#define HARNESS_HOSTS_MAX 4

struct harness_hosts {
    char *directory;                   /* the fixture's files (a temp dir) */
    char *hostfile;                    /* "ADDRESS slots=N" a host */
    unsigned count;
    char addresses[HARNESS_HOSTS_MAX][32];
    char namespaces[HARNESS_HOSTS_MAX][64];
    char interface[32];                /* each host's interface: one name for all */
    /* what Open MPI needs to reach the hosts ("NAME=VALUE"), NULL-ended,
     * with Open MPI's consent to run as root */
    char *mpi_environment[12];
    bool up;
};

/* Makes `count` hosts of `slots` slots each.  Where namespaces cannot be
 * made (not root, no ip netns), prints one line saying why and skips the
 * test.  Whatever happens to the test, the hosts are removed when its
 * process ends (netns-hosts' guard); harness_hosts_down removes them at
 * once. */
void harness_hosts_up(struct harness_hosts *hosts, unsigned count, unsigned slots);
void harness_hosts_down(struct harness_hosts *hosts);
/* Limits what leaves each host to `mbit` megabits per second: traffic
 * between hosts pays it, traffic within a host does not. */
void harness_hosts_slow(struct harness_hosts *hosts, unsigned mbit);
/* The pid of the process named `program` that is rank `rank` of an Open
 * MPI job and runs on host `host` (0 while there is none). */
pid_t harness_hosts_rank_pid(const struct harness_hosts *hosts, unsigned host,
                             const char *program, unsigned rank);
/* Index of the host whose address is `address` (as a rank's host name), or
 * -1. */
int harness_hosts_index(const struct harness_hosts *hosts, const char *address);

#endif
