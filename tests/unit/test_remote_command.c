/* test_remote_command.c - the command line of a replica on another host
 * (runtime/remote_command.h), run by /bin/sh as an agent's remote shell
 * would: words with spaces, quotes and `$` reach the replica as they were,
 * with the variables and in the directory given; a line on the control
 * channel is a signal for the replica; the channel's end kills it. */
#include <criterion/criterion.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "remote_command.h"

/* A running remote shell: its pid, the control channel, its stdout. */
struct remote_shell {
    pid_t pid;
    int control;
    int output;
};

static struct remote_shell start_remote_shell(const char *line)
{
    int control[2], output[2];
    cr_assert_eq(pipe(control), 0);
    cr_assert_eq(pipe(output), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        dup2(control[0], STDIN_FILENO);
        dup2(output[1], STDOUT_FILENO);
        close(control[0]);
        close(control[1]);
        close(output[0]);
        close(output[1]);
        execl("/bin/sh", "sh", "-c", line, (char *)NULL);
        _exit(127);
    }
    close(control[0]);
    close(output[1]);
    return (struct remote_shell){.pid = pid, .control = control[1], .output = output[0]};
}

/* Reads the shell's stdout up to its end (the replica exited). */
static char *read_all(int fd)
{
    size_t used = 0, capacity = 4096;
    char *text = malloc(capacity);
    ssize_t got;
    while ((got = read(fd, text + used, capacity - used - 1)) > 0) {
        used += (size_t)got;
        if (used + 1 == capacity)
            text = realloc(text, capacity *= 2);
    }
    text[used] = '\0';
    close(fd);
    return text;
}

static int wait_for(pid_t pid)
{
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    return status;
}

/* Starts command (which prints "ready\n" first) through its remote command
 * line, kept in *line, and waits until it is ready. */
static struct remote_shell start_when_ready(char *const command[], char **line)
{
    *line = remote_command_line(NULL, NULL, command);
    struct remote_shell shell = start_remote_shell(*line);
    char ready[6] = "";
    cr_assert_eq(read(shell.output, ready, 6), 6);
    return shell;
}

/* Lets the replica run to its end and checks that it exited with
 * exit_code after printing exactly expected_output. */
static void expect_exit_and_output(struct remote_shell shell, int exit_code,
                                   const char *expected_output)
{
    char *output = read_all(shell.output);
    int status = wait_for(shell.pid);
    close(shell.control);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == exit_code, "status %d", status);
    cr_expect_str_eq(output, expected_output);
    free(output);
}

Test(remote_command, words_variables_and_directory_arrive_as_they_were)
{
    char *variables[] = {"PLAIN=1", "ODD=it's \"quoted\" $HOME `x` \\ ; &", NULL};
    char *command[] = {"/bin/sh", "-c", "printf '%s|' \"$PLAIN\" \"$ODD\" \"$1\" \"$PWD\"",
                       "zero", "one two 'three'", NULL};
    char *line = remote_command_line("/", variables, command);
    cr_assert_not_null(line);
    struct remote_shell shell = start_remote_shell(line);
    expect_exit_and_output(shell, 0, "1|it's \"quoted\" $HOME `x` \\ ; &|one two 'three'|/|");
    free(line);
}

Test(remote_command, a_line_on_the_channel_signals_the_replica)
{
    char *command[] = {"/bin/sh", "-c", "trap 'echo usr1; exit 143' USR1; echo ready; "
                       "while :; do sleep 0.01; done", NULL};
    char *line;
    struct remote_shell shell = start_when_ready(command, &line);
    cr_assert_eq(write(shell.control, "USR1\n", 5), 5);
    expect_exit_and_output(shell, 143, "usr1\n");
    free(line);
}

Test(remote_command, the_end_of_the_channel_kills_the_replica)
{
    char *command[] = {"/bin/sh", "-c", "trap '' TERM; echo ready; while :; do sleep 0.01; done",
                       NULL};
    char *line;
    struct remote_shell shell = start_when_ready(command, &line);
    close(shell.control);
    int status = wait_for(shell.pid);
    close(shell.output);
    cr_expect(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "status %d", status);
    free(line);
}
