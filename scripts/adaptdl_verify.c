/* adaptdl_verify.c - adaptdl-verify: does a trainer resume exactly under the
 * shim?  (adaptdl-verify(1))
 *
 *   adaptdl-verify [options] -- TRAINER [ARGS...]
 *
 * Runs the user's trainer, with the ADAPTDL_* settings of the environment,
 * once uninterrupted and then in cases killed with SIGKILL right after a
 * checkpoint commit (mid-epoch, at an epoch's end, and mid-epoch restarted
 * on more replicas), each restarted until it exits with 0.  The library's
 * delivery trace (runtime/delivery_trace.h) of every run says which records
 * the trainer was handed in each pass and what each commit bound; the
 * comparison (runtime/resume_history.h) says, per pass, which records a
 * killed case lost or repeated against the uninterrupted run, and the
 * table (runtime/verdict_table.h) prints it.  A case that is not exact is
 * run again with the settings that could make it so.
 *
 * Every run happens in a scratch directory of its own: the trainer's
 * checkpoint and the state directory must be relative paths (they are
 * created there), and everything else it opens must be named by an
 * absolute path or linked in with --link.
 *
 * Exit status: 0 every case is exact, 1 some case is not (or failed), 2
 * bad usage or a trainer that cannot be verified (one line saying why),
 * 130/143 interrupted. */
#include <errno.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "resume_history.h"
#include "trace_log.h"
#include "verdict_table.h"
#include "verify_plan.h"
#include "verify_processes.h"

#define PROGRAM "adaptdl-verify"
#define VERIFY_MAX_REPLICAS 64
#define VERIFY_DEFAULT_TIMEOUT 600.0
#define VERIFY_DEFAULT_CRASH_RESTARTS 2
/* What the library's log says when a trace write failed (delivery_trace.c). */
#define VERIFY_TRACE_INCOMPLETE "the delivery trace is incomplete"

extern char **environ;

struct verify_options {
    const char *library;
    const char *scratch;          /* parent of the scratch tree */
    bool keep;
    bool try_fixes;
    unsigned replicas;            /* of the case restarted on more replicas */
    unsigned crash_restarts;      /* restarts after a crash, per case */
    double timeout_seconds;       /* per run */
    const char **links;
    size_t link_count;
    char **trainer_argv;          /* NULL-terminated, argv[0] as given */
};

/* Everything the cases share. */
struct verify_context {
    struct verify_options options;
    char library[PATH_MAX];
    char trainer[PATH_MAX];       /* the program to execute */
    char user_directory[PATH_MAX];
    char scratch[PATH_MAX];       /* the scratch tree, removed at the end */
    bool scratch_made;
    struct adaptdl_config config; /* the user's settings, parsed as the library does */
    const char *data_value;       /* ADAPTDL_DATA as given */
    size_t directories;           /* case directories made so far */
    struct resume_history reference;
};

/* A setting a case runs with (a fix trial), beyond the user's. */
struct verify_setting {
    char label[96];               /* "" for the user's own settings */
    const char *resume;           /* ADAPTDL_RESUME, or NULL */
    const char *data;             /* ADAPTDL_DATA, or NULL */
};

/* What the library's log said about a case, at warn or error level. */
#define VERIFY_MAX_WARNINGS 3
#define VERIFY_WARNING_SIZE 640
/* A case's runs: the killed one, the restarts after crashes, the last. */
#define VERIFY_MAX_CRASH_RESTARTS 100
#define VERIFY_MAX_RUNS (VERIFY_MAX_CRASH_RESTARTS + 2)

struct case_result {
    struct verdict_row row;
    struct resume_history history;
    struct resume_comparison comparison;
    char directory[PATH_MAX];
    char warnings[VERIFY_MAX_WARNINGS][VERIFY_WARNING_SIZE];
    size_t warning_count;
    bool run_failed[VERIFY_MAX_RUNS];   /* the run did not end with 0 (or a stop) */
};

/* --- messages ------------------------------------------------------------------ */

static struct verify_context *verify_cleanup_context;

static void verify_remove_scratch(struct verify_context *context)
{
    if (!context->scratch_made)
        return;
    if (context->options.keep) {
        fprintf(stderr, PROGRAM ": the runs' files are kept in %s\n", context->scratch);
        return;
    }
    if (verify_remove_tree(context->scratch) != 0)
        fprintf(stderr, PROGRAM ": cannot remove %s: %s\n", context->scratch, strerror(errno));
    context->scratch_made = false;
}

/* Bad usage, or a trainer that cannot be verified: one line, status 2. */
static void verify_refuse(const char *format, ...) __attribute__((format(printf, 1, 2), noreturn));
static void verify_refuse(const char *format, ...)
{
    char message[2048];
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(message, sizeof message, format, arguments);
    va_end(arguments);
    fprintf(stderr, PROGRAM ": %s (see " PROGRAM " --help)\n", message);
    if (verify_cleanup_context != NULL)
        verify_remove_scratch(verify_cleanup_context);
    exit(2);
}

static void verify_stop_if_interrupted(struct verify_context *context)
{
    if (!verify_interrupted)
        return;
    int signal_number = verify_interrupted;
    fprintf(stderr, PROGRAM ": interrupted by signal %d: every trainer it started is gone\n",
            signal_number);
    verify_remove_scratch(context);
    exit(128 + signal_number);
}

