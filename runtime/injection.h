/* injection.h - putting the chosen batch size and learning rate into an
 * unmodified trainer's command line or environment (adaptshim(7) "BATCH-SIZE CONTROL",
 * ADAPTDL_BSZ_ARG, ADAPTDL_LR_ARG); the factor ADAPTDL_LR_RULE applies
 * to the learning rate is learning_rate.h's.
 *
 * The shim's __libc_start_main wrapper calls these before the trainer's
 * main runs: it reads the trainer's own value (the initial batch size when
 * ADAPTDL_BATCH_SIZE is unset, the learning rate that belongs to it),
 * formats the new value and hands the trainer a rewritten argv or environ.
 * Everything here is pure: no I/O, no global state, no getenv (the
 * environment is an envp-style array passed in), so every rule below is
 * reachable from a unit test.
 *
 * Recognised argv forms, for a target `argv:FLAG`:
 *
 *   FLAG VALUE        the value is the next argument, whatever it looks like
 *                     (getopt and argparse do the same: `--lr -0.1` works);
 *   FLAG=VALUE        for every flag, long or short (`--batch-size=32`,
 *                     `-b=32`, `-lr=0.1`);
 *   -XVALUE           only for a single-letter short flag `-X`, getopt's
 *                     attached form (`-b32`), and only when VALUE starts
 *                     like a number (a digit, '.', '+' or '-'): `-bias` is
 *                     some other option, not `-b` with value "ias".  A
 *                     multi-letter flag never takes an attached value
 *                     (`-lr0.1` is not guessed).
 *
 * Scanning stops at a literal `--` argument (end of options): anything after
 * it belongs to the program's operands, or to a command the trainer runs, and
 * is neither read nor rewritten.  A `--` that is itself the value of the flag
 * (`--batch-size --`) is consumed as the value, as getopt would.  Values of
 * *other* options are not known, so an argument that merely equals FLAG is
 * taken as the flag even if the trainer would read it as another option's
 * value (`--name --batch-size`); grouped short options (`-vb32`) are not
 * recognised.
 *
 * Several occurrences: the last one wins, as with getopt, argparse and most
 * hand-written loops.  Every occurrence is still checked when reading (a
 * parser with type=int would reject a bad early one too), and every
 * occurrence is rewritten, so the trainer sees the new value whichever one
 * its parser believes.
 *
 * For `env:NAME` the value is the first `NAME=` entry of the environment
 * (what glibc's getenv returns); a rewrite replaces every `NAME=` entry, or
 * appends one.
 *
 * Accepted values.  A batch size is a positive decimal integer (digits only,
 * at most 2^40, as ADAPTDL_BATCH_SIZE).  A learning rate is a finite decimal
 * number made of digits, '.', 'e'/'E' and signs (`0.1`, `1e-3`, `-0.5`; no
 * hex, inf, nan or blanks).  Anything else is an error: -1 and one line
 *
 *     ADAPTDL_BSZ_ARG (argv:--batch-size): the trainer's value "abc" in
 *     argv[2] is not a batch size; accepted: ...
 *
 * (on one line) naming the variable, the flag, the bad value and what is
 * accepted.  Parsing and formatting use strtod and snprintf, which follow
 * LC_NUMERIC; before main the C locale is in force (a program only leaves it
 * by calling setlocale), so '.' is the decimal point, as trainers expect. */
#ifndef ADAPTSHIM_INJECTION_H
#define ADAPTSHIM_INJECTION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"

/* Which of the two injected quantities a target carries: it decides the
 * variable named in messages and which values are accepted. */
enum injection_quantity {
    INJECTION_BATCH_SIZE = 0,     /* ADAPTDL_BSZ_ARG */
    INJECTION_LEARNING_RATE = 1,  /* ADAPTDL_LR_ARG */
};

/* Largest trainer batch size accepted, the same limit as ADAPTDL_BATCH_SIZE. */
#define INJECTION_BATCH_SIZE_LIMIT ((uint64_t)1 << 40)

/* Room for any value injection_format_number() writes. */
#define INJECTION_NUMBER_SIZE 32

/* "ADAPTDL_BSZ_ARG" or "ADAPTDL_LR_ARG". */
const char *injection_variable_name(enum injection_quantity quantity);

/* Reads the trainer's own value of the target from argv (argc entries) or
 * from envp (NULL-terminated; may be NULL for an empty environment).
 * Returns 0 with *present true and *value set, or 0 with *present false and
 * *value NAN when the flag or variable is absent (or the target is
 * INJECT_NONE).  Returns -1 with a one-line message in error when a value is
 * not acceptable for the quantity or a flag is the last argument with no
 * value; *present is then false. */
int injection_read_value(const struct injection_target *target,
                         enum injection_quantity quantity, int argc, char *const argv[],
                         char *const envp[], double *value, bool *present, char *error,
                         size_t error_size);

/* Builds a new argv for an `argv:` target in which every occurrence's value
 * is new_value, in the form it was found (`--batch-size 32` ->
 * `--batch-size 64`, `--batch-size=32` -> `--batch-size=64`, `-b32` ->
 * `-b64`).  When the flag does not occur before any `--`, it is inserted
 * right after argv[0] as the two arguments `FLAG new_value`, so it precedes
 * every operand and any `--` (a trainer whose parser wants options after a
 * subcommand should name the flag on its command line).  Old values are not
 * checked here (injection_read_value() does that); a flag that is the last
 * argument, with no value to replace, is an error.  argc must be at least 1
 * (a program name) and argv[argc] is not read.
 *
 * On success returns 0, *new_argc and *new_argv: a NULL-terminated array
 * whose unchanged entries point to the original strings and whose new
 * strings live in the same allocation, so injection_free_argv() (one free)
 * releases everything.  On failure returns -1 with a message and leaves
 * *new_argv NULL. */
int injection_rewrite_argv(const struct injection_target *target,
                           enum injection_quantity quantity, int argc, char *const argv[],
                           const char *new_value, int *new_argc, char ***new_argv, char *error,
                           size_t error_size);
void injection_free_argv(char **new_argv);

/* Builds a new environment for an `env:NAME` target: every `NAME=` entry of
 * envp (NULL-terminated; NULL counts as empty) becomes `NAME=new_value`, or
 * that entry is appended when there is none.  The other entries point to
 * the original strings; the one new string lives in the same allocation as
 * the array, so injection_free_environment() releases everything.  -1 with
 * a message when the target is not an env: target or memory runs out. */
int injection_rewrite_environment(const struct injection_target *target,
                                  enum injection_quantity quantity, char *const envp[],
                                  const char *new_value, char ***new_envp, char *error,
                                  size_t error_size);
void injection_free_environment(char **new_envp);

/* Writes value as the trainer will read it: with integer set (batch sizes),
 * rounded to the nearest integer, half away from zero, as plain digits
 * ("64"); otherwise (learning rates) with %.9g, nine significant digits:
 * short for round numbers ("0.2", "0.00141421356") and exact well beyond any
 * learning rate's meaningful precision.  C-locale output, see above.
 * out_size of INJECTION_NUMBER_SIZE always suffices for finite values. */
void injection_format_number(double value, bool integer, char *out, size_t out_size);

#endif
