/* stream_fetch.c - the consumed part of a buffered stream's last fetch (see
 * stream_fetch.h). */
#include "stream_fetch.h"

void stream_fetch_seek_begins(struct stream_fetch *fetch, uint64_t target)
{
    fetch->seeking = true;
    fetch->seek_target = target;
}

void stream_fetch_seek_ends(struct stream_fetch *fetch)
{
    fetch->seeking = false;
}

void stream_fetch_record(struct stream_fetch *fetch, uint64_t pass, uint64_t start,
                         uint64_t length)
{
    fetch->present = length > 0;
    if (!fetch->present)
        return;
    fetch->pass = pass;
    fetch->placed = fetch->seeking;
    fetch->start = start;
    fetch->end = start + length;
    /* the bytes before the seek's target were read only to reach it */
    if (fetch->seeking && fetch->seek_target > fetch->start)
        fetch->start = fetch->seek_target < fetch->end ? fetch->seek_target : fetch->end;
}

bool stream_fetch_consumed(const struct stream_fetch *fetch, uint64_t unread, uint64_t *pass,
                           uint64_t *start, uint64_t *length)
{
    if (!fetch->present)
        return false;
    uint64_t fetched = fetch->end - fetch->start;
    *pass = fetch->pass;
    *start = fetch->start;
    *length = unread < fetched ? fetched - unread : 0;
    return true;
}

void stream_fetch_forget(struct stream_fetch *fetch)
{
    fetch->present = false;
}