static void print_help(void)
{
    printf("usage: " PROGRAM " [options] -- TRAINER [ARGS...]\n"
"\n"
"Tells whether TRAINER resumes exactly under libadaptshim.so: it runs it once\n"
"uninterrupted, then kills it with SIGKILL right after a checkpoint commit (in\n"
"the middle of an epoch; at an epoch's end; in the middle of an epoch again,\n"
"restarted on more replicas) and restarts it until it exits with 0.  The\n"
"library traces which records each run was handed, pass by pass, and what\n"
"each commit bound; a table then says, per case, \"exact\" or how many records\n"
"each pass lost or repeated against the uninterrupted run.  A case that is\n"
"not exact is run again with ADAPTDL_RESUME switched, and with\n"
"resume=whole-pass on the train entries of ADAPTDL_DATA when the library\n"
"accepts that key, and the table says which made it exact.\n"
"\n"
"The trainer runs with the ADAPTDL_* settings of this environment.\n"
"ADAPTDL_DATA, ADAPTDL_CHECKPOINT_PATH and ADAPTDL_SAVE are required.  Give\n"
"it a short run (its arguments bound its length): a few epochs of a small\n"
"dataset, a checkpoint every few batches.\n"
"\n"
"Where it runs: every run starts in a fresh scratch directory (made under\n"
"--scratch), which is its working directory; nothing is copied into it.  So\n"
"ADAPTDL_CHECKPOINT_PATH and the trainer's own checkpoint must be relative\n"
"paths (ADAPTDL_SAVE a relative glob): they are created there, and the\n"
"checkpoints of this directory are never read or written.  Every run starts\n"
"fresh.  Data and everything else the trainer reads must be named by\n"
"absolute paths, or linked into the scratch directory with --link.  A run\n"
"restarted on several replicas gets one directory per replica, each with a\n"
"copy of the first replica's files (its checkpoint and state directory).\n"
"\n"
"  --link PATH          make PATH (relative to this directory: a script, a data\n"
"                       directory) appear at the same relative path in every\n"
"                       scratch directory, as a symbolic link; the trainer must\n"
"                       not write there (repeat as needed)\n"
"  --replicas N         the replica count of the restarted run of the resized\n"
"                       case (default 2; 1 leaves that case out), each replica a\n"
"                       process of its own (ADAPTDL_NUM_REPLICAS and\n"
"                       ADAPTDL_REPLICA_RANK), as adaptdl-wrap runs a trainer\n"
"                       without MPI\n"
"  --timeout SECONDS    longest a single run may take before it is killed and\n"
"                       its case fails (default 600)\n"
"  --crash-restarts N   restarts of a case after its trainer crashed (default 2)\n"
"  --no-fixes           do not try other settings for cases that are not exact\n"
"  --scratch DIR        where the scratch directories are made (default:\n"
"                       TMPDIR, else /tmp)\n"
"  --keep               keep the scratch directories (their traces, the\n"
"                       trainer's output and the library's log of every run)\n"
"  --lib PATH           the preload library (default: ADAPTDL_LIB, else the\n"
"                       libadaptshim.so installed or built beside this program)\n"
"  -h, --help           this text\n"
"\n"
"What a verdict counts: a record counts as trained once it was handed to the\n"
"trainer before the checkpoint its restart resumed from; records handed out\n"
"after it were trained by a model that was thrown away, and must come again.\n"
"AdaptDL's padding (a replica count that does not divide the records left) is\n"
"shown apart and is neither lost nor repeated.  What the trace cannot see is\n"
"what a prefetching loader had read but not trained on at a commit: declare\n"
"it with lookahead=N (a DataLoader holds workers x prefetch_factor x batch\n"
"records); no verdict can show it, so lookahead is never tried as a fix.\n"
"\n"
"Exit status: 0 every case is exact; 1 some case is not, or failed; 2 bad\n"
"usage or a trainer that cannot be verified (one line saying why); 128 + N\n"
"when interrupted by signal N (every trainer it started is killed first).\n");
}

/* --- options and checks ------------------------------------------------------- */

static unsigned parse_count(const char *option, const char *text, unsigned minimum,
                            unsigned maximum)
{
    char *end = NULL;
    errno = 0;
    unsigned long value = strtoul(text, &end, 10);
    if (text[0] < '0' || text[0] > '9' || *end != '\0' || errno != 0 || value < minimum ||
        value > maximum)
        verify_refuse("%s \"%.40s\" is not accepted: an integer from %u to %u", option, text,
                      minimum, maximum);
    return (unsigned)value;
}

static double parse_seconds(const char *option, const char *text)
{
    char *end = NULL;
    double value = strtod(text, &end);
    if (text[0] == '\0' || *end != '\0' || !(value > 0) || value > 1e7)
        verify_refuse("%s \"%.40s\" is not accepted: a number of seconds above 0", option, text);
    return value;
}

static const char *option_value(int argc, char **argv, int *index)
{
    if (*index + 1 >= argc)
        verify_refuse("%s needs a value", argv[*index]);
    return argv[++*index];
}

static void parse_options(int argc, char **argv, struct verify_options *options)
{
    *options = (struct verify_options){.try_fixes = true, .replicas = 2,
                                       .crash_restarts = VERIFY_DEFAULT_CRASH_RESTARTS,
                                       .timeout_seconds = VERIFY_DEFAULT_TIMEOUT};
    options->links = calloc((size_t)argc, sizeof *options->links);
    if (options->links == NULL)
        verify_refuse("out of memory");
    int i = 1;
    for (; i < argc; i++) {
        const char *argument = argv[i];
        if (strcmp(argument, "--") == 0) {
            i++;
            break;
        }
        if (argument[0] != '-')
            break;
        if (strcmp(argument, "-h") == 0 || strcmp(argument, "--help") == 0) {
            print_help();
            exit(0);
        } else if (strcmp(argument, "--link") == 0) {
            options->links[options->link_count++] = option_value(argc, argv, &i);
        } else if (strcmp(argument, "--replicas") == 0) {
            options->replicas = parse_count("--replicas", option_value(argc, argv, &i), 1,
                                            VERIFY_MAX_REPLICAS);
        } else if (strcmp(argument, "--timeout") == 0) {
            options->timeout_seconds = parse_seconds("--timeout", option_value(argc, argv, &i));
        } else if (strcmp(argument, "--crash-restarts") == 0) {
            options->crash_restarts = parse_count("--crash-restarts",
                                                  option_value(argc, argv, &i), 0,
                                                  VERIFY_MAX_CRASH_RESTARTS);
        } else if (strcmp(argument, "--no-fixes") == 0) {
            options->try_fixes = false;
        } else if (strcmp(argument, "--scratch") == 0) {
            options->scratch = option_value(argc, argv, &i);
        } else if (strcmp(argument, "--keep") == 0) {
            options->keep = true;
        } else if (strcmp(argument, "--lib") == 0) {
            options->library = option_value(argc, argv, &i);
        } else {
            verify_refuse("unknown option \"%.60s\"; accepted: --link, --replicas, --timeout, "
                          "--crash-restarts, --no-fixes, --scratch, --keep, --lib, --help, "
                          "then -- TRAINER [ARGS...]", argument);
        }
    }
    if (i >= argc)
        verify_refuse("no trainer given; usage: " PROGRAM " [options] -- TRAINER [ARGS...]");
    options->trainer_argv = argv + i;
}

static bool regular_executable(const char *path)
{
    struct stat status;
    return stat(path, &status) == 0 && S_ISREG(status.st_mode) && access(path, X_OK) == 0;
}

/* `path` made absolute against `directory` (unchanged when absolute). */
static void absolute_from(const char *directory, const char *path, char *out, size_t out_size)
{
    if (path[0] == '/')
        snprintf(out, out_size, "%s", path);
    else if (snprintf(out, out_size, "%s/%s", directory, path) >= (int)out_size)
        verify_refuse("the path \"%.80s\" is too long", path);
}

/* The program to execute: a path as given (made absolute), or found in PATH. */
static void resolve_trainer(struct verify_context *context)
{
    const char *name = context->options.trainer_argv[0];
    if (strchr(name, '/') != NULL) {
        absolute_from(context->user_directory, name, context->trainer, sizeof context->trainer);
        if (!regular_executable(context->trainer))
            verify_refuse("trainer \"%s\" is not an executable file", name);
        return;
    }
    const char *path = getenv("PATH");
    if (path == NULL)
        path = "/usr/local/bin:/usr/bin:/bin";
    while (*path != '\0') {
        size_t length = strcspn(path, ":");
        char directory[PATH_MAX];
        /* an empty entry is the current directory */
        if (length == 0)
            snprintf(directory, sizeof directory, ".");
        else
            snprintf(directory, sizeof directory, "%.*s", (int)length, path);
        char candidate[PATH_MAX];
        if (snprintf(candidate, sizeof candidate, "%s/%s", directory, name) < (int)sizeof candidate &&
            regular_executable(candidate)) {
            absolute_from(context->user_directory, candidate, context->trainer,
                          sizeof context->trainer);
            return;
        }
        path += length + (path[length] == ':');
    }
    verify_refuse("trainer \"%s\" not found (a path, or a program in PATH)", name);
}

