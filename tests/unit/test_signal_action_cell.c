/* test_signal_action_cell.c - a signal disposition published to signal
 * handlers (runtime/signal_action_cell.h).
 *
 * A value reads back whole; an empty cell reads as "none installed"; and
 * while one thread keeps publishing values, a signal handler that
 * interrupts it in the middle of a change, and a reader on another thread,
 * only ever see whole values.  Every value published in the stress tests is
 * one byte repeated over the whole struct sigaction, so a value torn
 * between two changes shows as two different bytes.  (Regression: the
 * shim's sigaction wrapper wrote the trainer's action in place, where a
 * stop signal arriving during the copy read half of it.) */
#include <criterion/criterion.h>

#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>

#include "signal_action_cell.h"

static struct signal_action_value value_of_byte(unsigned char byte)
{
    struct signal_action_value value;
    memset(&value, 0, sizeof value);
    value.installed = true;
    memset(&value.action, byte, sizeof value.action);
    return value;
}

/* True when the action is one byte repeated (a whole published value). */
static bool value_is_whole(const struct signal_action_value *value)
{
    const unsigned char *bytes = (const unsigned char *)&value->action;
    for (size_t i = 1; i < sizeof value->action; i++)
        if (bytes[i] != bytes[0])
            return false;
    return value->installed;
}

Test(signal_action_cell, an_empty_cell_reads_as_none_installed)
{
    static struct signal_action_cell cell;
    struct signal_action_value value;
    signal_action_cell_read(&cell, &value);
    cr_expect_not(value.installed);
}

Test(signal_action_cell, a_published_value_reads_back_whole)
{
    static struct signal_action_cell cell;
    struct signal_action_value first = {.installed = true};
    first.action.sa_handler = SIG_IGN;
    first.action.sa_flags = SA_RESTART;
    sigaddset(&first.action.sa_mask, SIGUSR2);
    signal_action_cell_publish(&cell, &first);
    struct signal_action_value read;
    signal_action_cell_read(&cell, &read);
    cr_expect(read.installed);
    cr_expect_eq(read.action.sa_handler, SIG_IGN);
    cr_expect_eq(read.action.sa_flags, SA_RESTART);
    cr_expect(sigismember(&read.action.sa_mask, SIGUSR2));
    /* more changes than the ring has slots: always the latest */
    for (unsigned i = 0; i < 3 * SIGNAL_ACTION_CELL_SLOTS; i++) {
        struct signal_action_value next = value_of_byte((unsigned char)i);
        signal_action_cell_publish(&cell, &next);
        signal_action_cell_read(&cell, &read);
        cr_assert_eq(memcmp(&read.action, &next.action, sizeof next.action), 0, "change %u", i);
    }
}

/* --- a writer interrupted by signals, and a reader beside it --------------- */

/* Reads each stress test makes while the writer keeps publishing. */
#define HANDLER_READS_WANTED 5000
#define READER_READS_WANTED 1000000

static struct signal_action_cell stressed;
static volatile sig_atomic_t handler_reads;
static volatile sig_atomic_t handler_torn;
static int stop_publishing;

static void read_in_handler(int signal_number)
{
    (void)signal_number;
    struct signal_action_value value;
    signal_action_cell_read(&stressed, &value);
    handler_reads++;
    if (!value_is_whole(&value))
        handler_torn++;
}

/* Publishes changes until told to stop. */
static void *keep_publishing(void *unused)
{
    (void)unused;
    for (unsigned i = 1; !__atomic_load_n(&stop_publishing, __ATOMIC_ACQUIRE); i++) {
        struct signal_action_value value = value_of_byte((unsigned char)(i % 255 + 1));
        signal_action_cell_publish(&stressed, &value);
    }
    return NULL;
}

static void start_publishing(pthread_t *writer)
{
    struct signal_action_value first = value_of_byte(1);
    signal_action_cell_publish(&stressed, &first);
    cr_assert_eq(pthread_create(writer, NULL, keep_publishing, NULL), 0);
}

static void stop_and_join(pthread_t writer)
{
    __atomic_store_n(&stop_publishing, 1, __ATOMIC_RELEASE);
    pthread_join(writer, NULL);
}

/* Signals at the writer, wherever it is in a change: the handler runs on
 * the writer's own thread, in the middle of its copy. */
Test(signal_action_cell, a_handler_that_interrupts_a_change_sees_a_whole_value)
{
    struct sigaction handler;
    memset(&handler, 0, sizeof handler);
    handler.sa_handler = read_in_handler;
    sigemptyset(&handler.sa_mask);
    handler.sa_flags = SA_RESTART;
    cr_assert_eq(sigaction(SIGUSR2, &handler, NULL), 0);
    pthread_t writer;
    start_publishing(&writer);
    while (handler_reads < HANDLER_READS_WANTED)
        cr_assert_eq(pthread_kill(writer, SIGUSR2), 0);
    stop_and_join(writer);
    cr_expect_eq(handler_torn, 0, "%d of %d reads in a handler saw half a change",
                 handler_torn, handler_reads);
}

/* A reader on another thread, beside the writer. */
Test(signal_action_cell, a_reader_beside_the_writer_sees_whole_values)
{
    pthread_t writer;
    start_publishing(&writer);
    unsigned long torn = 0;
    for (unsigned long i = 0; i < READER_READS_WANTED; i++) {
        struct signal_action_value value;
        signal_action_cell_read(&stressed, &value);
        torn += !value_is_whole(&value);
    }
    stop_and_join(writer);
    cr_expect_eq(torn, 0, "%lu of %d reads beside the writer saw half a change", torn,
                 READER_READS_WANTED);
}
