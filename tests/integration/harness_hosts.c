/* harness_hosts.c - the multi-host fixture of harness_hosts.h: a thin
 * front to tests/hosts/netns-hosts, plus finding a rank's process inside a
 * host's namespace. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "harness_hosts.h"

static char *hosts_script(void)
{
    char *path = NULL;
    if (asprintf(&path, "%s/tests/hosts/netns-hosts", harness_source_tree()) < 0)
        abort();
    return path;
}

void harness_hosts_up(struct harness_hosts *hosts, unsigned count, unsigned slots)
{
    memset(hosts, 0, sizeof *hosts);
    cr_assert(count >= 1 && count <= HARNESS_HOSTS_MAX);
    char *script = hosts_script();
    struct run_result result;
    harness_run(&result, (char *[]){script, "check", NULL}, NULL, false, 60);
    if (result.status == 77) {
        char *end = strchr(result.out, '\n');
        if (end)
            *end = '\0';
        fprintf(stderr, "skipped: several hosts on this machine: %s\n", result.out);
        run_result_free(&result);
        free(script);
        cr_skip_test("several hosts cannot be made here");
    }
    cr_assert_eq(result.status, 0, "netns-hosts check: %s%s", result.out, result.err);
    run_result_free(&result);

    hosts->directory = (char *)harness_temp_dir();
    hosts->count = count;
    char count_text[16], slots_text[16], owner[48];
    snprintf(count_text, sizeof count_text, "%u", count);
    snprintf(slots_text, sizeof slots_text, "%u", slots);
    snprintf(owner, sizeof owner, "NETNS_HOSTS_OWNER=%d", (int)getpid());
    harness_run(&result, (char *[]){script, "up", count_text, hosts->directory, slots_text, NULL},
                (char *[]){owner, NULL}, false, 120);
    hosts->up = true;
    cr_assert_eq(result.status, 0, "netns-hosts up: %s%s", result.out, result.err);
    run_result_free(&result);
    free(script);

    hosts->hostfile = harness_path_in(hosts->directory, "hostfile");
    char *list_path = harness_path_in(hosts->directory, "hosts");
    FILE *list = fopen(list_path, "r");
    cr_assert_not_null(list, "%s", list_path);
    for (unsigned i = 0; i < count; i++)
        cr_assert_eq(fscanf(list, "%31s %63s", hosts->addresses[i], hosts->namespaces[i]), 2);
    fclose(list);
    free(list_path);

    char *interface_path = harness_path_in(hosts->directory, "interface");
    char *interface = harness_read_file(interface_path, NULL);
    cr_assert_not_null(interface, "%s", interface_path);
    interface[strcspn(interface, "\n")] = '\0';
    snprintf(hosts->interface, sizeof hosts->interface, "%s", interface);
    free(interface);
    free(interface_path);

    char *environment_path = harness_path_in(hosts->directory, "mpi.env");
    char *text = harness_read_file(environment_path, NULL);
    cr_assert_not_null(text, "%s", environment_path);
    size_t used = 0;
    hosts->mpi_environment[used++] = harness_mpirun_as_root[0];
    hosts->mpi_environment[used++] = harness_mpirun_as_root[1];
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line && used < 11;
         line = strtok_r(NULL, "\n", &save))
        hosts->mpi_environment[used++] = strdup(line);
    hosts->mpi_environment[used] = NULL;
    free(text);
    free(environment_path);
}

void harness_hosts_down(struct harness_hosts *hosts)
{
    if (!hosts->up)
        return;
    char *script = hosts_script();
    struct run_result result;
    harness_run(&result, (char *[]){script, "down", hosts->directory, NULL}, NULL, false, 120);
    hosts->up = false;
    cr_expect_eq(result.status, 0, "netns-hosts down: %s%s", result.out, result.err);
    run_result_free(&result);
    free(script);
}

void harness_hosts_slow(struct harness_hosts *hosts, unsigned mbit)
{
    char *script = hosts_script();
    char text[16];
    snprintf(text, sizeof text, "%u", mbit);
    struct run_result result;
    harness_run(&result, (char *[]){script, "slow", hosts->directory, text, NULL}, NULL, false,
                60);
    cr_assert_eq(result.status, 0, "netns-hosts slow: %s%s", result.out, result.err);
    run_result_free(&result);
    free(script);
}

int harness_hosts_index(const struct harness_hosts *hosts, const char *address)
{
    for (unsigned i = 0; i < hosts->count; i++)
        if (strcmp(hosts->addresses[i], address) == 0)
            return (int)i;
    return -1;
}

/* Whether /proc/PID's environment holds `entry` ("NAME=VALUE"). */
static bool process_environment_has(const char *pid, const char *entry)
{
    char path[320];
    snprintf(path, sizeof path, "/proc/%s/environ", pid);
    size_t size = 0;
    char *environment = harness_read_file(path, &size);
    bool found = false;
    for (size_t at = 0; environment && at < size; at += strlen(environment + at) + 1)
        if (strcmp(environment + at, entry) == 0) {
            found = true;
            break;
        }
    free(environment);
    return found;
}

pid_t harness_hosts_rank_pid(const struct harness_hosts *hosts, unsigned host,
                             const char *program, unsigned rank)
{
    char namespace_path[128];
    snprintf(namespace_path, sizeof namespace_path, "/run/netns/%s", hosts->namespaces[host]);
    struct stat wanted;
    if (stat(namespace_path, &wanted) != 0)
        return 0;
    char rank_entry[64];
    snprintf(rank_entry, sizeof rank_entry, "OMPI_COMM_WORLD_RANK=%u", rank);
    DIR *proc = opendir("/proc");
    if (proc == NULL)
        return 0;
    pid_t found = 0;
    for (struct dirent *entry; found == 0 && (entry = readdir(proc)) != NULL;) {
        if (entry->d_name[0] < '0' || entry->d_name[0] > '9')
            continue;
        char path[320];
        snprintf(path, sizeof path, "/proc/%s/comm", entry->d_name);
        char *name = harness_read_file(path, NULL);
        bool named = name && strncmp(name, program, strlen(program)) == 0 &&
                     (name[strlen(program)] == '\n' || name[strlen(program)] == '\0');
        free(name);
        if (!named)
            continue;
        snprintf(path, sizeof path, "/proc/%s/ns/net", entry->d_name);
        struct stat in;
        if (stat(path, &in) != 0 || in.st_ino != wanted.st_ino || in.st_dev != wanted.st_dev)
            continue;
        if (process_environment_has(entry->d_name, rank_entry))
            found = (pid_t)atoi(entry->d_name);
    }
    closedir(proc);
    return found;
}