static bool file_exists(const char *path)
{
    struct stat status;
    return stat(path, &status) == 0 && S_ISREG(status.st_mode);
}

/* --lib, ADAPTDL_LIB, or the library beside this program (a build
 * directory), installed beside its bin directory, or in the source tree's
 * build directory. */
static void locate_library(struct verify_context *context)
{
    const char *given = context->options.library ? context->options.library : getenv("ADAPTDL_LIB");
    if (given != NULL && given[0] != '\0') {
        absolute_from(context->user_directory, given, context->library, sizeof context->library);
        if (!file_exists(context->library))
            verify_refuse("the preload library \"%s\" does not exist", given);
        return;
    }
    char self[PATH_MAX];
    ssize_t length = readlink("/proc/self/exe", self, sizeof self - 1);
    if (length > 0) {
        self[length] = '\0';
        char *slash = strrchr(self, '/');
        if (slash != NULL)
            *slash = '\0';
        static const char *const candidates[] = {"%s/libadaptshim.so", "%s/../lib/libadaptshim.so",
                                                 "%s/../build/libadaptshim.so"};
        for (size_t i = 0; i < sizeof candidates / sizeof candidates[0]; i++) {
            char path[PATH_MAX];
            snprintf(path, sizeof path, candidates[i], self);
            if (file_exists(path) && realpath(path, context->library) != NULL)
                return;
        }
    }
    verify_refuse("libadaptshim.so not found beside this program: give --lib PATH or ADAPTDL_LIB");
}

/* True when a path has a ".." component (it could leave the scratch
 * directory). */
static bool path_climbs(const char *path)
{
    for (const char *cursor = path; (cursor = strstr(cursor, "..")) != NULL; cursor += 2)
        if ((cursor == path || cursor[-1] == '/') && (cursor[2] == '\0' || cursor[2] == '/'))
            return true;
    return false;
}

/* An argument (or the value of --flag=value) naming a checkpoint by an
 * absolute path: the runs would write the user's own checkpoint. */
static void check_trainer_arguments(const struct verify_context *context)
{
    const char *glob = context->config.save_glob;
    for (char **argument = context->options.trainer_argv + 1; *argument != NULL; argument++) {
        const char *value = *argument;
        const char *equals = strchr(value, '=');
        const char *candidates[2] = {value, equals != NULL ? equals + 1 : NULL};
        for (int i = 0; i < 2; i++)
            if (candidates[i] != NULL && candidates[i][0] == '/' &&
                fnmatch(glob, candidates[i], 0) == 0)
                verify_refuse("the trainer's argument \"%.200s\" names a checkpoint matching "
                              "ADAPTDL_SAVE by an absolute path: every case runs in a scratch "
                              "directory, so give it a path relative to this directory",
                              value);
    }
}

/* The first path component of a relative path, for comparisons. */
static size_t first_component_length(const char *path)
{
    return strcspn(path, "/");
}

static void check_links(const struct verify_context *context)
{
    const char *state = context->config.checkpoint_path;
    for (size_t i = 0; i < context->options.link_count; i++) {
        const char *link = context->options.links[i];
        char absolute[PATH_MAX];
        absolute_from(context->user_directory, link, absolute, sizeof absolute);
        struct stat status;
        if (link[0] == '/' || link[0] == '\0' || path_climbs(link))
            verify_refuse("--link \"%.200s\" is not accepted: a path relative to this directory, "
                          "without \"..\"", link);
        if (lstat(link, &status) != 0)
            verify_refuse("--link \"%.200s\": %s", link, strerror(errno));
        size_t length = first_component_length(link);
        if (length == first_component_length(state) && strncmp(link, state, length) == 0)
            verify_refuse("--link \"%.200s\" would share the state directory "
                          "ADAPTDL_CHECKPOINT_PATH=%s between the runs; accepted: paths the "
                          "trainer only reads", link, state);
        if (fnmatch(context->config.save_glob, link, 0) == 0 ||
            fnmatch(context->config.save_glob, absolute, 0) == 0)
            verify_refuse("--link \"%.200s\" matches ADAPTDL_SAVE: the runs would share a "
                          "checkpoint; accepted: paths the trainer only reads", link);
    }
}

static void check_environment(struct verify_context *context)
{
    char error[1024];
    if (config_parse(&context->config, environ, error, sizeof error) != 0)
        verify_refuse("the library does not accept this environment: %s", error);
    const struct adaptdl_config *config = &context->config;
    if (config->disabled)
        verify_refuse("ADAPTDL_DISABLE=1: the library would do nothing; unset it");
    context->data_value = getenv("ADAPTDL_DATA");
    if (config->data_count == 0 || context->data_value == NULL)
        verify_refuse("ADAPTDL_DATA is not set; accepted: the dataset entries the trainer runs "
                      "with (adaptshim(7) \"ADAPTDL_DATA\")");
    if (config->checkpoint_path == NULL)
        verify_refuse("ADAPTDL_CHECKPOINT_PATH is not set; accepted: a relative directory "
                      "path such as \"state\" (it is made in each run's scratch directory)");
    if (config->checkpoint_path[0] == '/' || path_climbs(config->checkpoint_path))
        verify_refuse("ADAPTDL_CHECKPOINT_PATH \"%.200s\" is not accepted: a relative path "
                      "without \"..\" (each run gets its own, in its scratch directory)",
                      config->checkpoint_path);
    if (config->save_glob == NULL)
        verify_refuse("ADAPTDL_SAVE is not set; accepted: a relative glob of the trainer's "
                      "checkpoint files, such as \"model.ckpt\" or \"*.ckpt\"");
    if (config->save_glob[0] == '/' || path_climbs(config->save_glob))
        verify_refuse("ADAPTDL_SAVE \"%.200s\" is not accepted: a relative glob without \"..\" "
                      "(the trainer's checkpoints are written in each run's scratch "
                      "directory)", config->save_glob);
    check_trainer_arguments(context);
    check_links(context);
}

/* --- scratch directories --------------------------------------------------------- */

