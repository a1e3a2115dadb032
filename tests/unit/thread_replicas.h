/* thread_replicas.h - K replicas as K threads of one test, joined by an
 * in-process all-gather installed as the runtime's replica_collective, so
 * that collectives (accumulator synchronization, batch-size agreement) are
 * tested the way replicas run them: every replica enters, each gets
 * everyone's bytes in rank order. */
#ifndef ADAPTSHIM_TEST_THREAD_REPLICAS_H
#define ADAPTSHIM_TEST_THREAD_REPLICAS_H

/* Runs body(rank, replicas, argument) on `replicas` threads at once and
 * waits for them; restores the single-replica transport afterwards. */
void thread_replicas_run(unsigned replicas, void (*body)(unsigned rank, unsigned replicas,
                                                         void *argument),
                         void *argument);

#endif
