/* stop_signal_state.c - the deferred stop signal's facts, written by the
 * stop handler and read by the ending (see stop_signal_state.h). */
#include "stop_signal_state.h"

volatile sig_atomic_t shim_stop_signal;
volatile sig_atomic_t shim_handler_ran_before_exit;

struct stop_exit_facts shim_stop_exit_facts(void)
{
    return (struct stop_exit_facts){
        .stop_deferred = shim_stop_signal != 0,
        .trainer_handler_ran_before_exit = shim_handler_ran_before_exit != 0,
    };
}