static void make_scratch(struct verify_context *context)
{
    const char *parent = context->options.scratch;
    if (parent == NULL)
        parent = getenv("TMPDIR");
    if (parent == NULL || parent[0] == '\0')
        parent = "/tmp";
    char absolute[PATH_MAX], pattern[PATH_MAX];
    absolute_from(context->user_directory, parent, absolute, sizeof absolute);
    if (snprintf(pattern, sizeof pattern, "%s/" PROGRAM ".XXXXXX", absolute) >= (int)sizeof pattern)
        verify_refuse("--scratch \"%.80s\" is too long", parent);
    if (mkdtemp(pattern) == NULL)
        verify_refuse("cannot make a scratch directory in %s: %s", absolute, strerror(errno));
    /* the library reports checkpoint paths resolved: compare with the same */
    if (realpath(pattern, context->scratch) == NULL) {
        rmdir(pattern);
        verify_refuse("cannot resolve the scratch directory %s: %s", pattern, strerror(errno));
    }
    context->scratch_made = true;
}

static void path_in(char *out, size_t out_size, const char *directory, const char *format, ...)
    __attribute__((format(printf, 4, 5)));
static void path_in(char *out, size_t out_size, const char *directory, const char *format, ...)
{
    char name[PATH_MAX];
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(name, sizeof name, format, arguments);
    va_end(arguments);
    if (snprintf(out, out_size, "%s/%s", directory, name) >= (int)out_size)
        verify_refuse("the scratch path %s/%s is too long", directory, name);
}

/* The working directory of replica `rank` of a case. */
static void work_directory(char *out, size_t out_size, const char *case_directory, unsigned rank)
{
    if (rank == 0)
        path_in(out, out_size, case_directory, "work");
    else
        path_in(out, out_size, case_directory, "work-rank%u", rank);
}

/* The directory part of the checkpoint glob when it has no wildcard. */
static bool literal_glob_directory(const char *glob, char *out, size_t out_size)
{
    const char *slash = strrchr(glob, '/');
    if (slash == NULL || slash == glob)
        return false;
    size_t length = (size_t)(slash - glob);
    if (strcspn(glob, "*?[\\") < length || length >= out_size)
        return false;
    memcpy(out, glob, length);
    out[length] = '\0';
    return true;
}

/* A fresh working directory: the --link entries, and the directories the
 * state path and the checkpoints need. */
static void prepare_work_directory(struct verify_context *context, const char *work)
{
    if (verify_make_directories(work) != 0)
        verify_refuse("cannot make %s: %s", work, strerror(errno));
    for (size_t i = 0; i < context->options.link_count; i++) {
        const char *link = context->options.links[i];
        char source[PATH_MAX], target[PATH_MAX], parent[PATH_MAX];
        absolute_from(context->user_directory, link, source, sizeof source);
        path_in(target, sizeof target, work, "%s", link);
        snprintf(parent, sizeof parent, "%s", target);
        char *slash = strrchr(parent, '/');
        if (slash != NULL)
            *slash = '\0';
        if (verify_make_directories(parent) != 0 || symlink(source, target) != 0)
            verify_refuse("cannot link %s into %s: %s", link, work, strerror(errno));
    }
    char directory[PATH_MAX], path[PATH_MAX];
    const char *state = context->config.checkpoint_path;
    const char *slash = strrchr(state, '/');
    if (slash != NULL && slash != state) {
        path_in(path, sizeof path, work, "%.*s", (int)(slash - state), state);
        if (verify_make_directories(path) != 0)
            verify_refuse("cannot make %s: %s", path, strerror(errno));
    }
    if (literal_glob_directory(context->config.save_glob, directory, sizeof directory)) {
        path_in(path, sizeof path, work, "%s", directory);
        if (verify_make_directories(path) != 0)
            verify_refuse("cannot make %s: %s", path, strerror(errno));
    }
}

static void new_case_directory(struct verify_context *context, const char *name, char *out,
                               size_t out_size)
{
    path_in(out, out_size, context->scratch, "%02zu-%s", ++context->directories, name);
    char work[PATH_MAX];
    work_directory(work, sizeof work, out, 0);
    prepare_work_directory(context, work);
}

/* --- environments ----------------------------------------------------------------- */

struct environment {
    char **entries;
    size_t count;
};

static void environment_unset(struct environment *environment, const char *name)
{
    size_t length = strlen(name);
    size_t kept = 0;
    for (size_t i = 0; i < environment->count; i++) {
        if (strncmp(environment->entries[i], name, length) == 0 &&
            environment->entries[i][length] == '=')
            free(environment->entries[i]);
        else
            environment->entries[kept++] = environment->entries[i];
    }
    environment->count = kept;
    environment->entries[kept] = NULL;
}

static void environment_set(struct environment *environment, const char *name, const char *value)
{
    environment_unset(environment, name);
    char **entries = realloc(environment->entries, (environment->count + 2) * sizeof *entries);
    size_t size = strlen(name) + strlen(value) + 2;
    char *entry = malloc(size);
    if (entries == NULL || entry == NULL)
        verify_refuse("out of memory");
    snprintf(entry, size, "%s=%s", name, value);
    environment->entries = entries;
    entries[environment->count++] = entry;
    entries[environment->count] = NULL;
}

static void environment_from_process(struct environment *environment)
{
    size_t count = 0;
    while (environ[count] != NULL)
        count++;
    environment->entries = calloc(count + 1, sizeof *environment->entries);
    if (environment->entries == NULL)
        verify_refuse("out of memory");
    environment->count = 0;
    for (size_t i = 0; i < count; i++) {
        environment->entries[i] = strdup(environ[i]);
        if (environment->entries[i] == NULL)
            verify_refuse("out of memory");
        environment->count++;
    }
}

static void environment_free(struct environment *environment)
{
    for (size_t i = 0; i < environment->count; i++)
        free(environment->entries[i]);
    free(environment->entries);
    *environment = (struct environment){0};
}

static const char *environment_get(const struct environment *environment, const char *name)
{
    size_t length = strlen(name);
    for (size_t i = 0; i < environment->count; i++)
        if (strncmp(environment->entries[i], name, length) == 0 &&
            environment->entries[i][length] == '=')
            return environment->entries[i] + length + 1;
    return NULL;
}

