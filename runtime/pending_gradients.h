/* pending_gradients.h - the gradient all-reduces a trainer has posted
 * without waiting (MPI_Iallreduce), each kept until a call completes or
 * frees its request (a non-blocking gradient is measured when its
 * request completes, not when it is posted).
 *
 * A request is known by its handle, an opaque pointer that MPI hands out
 * again once it is done with one: adding a handle the table already holds
 * replaces the stale entry, which was completed somewhere the shim does not
 * see.  The table is bounded; the runtime never includes mpi.h, so the
 * handles are kept as opaque pointers.  All functions are thread-safe. */
#ifndef ADAPTSHIM_PENDING_GRADIENTS_H
#define ADAPTSHIM_PENDING_GRADIENTS_H

#include <pthread.h>
#include <stdbool.h>

#define PENDING_GRADIENTS_MAX 256

/* What is measured of a gradient before its reduction starts, blocking or
 * not. */
struct gradient_start {
    bool measuring;             /* the step measures gradient statistics */
    double local_sqr;           /* |local gradient|^2, when measuring */
    double started;             /* monotonic seconds when the reduction started */
    double norm_seconds;        /* spent on the local norm before it started */
};

/* What the measurement needs once the request completes. */
struct pending_gradient {
    const void *request;        /* MPI_Request */
    const void *communicator;   /* MPI_Comm */
    const void *type;           /* MPI_Datatype */
    void *receive;              /* the buffer the sum arrives in */
    int count;
    struct gradient_start start;
};

struct pending_gradients {
    pthread_mutex_t lock;
    int count;                  /* also read without the lock: see _is_empty */
    struct pending_gradient entries[PENDING_GRADIENTS_MAX];
};

#define PENDING_GRADIENTS_INITIALIZER {.lock = PTHREAD_MUTEX_INITIALIZER}

/* Keeps `gradient` until its request is taken, replacing an entry with the
 * same handle.  False when the table is full: nothing is kept. */
bool pending_gradients_add(struct pending_gradients *table,
                           const struct pending_gradient *gradient);

/* Removes the entry of `request`, copying it to *taken (taken may be NULL).
 * False when no entry has that handle. */
bool pending_gradients_take(struct pending_gradients *table, const void *request,
                            struct pending_gradient *taken);

/* True when nothing is pending, read without the lock: the fast path of
 * every completing call.  Only a gradient another thread is posting at that
 * very moment can be missed, and no call can complete a request before the
 * call that posts it has returned. */
bool pending_gradients_is_empty(const struct pending_gradients *table);

#endif
