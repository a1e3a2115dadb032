/* epoch_loop.c - the loop over epochs (see epoch_loop.h). */
#include "epoch_loop.h"
#include "error_message.h"

#include <stddef.h>

void epoch_loop_init(struct epoch_loop *loop)
{
    loop->finished = 0;
    loop->current = EPOCH_LOOP_NONE;
    loop->end = 0;
    loop->running = false;
    loop->begun = false;
}

static int64_t epoch_loop_enter_next(struct epoch_loop *loop)
{
    if (loop->finished < loop->end) {
        loop->current = loop->finished;
        return loop->current;
    }
    loop->current = EPOCH_LOOP_NONE;
    loop->running = false;
    return EPOCH_LOOP_NONE;
}

int64_t epoch_loop_begin(struct epoch_loop *loop, int64_t end, char *error, size_t error_size)
{
    if (loop->running) {
        error_message(error, error_size,
                      "overlapping epoch loops: a loop over epochs began while "
                      "epoch %lld of another was running; finish or leave it first",
                      (long long)loop->current);
        return EPOCH_LOOP_ERROR;
    }
    loop->running = true;
    loop->begun = true;
    loop->end = end;
    return epoch_loop_enter_next(loop);
}

int64_t epoch_loop_next(struct epoch_loop *loop)
{
    if (!loop->running)
        return EPOCH_LOOP_NONE;
    loop->finished++;
    return epoch_loop_enter_next(loop);
}

void epoch_loop_leave(struct epoch_loop *loop)
{
    if (!loop->running)
        return;
    loop->finished++;
    loop->current = EPOCH_LOOP_NONE;
    loop->running = false;
}