/* The environment of replica `rank` of run `run` of a case. */
static void run_environment(const struct verify_context *context,
                            const struct verify_setting *setting, const char *case_directory,
                            size_t run, unsigned rank, unsigned replicas, size_t stop_after,
                            struct environment *environment)
{
    environment_from_process(environment);
    char value[PATH_MAX + 64];
    const char *preload = environment_get(environment, "LD_PRELOAD");
    if (preload != NULL && preload[0] != '\0')
        snprintf(value, sizeof value, "%s:%s", context->library, preload);
    else
        snprintf(value, sizeof value, "%s", context->library);
    environment_set(environment, "LD_PRELOAD", value);
    if (environment_get(environment, "ADAPTDL_TARGET") == NULL) {
        const char *program = strrchr(context->options.trainer_argv[0], '/');
        program = program != NULL ? program + 1 : context->options.trainer_argv[0];
        environment_set(environment, "ADAPTDL_TARGET", program);
    }
    snprintf(value, sizeof value, "%u", replicas);
    environment_set(environment, "ADAPTDL_NUM_REPLICAS", value);
    snprintf(value, sizeof value, "%u", rank);
    environment_set(environment, "ADAPTDL_REPLICA_RANK", value);
    snprintf(value, sizeof value, "%zu", run);
    environment_set(environment, "ADAPTDL_NUM_RESTARTS", value);
    char path[PATH_MAX];
    path_in(path, sizeof path, case_directory, "run%zu-rank%%r.trace", run);
    environment_set(environment, "ADAPTDL_TRACE_FILE", path);
    environment_unset(environment, "ADAPTDL_TRACE_STOP_AFTER");
    if (stop_after > 0) {
        snprintf(value, sizeof value, "%zu", stop_after);
        environment_set(environment, "ADAPTDL_TRACE_STOP_AFTER", value);
    }
    path_in(path, sizeof path, case_directory, "run%zu-rank%%r.metrics", run);
    environment_set(environment, "ADAPTDL_METRICS_FILE", path);
    path_in(path, sizeof path, case_directory, "run%zu-rank%%r.log", run);
    environment_set(environment, "ADAPTDL_LOG_FILE", path);
    if (environment_get(environment, "ADAPTDL_HINTS_FILE") != NULL) {
        path_in(path, sizeof path, case_directory, "hints.json");
        environment_set(environment, "ADAPTDL_HINTS_FILE", path);
    }
    /* a trainer killed by a case leaves its temporary files behind (Python's
     * multiprocessing directories of a DataLoader's workers): they go into
     * the case's directory, which the scratch's removal takes with it */
    environment_set(environment, "TMPDIR", case_directory);
    if (setting->resume != NULL)
        environment_set(environment, "ADAPTDL_RESUME", setting->resume);
    if (setting->data != NULL)
        environment_set(environment, "ADAPTDL_DATA", setting->data);
}

/* --- runs ----------------------------------------------------------------------- */

/* "exit status 3", "killed by signal 11" */
static void describe_status(int status, char *out, size_t out_size)
{
    if (status > 128)
        snprintf(out, out_size, "killed by signal %d", status - 128);
    else
        snprintf(out, out_size, "exit status %d", status);
}

/* How a run of a case ended. */
struct run_outcome {
    enum verify_wait_outcome wait;
    unsigned replicas;
    int status;                  /* the first non-zero status, else 0 */
    unsigned failed_rank;
    char last_error[200];        /* the last line the failed replica wrote on stderr */
};

static void run_trainer(struct verify_context *context, const struct verify_setting *setting,
                        const char *case_directory, size_t run, unsigned replicas,
                        size_t stop_after, struct run_outcome *outcome)
{
    struct verify_process processes[VERIFY_MAX_REPLICAS];
    *outcome = (struct run_outcome){.replicas = replicas};
    for (unsigned rank = 0; rank < replicas; rank++) {
        char work[PATH_MAX], out[PATH_MAX], err[PATH_MAX], error[512];
        work_directory(work, sizeof work, case_directory, rank);
        path_in(out, sizeof out, case_directory, "run%zu-rank%u.out", run, rank);
        path_in(err, sizeof err, case_directory, "run%zu-rank%u.err", run, rank);
        struct environment environment;
        run_environment(context, setting, case_directory, run, rank, replicas, stop_after,
                        &environment);
        int status = verify_launch(&processes[rank], context->trainer,
                                   context->options.trainer_argv, environment.entries, work, out,
                                   err, error, sizeof error);
        environment_free(&environment);
        if (status != 0) {
            verify_wait(processes, rank, NULL, 0);
            verify_refuse("%s", error);
        }
    }
    char stop_trace[PATH_MAX];
    path_in(stop_trace, sizeof stop_trace, case_directory, "run%zu-rank0.trace", run);
    outcome->wait = verify_wait(processes, replicas, stop_after > 0 ? stop_trace : NULL,
                                context->options.timeout_seconds);
    verify_stop_if_interrupted(context);
    /* the replica that failed on its own, rather than one killed after it */
    bool found = false;
    for (int pass = 0; pass < 2 && !found; pass++)
        for (unsigned rank = 0; rank < replicas && !found; rank++) {
            int status = processes[rank].status;
            if (status == 0 || (pass == 0 && status == 128 + SIGKILL))
                continue;
            found = true;
            outcome->status = status;
            outcome->failed_rank = rank;
            char err[PATH_MAX];
            path_in(err, sizeof err, case_directory, "run%zu-rank%u.err", run, rank);
            verify_last_line(err, outcome->last_error, sizeof outcome->last_error);
        }
}

/* "run 3: exit status 3: what it said last", "run 2 (replica 1): killed by
 * signal 11" */
static void describe_failure(const struct run_outcome *outcome, size_t run, char *out,
                             size_t out_size)
{
    char replica[32] = "";
    if (outcome->replicas > 1)
        snprintf(replica, sizeof replica, " (replica %u)", outcome->failed_rank);
    char status[64];
    describe_status(outcome->status, status, sizeof status);
    snprintf(out, out_size, "run %zu%s: %s%s%.150s", run, replica, status,
             outcome->last_error[0] ? ": " : "", outcome->last_error);
}


/* Whether the file at `path` (the library's log) holds `text`. */
static bool log_mentions(const char *path, const char *text)
{
    FILE *log = fopen(path, "r");
    if (log == NULL)
        return false;
    char *line = NULL;
    size_t size = 0;
    bool found = false;
    while (!found && getline(&line, &size, log) >= 0)
        found = strstr(line, text) != NULL;
    free(line);
    fclose(log);
    return found;
}

/* Reads the traces of a run (one per replica) and adds the run to the
 * history; a run that failed may lack the trace of a replica that ended
 * (or was killed) before the library started in it.  -1 with a message in
 * note. */
static int add_run_traces(const char *case_directory, size_t run, unsigned replicas,
                          bool run_failed, struct resume_history *history, char *note,
                          size_t note_size)
{
    struct trace_log logs[VERIFY_MAX_REPLICAS];
    const struct trace_log *pointers[VERIFY_MAX_REPLICAS];
    unsigned parsed = 0;
    int status = 0;
    for (unsigned rank = 0; rank < replicas && status == 0; rank++) {
        char path[PATH_MAX], log_path[PATH_MAX], error[768];
        path_in(path, sizeof path, case_directory, "run%zu-rank%u.trace", run, rank);
        path_in(log_path, sizeof log_path, case_directory, "run%zu-rank%u.log", run, rank);
        if (access(path, F_OK) != 0 && run_failed) {
            continue;   /* it ended before the library started: it did nothing */
        } else if (access(path, F_OK) != 0) {
            snprintf(note, note_size, "run %zu (replica %u) wrote no delivery trace: the library "
                     "did not reach the trainer (a static program, or ADAPTDL_TARGET not "
                     "matching its program name?)", run + 1, rank);
            status = -1;
        } else if (trace_log_read(&logs[parsed], path, error, sizeof error) != 0) {
            snprintf(note, note_size, "%s", error);
            status = -1;
        } else {
            pointers[parsed] = &logs[parsed];
            parsed++;
            if (log_mentions(log_path, VERIFY_TRACE_INCOMPLETE)) {
                snprintf(note, note_size, "run %zu: %s (a write to it failed; see %.400s)", run + 1,
                         VERIFY_TRACE_INCOMPLETE, log_path);
                status = -1;
            }
        }
    }
    /* a run none of whose replicas got as far as the library changed
     * nothing: its trainer never loaded or wrote a checkpoint */
    if (status == 0 && parsed > 0 &&
        resume_history_add_run(history, pointers, parsed, note, note_size) != 0)
        status = -1;
    for (unsigned i = 0; i < parsed; i++)
        trace_log_free(&logs[i]);
    return status;
}

