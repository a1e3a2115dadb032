/* remote_command.h - the shell command line that starts one replica on
 * another host through an rsh-like agent (adaptdl-torch-launch,
 * adaptdl-wrap(1) "PYTORCH JOBS"):
 *
 *   cd 'DIR' && exec env 'NAME=VALUE'... sh -c 'CONTROL' adaptdl-replica 'COMMAND'...
 *
 * Every word is single-quoted for a POSIX shell, so that any byte but NUL
 * reaches the replica as it was.  CONTROL runs the replica (by exec: it
 * keeps the shell's pid) beside a reader of the shell's standard input,
 * the launcher's control channel: each line is a signal name sent to the
 * replica (`kill -s NAME`), and the end of the input (the launcher or the
 * agent died) kills it with SIGKILL.  The replica's own standard input is
 * /dev/null. */
#ifndef ADAPTSHIM_REMOTE_COMMAND_H
#define ADAPTSHIM_REMOTE_COMMAND_H

/* The line for `command` (NULL-terminated, at least one word) run in
 * `directory` (NULL: where the agent's shell starts) with `variables`
 * ("NAME=VALUE", NULL-terminated, may be NULL).  A malloc'd string, or
 * NULL when memory runs out. */
char *remote_command_line(const char *directory, char *const variables[],
                          char *const command[]);

#endif
