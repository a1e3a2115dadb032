/* goodput_network.h - which link a gradient all-reduce crosses and how its
 * cost grows with the replica count: the pieces of AdaptDL's network model
 * that both the prediction (goodput.c) and the fit (goodput_fit.c) use. */
#ifndef ADAPTSHIM_GOODPUT_NETWORK_H
#define ADAPTSHIM_GOODPUT_NETWORK_H

#include <stdint.h>

/* AdaptDL's stand-in for a retrogression factor max(K - 2, 0) that must
 * stay positive, and for the network time of a single replica. */
#define NETWORK_TINY 1e-8

/* Which link bottlenecks the gradient all-reduce: AdaptDL's np.select over
 * (nodes > 1, replicas > 1) with a tiny default for one replica. */
enum network_link {
    NETWORK_LINK_NONE = 0,     /* one replica: nothing to synchronize */
    NETWORK_LINK_INTRA_NODE,
    NETWORK_LINK_INTER_NODE,
};

static inline enum network_link network_link_of(uint32_t nodes, uint32_t replicas)
{
    if (nodes > 1)
        return NETWORK_LINK_INTER_NODE;
    if (replicas > 1)
        return NETWORK_LINK_INTRA_NODE;
    return NETWORK_LINK_NONE;
}

/* The retrogression multiplier max(K - 2, 1e-8): ring all-reduce takes a
 * number of rounds that grows with K, felt beyond two replicas. */
static inline double network_retrogression_multiplier(uint32_t replicas)
{
    double beyond_two = (double)replicas - 2.0;
    return beyond_two > NETWORK_TINY ? beyond_two : NETWORK_TINY;
}

#endif