/* Every commit must be inside the scratch tree: a trainer that writes its
 * checkpoint elsewhere (an absolute path) is not run in scratch state. */
static void check_commits_in_scratch(const struct verify_context *context,
                                     const struct resume_history *history)
{
    size_t length = strlen(context->scratch);
    for (size_t i = 0; i < history->commit_count; i++) {
        const char *path = history->commits[i].path;
        if (strncmp(path, context->scratch, length) != 0 || path[length] != '/')
            verify_refuse("the trainer committed its checkpoint at %s, outside the scratch "
                          "directory of the run: give it a checkpoint path relative to this "
                          "directory", path);
    }
}

/* --- the uninterrupted run ---------------------------------------------------------- */

static void run_reference(struct verify_context *context)
{
    char directory[PATH_MAX];
    new_case_directory(context, "uninterrupted", directory, sizeof directory);
    fprintf(stderr, PROGRAM ": the uninterrupted run...\n");
    struct verify_setting setting = {.label = ""};
    struct run_outcome outcome;
    run_trainer(context, &setting, directory, 0, 1, 0, &outcome);
    char status[64];
    describe_status(outcome.status, status, sizeof status);
    if (outcome.wait == VERIFY_WAIT_TIMED_OUT)
        verify_refuse("the uninterrupted run did not end within %.0f s: give the trainer a "
                      "shorter run (or a longer --timeout)", context->options.timeout_seconds);
    if (outcome.status != 0)
        verify_refuse("the uninterrupted run failed (%s); its stderr ends with: %s", status,
                      outcome.last_error[0] ? outcome.last_error : "(nothing)");
    resume_history_init(&context->reference);
    char note[1024];
    if (add_run_traces(directory, 0, 1, false, &context->reference, note, sizeof note) != 0)
        verify_refuse("the uninterrupted run: %s", note);
    check_commits_in_scratch(context, &context->reference);
    uint64_t records = resume_history_records(&context->reference, NULL);
    if (records == 0)
        verify_refuse("the uninterrupted run read no record of ADAPTDL_DATA: do its globs match "
                      "the paths the trainer opens (absolute paths, or --link)?");
    if (context->reference.commit_count == 0)
        verify_refuse("the uninterrupted run committed no checkpoint matching ADAPTDL_SAVE=%s: "
                      "nothing to resume from", context->config.save_glob);
    uint64_t passes = 0;
    for (size_t i = 0; i < context->reference.file_count; i++)
        passes += resume_history_passes(&context->reference, i);
    fprintf(stderr, PROGRAM ": uninterrupted: %llu records in %llu passes of %zu data file%s, "
            "%zu checkpoint commits\n", (unsigned long long)records,
            (unsigned long long)passes, context->reference.file_count,
            context->reference.file_count == 1 ? "" : "s", context->reference.commit_count);
}

/* --- a killed case ---------------------------------------------------------------------- */

struct verify_case {
    const char *label;
    const char *name;             /* of its directories */
    enum commit_place place;
    unsigned restart_replicas;
    size_t ordinal;               /* the reference commit it is killed after; 0: none */
};

static void case_fail(struct case_result *result, enum verdict_kind kind, const char *format, ...)
    __attribute__((format(printf, 3, 4)));
static void case_fail(struct case_result *result, enum verdict_kind kind, const char *format, ...)
{
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(result->row.note, sizeof result->row.note, format, arguments);
    va_end(arguments);
    result->row.kind = kind;
}

/* Runs a case's runs: the first stopped after commit `ordinal`, then
 * restarts until one ends with 0.  Returns the runs made, each marked in
 * result->run_failed when it ended otherwise (its traces may then be
 * missing); the row is marked when they did not get there. */
static size_t case_runs(struct verify_context *context, const struct verify_case *verify_case,
                        const struct verify_setting *setting, struct case_result *result)
{
    const char *directory = result->directory;
    struct run_outcome outcome;
    char failure[sizeof result->row.note];
    run_trainer(context, setting, directory, 0, 1, verify_case->ordinal, &outcome);
    if (outcome.wait == VERIFY_WAIT_TIMED_OUT) {
        result->run_failed[0] = true;
        case_fail(result, VERDICT_FAILED, "run 1 did not end within %.0f s",
                  context->options.timeout_seconds);
        return 1;
    }
    if (outcome.wait != VERIFY_WAIT_STOPPED) {
        result->run_failed[0] = outcome.status != 0;
        describe_failure(&outcome, 1, failure, sizeof failure);
        if (outcome.status == 0)
            case_fail(result, VERDICT_NOT_RUN, "the trainer read no record after commit %zu "
                      "(it ended first)", verify_case->ordinal);
        else
            case_fail(result, VERDICT_FAILED, "%s, before commit %zu", failure,
                      verify_case->ordinal);
        return 1;
    }
    size_t runs = 1;
    unsigned crashes = 0;
    for (;;) {
        unsigned replicas = verify_case->restart_replicas;
        for (unsigned rank = 1; rank < replicas; rank++) {
            char work[PATH_MAX], copy[PATH_MAX];
            work_directory(work, sizeof work, directory, 0);
            work_directory(copy, sizeof copy, directory, rank);
            if (verify_remove_tree(copy) != 0 || verify_copy_tree(work, copy) != 0)
                verify_refuse("cannot copy %s to %s: %s", work, copy, strerror(errno));
        }
        run_trainer(context, setting, directory, runs, replicas, 0, &outcome);
        runs++;
        if (outcome.wait == VERIFY_WAIT_TIMED_OUT) {
            result->run_failed[runs - 1] = true;
            case_fail(result, VERDICT_FAILED, "run %zu did not end within %.0f s", runs,
                      context->options.timeout_seconds);
            return runs;
        }
        if (outcome.status == 0)
            return runs;
        result->run_failed[runs - 1] = true;
        if (++crashes > context->options.crash_restarts) {
            describe_failure(&outcome, runs, failure, sizeof failure);
            case_fail(result, VERDICT_FAILED, "%s", failure);
            return runs;
        }
    }
}

/* The distinct warnings and errors the library logged in the runs after
 * the first (what it says about a resume), for the summary. */
