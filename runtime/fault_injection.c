/* fault_injection.c - ADAPTSHIM_FAULT=commit:N:POINT of the test build (see
 * fault_injection.h).  Empty unless built with -DADAPTSHIM_FAULT_INJECTION. */
#include "fault_injection.h"

#ifdef ADAPTSHIM_FAULT_INJECTION
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const fault_point_names[FAULT_POINT_COUNT] = {
    [FAULT_BEFORE_SNAPSHOT] = "before-snapshot",
    [FAULT_SNAPSHOT_TEMP] = "snapshot-temp",
    [FAULT_AFTER_SNAPSHOT] = "after-snapshot",
    [FAULT_AFTER_RENAME] = "after-rename",
};

static pthread_once_t fault_parse_once = PTHREAD_ONCE_INIT;
static int fault_armed_point = -1;      /* -1: no fault asked for */
static uint64_t fault_armed_count;      /* kill at this arrival (1 = first) */
static uint64_t fault_arrivals;

/* A test build given a bad value must not run on as if unarmed: the chaos
 * test would then pass without the kill it asked for. */
static void fault_refuse(const char *value)
{
    fprintf(stderr, "adaptshim: ADAPTSHIM_FAULT='%s' is not commit:N:POINT with N >= 1 and "
                    "POINT one of before-snapshot, snapshot-temp, after-snapshot, "
                    "after-rename\n", value);
    _exit(2);
}

static void fault_parse(void)
{
    const char *value = getenv("ADAPTSHIM_FAULT");
    if (value == NULL || value[0] == '\0')
        return;
    if (strncmp(value, "commit:", 7) != 0)
        fault_refuse(value);
    char *end;
    unsigned long long count = strtoull(value + 7, &end, 10);
    if (end == value + 7 || *end != ':' || count == 0 || value[7] == '-')
        fault_refuse(value);
    for (int point = 0; point < FAULT_POINT_COUNT; point++) {
        if (strcmp(end + 1, fault_point_names[point]) == 0) {
            fault_armed_point = point;
            fault_armed_count = count;
            return;
        }
    }
    fault_refuse(value);
}

void fault_injection_reach(enum fault_point point)
{
    pthread_once(&fault_parse_once, fault_parse);
    if ((int)point != fault_armed_point)
        return;
    if (__atomic_add_fetch(&fault_arrivals, 1, __ATOMIC_RELAXED) != fault_armed_count)
        return;
    /* one line a test can look for, written with write(2) alone */
    char line[96];
    int length = snprintf(line, sizeof line, "adaptshim: fault injected: commit %" PRIu64 " %s\n",
                          fault_armed_count, fault_point_names[point]);
    if (length > 0)
        (void)!write(STDERR_FILENO, line, (size_t)length);
    raise(SIGKILL);
    _exit(137);
}
#else
/* ISO C wants at least one declaration in a translation unit. */
typedef int fault_injection_not_built;
#endif