static void collect_warnings(const struct verify_case *verify_case, struct case_result *result,
                             size_t runs)
{
    static const char *const levels[] = {"] warn: ", "] error: "};
    for (size_t run = 1; run < runs; run++) {
        for (unsigned rank = 0; rank < verify_case->restart_replicas; rank++) {
            char path[PATH_MAX];
            path_in(path, sizeof path, result->directory, "run%zu-rank%u.log", run, rank);
            FILE *log = fopen(path, "r");
            if (log == NULL)
                continue;
            char *line = NULL;
            size_t size = 0;
            ssize_t length;
            while ((length = getline(&line, &size, log)) >= 0 &&
                   result->warning_count < VERIFY_MAX_WARNINGS) {
                if (length > 0 && line[length - 1] == '\n')
                    line[length - 1] = '\0';
                const char *message = NULL;
                for (size_t i = 0; i < 2 && message == NULL; i++)
                    if ((message = strstr(line, levels[i])) != NULL)
                        message += strlen(levels[i]);
                if (message == NULL)
                    continue;
                bool seen = false;
                for (size_t i = 0; i < result->warning_count; i++)
                    seen = seen || strncmp(result->warnings[i], message,
                                           VERIFY_WARNING_SIZE - 1) == 0;
                if (!seen)
                    snprintf(result->warnings[result->warning_count++], VERIFY_WARNING_SIZE,
                             "%s", message);
            }
            free(line);
            fclose(log);
        }
    }
}

/* The history of a case's runs, compared with the uninterrupted run.  A
 * case that already failed keeps its reason; its traces still tell where
 * it was killed, when they can be read. */
static void case_compare(struct verify_context *context, const struct verify_case *verify_case,
                         struct case_result *result, size_t runs)
{
    char note[1024];
    collect_warnings(verify_case, result, runs);
    for (size_t run = 0; run < runs; run++) {
        unsigned replicas = run == 0 ? 1 : verify_case->restart_replicas;
        if (add_run_traces(result->directory, run, replicas, result->run_failed[run],
                           &result->history, note, sizeof note) != 0) {
            if (result->row.kind == VERDICT_EXACT)
                case_fail(result, VERDICT_FAILED, "%s", note);
            return;
        }
        /* the commit the first restart resumed from: the kill's last one,
         * unless another process or thread of the trainer reached its stop
         * before that commit's rename (then the one before it) */
        const struct resume_history *history = &result->history;
        const struct history_run *first = &history->runs[0];
        const struct history_commit *killed_after = NULL;
        if (history->run_count > 1 && history->runs[1].start == HISTORY_START_RESTORED)
            killed_after = &history->commits[history->runs[1].restored_commit];
        else if (history->run_count == 1 && first->commit_count > 0)
            killed_after = &history->commits[first->first_commit + first->commit_count - 1];
        if (killed_after != NULL)
            verify_describe_commit(history, killed_after, result->row.killed_after,
                                   sizeof result->row.killed_after);
    }
    check_commits_in_scratch(context, &result->history);
    if (result->history.run_count > 1 &&
        result->history.runs[1].start != HISTORY_START_RESTORED) {
        size_t used = strlen(result->row.killed_after);
        snprintf(result->row.killed_after + used, sizeof result->row.killed_after - used, "%s",
                 result->history.runs[1].start == HISTORY_START_FRESH
                     ? "; the restart loaded no checkpoint"
                     : "; the restart loaded a checkpoint no traced commit wrote");
    }
    if (result->row.kind != VERDICT_EXACT)
        return;   /* failed or not run: the note says why */
    if (resume_compare(&context->reference, &result->history, &result->comparison, note,
                       sizeof note) != 0) {
        case_fail(result, VERDICT_FAILED, "%s", note);
        return;
    }
    result->row.comparison = &result->comparison;
    result->row.kind = resume_comparison_exact(&result->comparison) ? VERDICT_EXACT
                                                                     : VERDICT_NOT_EXACT;
}

static void run_case(struct verify_context *context, const struct verify_case *verify_case,
                     const struct verify_setting *setting, struct case_result *result)
{
    *result = (struct case_result){0};
    resume_history_init(&result->history);
    if (setting->label[0] == '\0')
        snprintf(result->row.label, sizeof result->row.label, "%s", verify_case->label);
    else
        snprintf(result->row.label, sizeof result->row.label, "  with %s", setting->label);
    result->row.kind = VERDICT_EXACT;
    if (verify_case->ordinal == 0) {
        case_fail(result, VERDICT_NOT_RUN, "the uninterrupted run has no checkpoint commit %s",
                  verify_case->place == COMMIT_MID_EPOCH
                      ? "in the middle of an epoch (checkpoint every few batches)"
                      : "at an epoch's end (checkpoint after each epoch too)");
        return;
    }
    char name[64];
    snprintf(name, sizeof name, "%s%s", verify_case->name, setting->label[0] ? "-fix" : "");
    new_case_directory(context, name, result->directory, sizeof result->directory);
    fprintf(stderr, PROGRAM ": %s%s%s (commit %zu of the uninterrupted run)...\n",
            verify_case->label, setting->label[0] ? " with " : "", setting->label,
            verify_case->ordinal);
    size_t runs = case_runs(context, verify_case, setting, result);
    result->row.runs = runs;
    case_compare(context, verify_case, result, runs);
}

static void case_result_free(struct case_result *result)
{
    resume_comparison_free(&result->comparison);
    resume_history_free(&result->history);
}

/* --- fixes ------------------------------------------------------------------------------ */

#define VERIFY_MAX_SETTINGS 3
#define VERIFY_WHOLE_PASS "resume=whole-pass"

struct fix_settings {
    struct verify_setting settings[VERIFY_MAX_SETTINGS];
    size_t count;
    char *whole_pass_data;        /* ADAPTDL_DATA with the key, or NULL */
    char whole_pass_refusal[512]; /* why the library does not take it */
};

static void prepare_fixes(struct verify_context *context, struct fix_settings *fixes)
{
    *fixes = (struct fix_settings){0};
    const char *other = context->config.resume == RESUME_REPLAY ? "continue" : "replay";
    struct verify_setting *resume = &fixes->settings[fixes->count++];
    snprintf(resume->label, sizeof resume->label, "ADAPTDL_RESUME=%s", other);
    resume->resume = other;
    char error[512];
    fixes->whole_pass_data = verify_data_with_key(context->data_value, VERIFY_WHOLE_PASS, error,
                                                  sizeof error);
    if (fixes->whole_pass_data == NULL) {
        snprintf(fixes->whole_pass_refusal, sizeof fixes->whole_pass_refusal, "%s", error);
        return;
    }
    struct verify_setting *whole = &fixes->settings[fixes->count++];
    snprintf(whole->label, sizeof whole->label, VERIFY_WHOLE_PASS);
    whole->data = fixes->whole_pass_data;
    struct verify_setting *both = &fixes->settings[fixes->count++];
    snprintf(both->label, sizeof both->label, "ADAPTDL_RESUME=%s and " VERIFY_WHOLE_PASS, other);
    both->resume = other;
    both->data = fixes->whole_pass_data;
}

/* --- the report ------------------------------------------------------------------------- */

struct verify_report {
    struct case_result *results;
    size_t count, capacity;
};

static struct case_result *report_add(struct verify_report *report)
{
    if (report->count == report->capacity) {
        size_t capacity = report->capacity ? report->capacity * 2 : 16;
        struct case_result *results = realloc(report->results, capacity * sizeof *results);
        if (results == NULL)
            verify_refuse("out of memory");
        report->results = results;
        report->capacity = capacity;
        /* rows point at their own comparison: fix them after the move */
        for (size_t i = 0; i < report->count; i++)
            if (results[i].row.comparison != NULL)
                results[i].row.comparison = &results[i].comparison;
    }
    return &report->results[report->count++];
}

static bool verdict_is_failure(enum verdict_kind kind)
{
    return kind == VERDICT_NOT_EXACT || kind == VERDICT_FAILED;
}

/* A row for a fix the library cannot take. */
static void report_refused_fix(struct verify_report *report, const char *label, const char *why)
{
    struct case_result *result = report_add(report);
    *result = (struct case_result){0};
    snprintf(result->row.label, sizeof result->row.label, "  with %s", label);
    (void)why;
    case_fail(result, VERDICT_NOT_RUN, "this library's ADAPTDL_DATA does not accept %s", label);
}

/* The case, then each fix while none made it exact. */
static void verify_one_case(struct verify_context *context, const struct verify_case *verify_case,
                            const struct fix_settings *fixes, struct verify_report *report)
{
    struct verify_setting own = {.label = ""};
    size_t index = report->count;
    run_case(context, verify_case, &own, report_add(report));
    if (!context->options.try_fixes || !verdict_is_failure(report->results[index].row.kind))
        return;
    bool fixed = false;
    for (size_t i = 0; i < fixes->count && !fixed; i++) {
        size_t trial = report->count;
        run_case(context, verify_case, &fixes->settings[i], report_add(report));
        fixed = report->results[trial].row.kind == VERDICT_EXACT;
    }
    if (!fixed && fixes->whole_pass_data == NULL)
        report_refused_fix(report, VERIFY_WHOLE_PASS, fixes->whole_pass_refusal);
}

/* After the table: what it means, one line per case that is not exact. */
static int print_summary(const struct verify_report *report)
{
    size_t cases = 0, failing = 0, not_run = 0;
    for (size_t i = 0; i < report->count; i++) {
        const struct verdict_row *row = &report->results[i].row;
        if (row->label[0] == ' ')
            continue;
        cases++;
        failing += verdict_is_failure(row->kind);
        not_run += row->kind == VERDICT_NOT_RUN;
    }
    printf("\n");
    if (not_run == cases) {
        printf("No case could be run: nothing was verified.\n");
        return 2;
    }
    if (failing == 0) {
        printf("Every case that ran resumed exactly%s.\n",
               not_run > 0 ? " (the cases not run were not verified)" : "");
        return 0;
    }
    for (size_t i = 0; i < report->count; i++) {
        const struct verdict_row *row = &report->results[i].row;
        if (row->label[0] == ' ' || !verdict_is_failure(row->kind))
            continue;
        /* the first setting that made it exact; else one that loses nothing
         * (resume=whole-pass repeats what was trained of the resumed pass
         * before the kill, as a trainer without the library would) */
        const struct verdict_row *fix = NULL, *lossless = NULL;
        for (size_t j = i + 1; j < report->count && report->results[j].row.label[0] == ' '; j++) {
            const struct verdict_row *trial = &report->results[j].row;
            if (trial->kind == VERDICT_EXACT && fix == NULL)
                fix = trial;
            if (trial->kind == VERDICT_NOT_EXACT && trial->comparison != NULL &&
                trial->comparison->lost == 0 && lossless == NULL)
                lossless = trial;
        }
        const char *with = "  with ";
        if (fix != NULL)
            printf("%s: not exact as set; exact with %s.\n", row->label,
                   fix->label + strlen(with));
        else if (lossless != NULL)
            printf("%s: not exact, and no setting tried made it exact; with %s nothing is lost "
                   "(%llu repeated).\n", row->label, lossless->label + strlen(with),
                   (unsigned long long)lossless->comparison->repeated);
        else
            printf("%s: not exact, and no setting tried made it exact.\n", row->label);
        const struct case_result *result = &report->results[i];
        for (size_t w = 0; w < result->warning_count; w++)
            printf("  the library said after the restart: %s\n", result->warnings[w]);
    }
    return 1;
}

/* --- main ------------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    static struct verify_context context;
    parse_options(argc, argv, &context.options);
    if (getcwd(context.user_directory, sizeof context.user_directory) == NULL)
        verify_refuse("cannot tell the current directory: %s", strerror(errno));
    resolve_trainer(&context);
    locate_library(&context);
    check_environment(&context);
    if (verify_processes_setup() != 0)
        verify_refuse("cannot set up signal handling: %s", strerror(errno));
    make_scratch(&context);
    verify_cleanup_context = &context;

    run_reference(&context);
    struct verify_case cases[] = {
        {"mid-epoch kill", "mid-epoch", COMMIT_MID_EPOCH, 1, 0},
        {"epoch-end kill", "epoch-end", COMMIT_EPOCH_END, 1, 0},
        {NULL, "replicas", COMMIT_MID_EPOCH, context.options.replicas, 0},
    };
    size_t case_count = context.options.replicas > 1 ? 3 : 2;
    for (size_t i = 0; i < case_count; i++)
        cases[i].ordinal = verify_choose_commit(&context.reference, cases[i].place);
    /* the resized case kills mid-epoch, or at an epoch's end if it must */
    char resized_label[96];
    if (cases[2].ordinal == 0) {
        cases[2].place = COMMIT_EPOCH_END;
        cases[2].ordinal = cases[1].ordinal;
    }
    snprintf(resized_label, sizeof resized_label, "%s kill, restart on %u replicas",
             cases[2].place == COMMIT_MID_EPOCH ? "mid-epoch" : "epoch-end",
             context.options.replicas);
    cases[2].label = resized_label;
    if (cases[0].ordinal == 0 && cases[1].ordinal == 0)
        verify_refuse("the uninterrupted run committed no checkpoint after its first record "
                      "(%zu commits, all before training): nothing to kill it after",
                      context.reference.commit_count);

    struct fix_settings fixes;
    prepare_fixes(&context, &fixes);
    struct verify_report report = {0};
    for (size_t i = 0; i < case_count; i++)
        verify_one_case(&context, &cases[i], &fixes, &report);

    printf("\n");
    struct verdict_row *rows = calloc(report.count, sizeof *rows);
    if (rows == NULL)
        verify_refuse("out of memory");
    for (size_t i = 0; i < report.count; i++)
        rows[i] = report.results[i].row;
    if (verdict_table_print(stdout, rows, report.count) != 0)
        verify_refuse("cannot write the table: %s", strerror(errno));
    int status = print_summary(&report);
    fflush(stdout);

    free(rows);
    for (size_t i = 0; i < report.count; i++)
        case_result_free(&report.results[i]);
    free(report.results);
    free(fixes.whole_pass_data);
    resume_history_free(&context.reference);
    config_free(&context.config);
    verify_remove_scratch(&context);
    free(context.options.links);
    return status;
}
