/* config.c - parses the ADAPTDL_* environment variables (adaptshim(7) ENVIRONMENT).
 *
 * Everything here is pure: values come from the envp-style array handed in
 * by the caller (never getenv, so tests can feed any environment), nothing
 * is printed, and every malformed value becomes one line of the form
 *
 *     VARIABLE: what is wrong with "value"; accepted: what would have worked
 *
 * config_variables[] says how each variable is read: its kind (text,
 * integer, word...), its field and its bounds; a few have a parser of their
 * own (the ADAPTDL_DATA grammar is data_entry.c's); rules that involve several
 * variables (replica layout, batch-size limits) run once all are read.
 * The replica layout is config_layout.c's; ADAPTDL_* names nobody reads are
 * config_typos.c's.
 *
 * Numbers are plain unsigned decimals: no sign, no blanks, no hex, no
 * trailing garbage.  A silently misread number in a launch environment is
 * worse than a refusal to start. */
#include "error_message.h"
#include "config.h"
#include "config_parse.h"
#include "config_text.h"
#include "glob_pattern.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COUNT_OF CONFIG_COUNT_OF

#define BATCH_SIZE_LIMIT ((uint64_t)1 << 40)

/* ------------------------------------------------------------------------
 * Words
 * ---------------------------------------------------------------------- */

static const struct word_choice log_level_choices[] = {
    {"error", LOG_LEVEL_ERROR}, {"warn", LOG_LEVEL_WARN},   {"info", LOG_LEVEL_INFO},
    {"debug", LOG_LEVEL_DEBUG}, {"trace", LOG_LEVEL_TRACE},
};

static const struct word_choice resume_choices[] = {
    {"replay", RESUME_REPLAY},
    {"continue", RESUME_CONTINUE},
};

static const struct word_choice lr_rule_choices[] = {
    {"none", LR_RULE_NONE},
    {"linear", LR_RULE_LINEAR},
    {"sqrt", LR_RULE_SQRT},
    {"adascale", LR_RULE_ADASCALE},
};

static const struct word_choice boolean_choices[] = {{"0", 0}, {"1", 1}};

const char *log_level_name(enum log_level level)
{
    for (size_t i = 0; i < COUNT_OF(log_level_choices); i++)
        if (log_level_choices[i].value == (int)level)
            return log_level_choices[i].word;
    return "unknown";
}

/* ------------------------------------------------------------------------
 * Environment lookups
 * ---------------------------------------------------------------------- */

/* The first match wins, as with getenv(3). */
const char *config_lookup(char *const *envp, const char *name)
{
    size_t name_length = strlen(name);

    if (envp == NULL)
        return NULL;
    for (char *const *entry = envp; *entry != NULL; entry++)
        if (strncmp(*entry, name, name_length) == 0 && (*entry)[name_length] == '=')
            return *entry + name_length + 1;
    return NULL;
}

bool config_any_adaptdl_variable(char *const *envp)
{
    if (envp == NULL)
        return false;
    for (char *const *entry = envp; *entry != NULL; entry++)
        if (strncmp(*entry, "ADAPTDL_", strlen("ADAPTDL_")) == 0)
            return true;
    return false;
}

/* ------------------------------------------------------------------------
 * Variable parsers
 * ---------------------------------------------------------------------- */

static int parse_word_variable(struct config_parse_state *state, const char *name,
                               const char *noun, const struct word_choice *choices, size_t count,
                               const char *value, int *out)
{
    char quoted[QUOTED_SIZE];
    char accepted[LIST_SIZE];

    if (config_find_word_choice(choices, count, value, out))
        return 0;
    return error_message(state->error, state->error_size, "%s: unknown %s \"%s\"; accepted: %s",
                        name, noun, config_quote_for_message(quoted, sizeof quoted, value, strlen(value)),
                        config_join_word_choices(accepted, sizeof accepted, choices, count));
}

int config_parse_integer_variable(struct config_parse_state *state, const char *name,
                                  const char *value, uint64_t minimum, uint64_t maximum,
                                  uint64_t *out)
{
    char quoted[QUOTED_SIZE];
    enum number_status status = config_parse_decimal(value, minimum, maximum, out);

    if (status == NUMBER_OK)
        return 0;
    return error_message(state->error, state->error_size,
                        "%s: \"%s\" %s; accepted: an integer from %" PRIu64 " to %" PRIu64, name,
                        config_quote_for_message(quoted, sizeof quoted, value, strlen(value)),
                        status == NUMBER_MALFORMED ? "is not an unsigned decimal integer"
                                                   : "is out of range",
                        minimum, maximum);
}

int config_parse_u32_variable(struct config_parse_state *state, const char *name,
                              const char *value, uint64_t minimum, uint64_t maximum,
                              uint32_t *out)
{
    uint64_t wide;
    if (config_parse_integer_variable(state, name, value, minimum, maximum, &wide) < 0)
        return -1;
    *out = (uint32_t)wide;
    return 0;
}

/* A finite number >= minimum, or > minimum when the minimum is excluded. */
static int parse_real_variable(struct config_parse_state *state, const char *name,
                               const char *value, double minimum, bool minimum_included,
                               double *out)
{
    char quoted[QUOTED_SIZE];
    const char *bound = minimum_included ? ">=" : ">";
    double number;

    if (!config_parse_finite_number(value, &number))
        return error_message(state->error, state->error_size,
                            "%s: \"%s\" is not a finite number; accepted: a finite number %s %g",
                            name, config_quote_for_message(quoted, sizeof quoted, value, strlen(value)),
                            bound, minimum);
    if (number < minimum || (!minimum_included && number == minimum))
        return error_message(state->error, state->error_size,
                            "%s: \"%s\" is out of range; accepted: a finite number %s %g", name,
                            config_quote_for_message(quoted, sizeof quoted, value, strlen(value)), bound,
                            minimum);
    *out = number;
    return 0;
}

/* Paths and globs: set means non-empty; an empty value is a mistake, not a
 * way to unset (unset the variable instead). */
static int copy_nonempty_variable(struct config_parse_state *state, const char *name,
                                  const char *value, const char *accepted, char **out)
{
    if (value[0] == '\0')
        return error_message(state->error, state->error_size,
                            "%s: empty value \"\"; accepted: %s", name, accepted);
    *out = strdup(value);
    if (*out == NULL)
        return error_message(state->error, state->error_size, "%s: out of memory", name);
    return 0;
}

/* A glob that fnmatch(3) cannot match as written (glob_pattern.h) matches
 * nothing, or only a literal '[': the program or checkpoint it meant never
 * shows, and nothing would say why. */
static int copy_glob_variable(struct config_parse_state *state, const char *name,
                              const char *value, const char *accepted, char **out)
{
    struct glob_pattern_problem problem;
    char quoted[QUOTED_SIZE];

    if (!glob_pattern_check(value, &problem))
        return error_message(state->error, state->error_size, "%s: \"%s\" %s; accepted: %s (%s)",
                             name, config_quote_for_message(quoted, sizeof quoted, value,
                                                            strlen(value)),
                             problem.problem, accepted, problem.remedy);
    return copy_nonempty_variable(state, name, value, accepted, out);
}

static bool is_environment_name(const char *name)
{
    if (!((name[0] >= 'A' && name[0] <= 'Z') || (name[0] >= 'a' && name[0] <= 'z') ||
          name[0] == '_'))
        return false;
    for (const char *c = name + 1; *c != '\0'; c++)
        if (!((*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') ||
              (*c >= '0' && *c <= '9') || *c == '_'))
            return false;
    return true;
}

/* An option flag the value can follow: "-b" or "--batch-size", not a bare
 * "-" or "--" (stdin and end of options), and without '=' or blanks, since
 * the injector writes "FLAG VALUE" or "FLAG=VALUE" itself. */
static bool is_option_flag(const char *flag)
{
    if (flag[0] != '-' || flag[1] == '\0' || strcmp(flag, "--") == 0)
        return false;
    return strpbrk(flag, "= \t\n") == NULL;
}

static int parse_injection_variable(struct config_parse_state *state, const char *name,
                                    const char *value, struct injection_target *target)
{
    static const char accepted[] = "argv:FLAG with FLAG such as --batch-size or -b, or env:NAME";
    char quoted[QUOTED_SIZE];
    enum injection_kind kind;
    const char *problem;
    const char *rest;

    config_quote_for_message(quoted, sizeof quoted, value, strlen(value));
    if (strncmp(value, "argv:", 5) == 0) {
        kind = INJECT_ARGV;
        rest = value + 5;
        problem = is_option_flag(rest) ? NULL : "does not name an option flag starting with '-'";
    } else if (strncmp(value, "env:", 4) == 0) {
        kind = INJECT_ENV;
        rest = value + 4;
        problem = is_environment_name(rest) ? NULL : "does not name a valid environment variable";
    } else {
        return error_message(state->error, state->error_size,
                            "%s: \"%s\" has neither an argv: nor an env: prefix; accepted: %s",
                            name, quoted, accepted);
    }
    if (problem != NULL)
        return error_message(state->error, state->error_size, "%s: \"%s\" %s; accepted: %s", name,
                            quoted, problem, accepted);
    target->name = strdup(rest);
    if (target->name == NULL)
        return error_message(state->error, state->error_size, "%s: out of memory", name);
    target->kind = kind;
    return 0;
}

static int parse_data_variable(struct config_parse_state *state, const char *name,
                               const char *value)
{
    (void)name; /* config_parse_data() names ADAPTDL_DATA itself */
    return config_parse_data(value, &state->config->data, &state->config->data_count,
                             state->error, state->error_size);
}

/* "MIN:MAX" with 1 <= MIN <= MAX <= limit; what names what the numbers
 * count and accepted is the whole "accepted:" text, for the messages. */
static int parse_range_variable(struct config_parse_state *state, const char *name,
                                const char *value, uint64_t limit, const char *what,
                                const char *accepted, uint64_t *minimum, uint64_t *maximum)
{
    char quoted[QUOTED_SIZE];
    const char *colon = strchr(value, ':');

    config_quote_for_message(quoted, sizeof quoted, value, strlen(value));
    if (colon == NULL ||
        config_parse_decimal_span(value, (size_t)(colon - value), 1, limit, minimum) !=
            NUMBER_OK ||
        config_parse_decimal(colon + 1, 1, limit, maximum) != NUMBER_OK)
        return error_message(state->error, state->error_size,
                             "%s: \"%s\" is not MIN:MAX of two %s; accepted: %s", name, quoted,
                             what, accepted);
    if (*minimum > *maximum)
        return error_message(state->error, state->error_size,
                             "%s: \"%s\" has MIN above MAX; accepted: %s", name, quoted, accepted);
    return 0;
}

static int parse_local_bsz_bounds_variable(struct config_parse_state *state, const char *name,
                                           const char *value)
{
    return parse_range_variable(state, name, value, BATCH_SIZE_LIMIT, "positive integers",
                                "MIN:MAX with 1 <= MIN <= MAX <= 2^40",
                                &state->config->local_bsz_min, &state->config->local_bsz_max);
}

static int parse_replicas_range_variable(struct config_parse_state *state, const char *name,
                                         const char *value)
{
    char accepted[96];
    uint64_t minimum, maximum;

    snprintf(accepted, sizeof accepted, "MIN:MAX with 1 <= MIN <= MAX <= %" PRIu64,
             (uint64_t)REPLICA_LIMIT);
    if (parse_range_variable(state, name, value, REPLICA_LIMIT, "replica counts", accepted,
                             &minimum, &maximum) < 0)
        return -1;
    state->config->replicas_min = (uint32_t)minimum;
    state->config->replicas_max = (uint32_t)maximum;
    return 0;
}

/* An explicit period decides from the start (see decide_seconds_given). */
static int parse_decide_seconds_variable(struct config_parse_state *state, const char *name,
                                         const char *value)
{
    state->config->decide_seconds_given = true;
    return parse_real_variable(state, name, value, 0, false, &state->config->decide_seconds);
}

/* ------------------------------------------------------------------------
 * The variable table
 * ---------------------------------------------------------------------- */

/* How a variable's value is read, and into what type of field. */
enum variable_kind {
    VARIABLE_TEXT,      /* non-empty text, strdup'ed into a char * */
    VARIABLE_GLOB,      /* the same, a well-formed fnmatch(3) pattern */
    VARIABLE_INTEGER,   /* decimal in [minimum, maximum], into a uint64_t */
    VARIABLE_COUNT,     /* the same into a uint32_t (maximum fits) */
    VARIABLE_REAL,      /* finite number >= (or >) real_minimum, into a double */
    VARIABLE_WORD,      /* one word of choices, into an enum */
    VARIABLE_INJECTION, /* argv:FLAG or env:NAME, into a struct injection_target */
    VARIABLE_OWN,       /* parse() reads it: grammars and several fields */
};

/* The WORD kind stores an int through the enum field's address, which is
 * sound only while the project's enums are int-sized (no -fshort-enums). */
_Static_assert(sizeof(enum log_level) == sizeof(int) &&
                   sizeof(enum resume_mode) == sizeof(int) && sizeof(enum lr_rule) == sizeof(int),
               "VARIABLE_WORD fields must be int-sized");

struct config_variable {
    const char *name;
    enum variable_kind kind;
    size_t offset;          /* of the field in struct adaptdl_config */
    const char *accepted;   /* TEXT: what a value must be; WORD: the noun */
    uint64_t minimum, maximum;
    double real_minimum;
    bool real_minimum_included;
    const struct word_choice *choices;
    size_t choice_count;
    int (*parse)(struct config_parse_state *state, const char *name, const char *value);
};

#define FIELD_OFFSET(field) offsetof(struct adaptdl_config, field)
#define TEXT(variable, field, accepted_text)                                                  \
    { .name = variable, .kind = VARIABLE_TEXT, .offset = FIELD_OFFSET(field),                 \
      .accepted = accepted_text }
#define GLOB(variable, field, accepted_text)                                                  \
    { .name = variable, .kind = VARIABLE_GLOB, .offset = FIELD_OFFSET(field),                 \
      .accepted = accepted_text }
#define INTEGER(variable, field, low, high)                                                   \
    { .name = variable, .kind = VARIABLE_INTEGER, .offset = FIELD_OFFSET(field),              \
      .minimum = low, .maximum = high }
#define COUNT(variable, field, low, high)                                                     \
    { .name = variable, .kind = VARIABLE_COUNT, .offset = FIELD_OFFSET(field),                \
      .minimum = low, .maximum = high }
#define REAL(variable, field, low, low_included)                                              \
    { .name = variable, .kind = VARIABLE_REAL, .offset = FIELD_OFFSET(field),                 \
      .real_minimum = low, .real_minimum_included = low_included }
#define WORD(variable, field, noun, table)                                                    \
    { .name = variable, .kind = VARIABLE_WORD, .offset = FIELD_OFFSET(field),                 \
      .accepted = noun, .choices = table, .choice_count = COUNT_OF(table) }
#define INJECTION(variable, field)                                                            \
    { .name = variable, .kind = VARIABLE_INJECTION, .offset = FIELD_OFFSET(field) }
#define OWN(variable, parser) { .name = variable, .kind = VARIABLE_OWN, .parse = parser }

static const char file_path_with_rank[] =
    "a file path, where %r stands for the rank and %p for the pid";

/* Variables read one by one, in this order (the first error is reported).
 * ADAPTDL_DISABLE is read before all of them, and the replica layout
 * (ADAPTDL_NUM_REPLICAS, ADAPTDL_REPLICA_RANK and their MPI and torchrun
 * fallbacks, and the node count torchrun implies when ADAPTDL_NUM_NODES is
 * not set) after them, by parse_replica_layout() and
 * parse_torchrun_node_count(). */
static const struct config_variable config_variables[] = {
    WORD("ADAPTDL_LOG", log_level, "level", log_level_choices),
    TEXT("ADAPTDL_LOG_FILE", log_file, file_path_with_rank),
    GLOB("ADAPTDL_TARGET", target, "a non-empty fnmatch(3) glob of program basenames"),
    OWN("ADAPTDL_DATA", parse_data_variable),
    TEXT("ADAPTDL_CHECKPOINT_PATH", checkpoint_path, "a directory path"),
    GLOB("ADAPTDL_SAVE", save_glob,
         "a non-empty fnmatch(3) glob of the trainer's checkpoint files"),
    WORD("ADAPTDL_RESUME", resume, "mode", resume_choices),
    INTEGER("ADAPTDL_SEED", seed, 0, UINT64_MAX),
    COUNT("ADAPTDL_NUM_NODES", num_nodes, 1, REPLICA_LIMIT),
    COUNT("ADAPTDL_NUM_RESTARTS", num_restarts, 0, UINT32_MAX),
    INTEGER("ADAPTDL_GRAD_MIN", grad_min, 0, UINT64_MAX),
    REAL("ADAPTDL_DRAIN", drain_seconds, 0, true),
    REAL("ADAPTDL_STOP_SECONDS", stop_seconds, 0, true),
    TEXT("ADAPTDL_METRICS_FILE", metrics_file, file_path_with_rank),
    TEXT("ADAPTDL_HINTS_FILE", hints_file, "a file path"),
    TEXT("ADAPTDL_TRACE_FILE", trace_file, file_path_with_rank),
    INTEGER("ADAPTDL_TRACE_STOP_AFTER", trace_stop_after, 0, UINT64_MAX),
    INTEGER("ADAPTDL_BATCH_SIZE", batch_size, 1, BATCH_SIZE_LIMIT),
    INTEGER("ADAPTDL_MAX_BATCH_SIZE", max_batch_size, 1, BATCH_SIZE_LIMIT),
    OWN("ADAPTDL_LOCAL_BSZ_BOUNDS", parse_local_bsz_bounds_variable),
    INJECTION("ADAPTDL_BSZ_ARG", bsz_arg),
    INJECTION("ADAPTDL_LR_ARG", lr_arg),
    WORD("ADAPTDL_LR_RULE", lr_rule, "rule", lr_rule_choices),
    REAL("ADAPTDL_SPEEDUP", speedup_threshold, 1, true),
    OWN("ADAPTDL_DECIDE_SECONDS", parse_decide_seconds_variable),
    REAL("ADAPTDL_PAYBACK_SECONDS", payback_seconds, 0, false),
    OWN("ADAPTDL_REPLICAS_RANGE", parse_replicas_range_variable),
};

static int parse_table_variable(struct config_parse_state *state,
                                const struct config_variable *variable, const char *value)
{
    void *field = (char *)state->config + variable->offset;

    switch (variable->kind) {
    case VARIABLE_TEXT:
        return copy_nonempty_variable(state, variable->name, value, variable->accepted, field);
    case VARIABLE_GLOB:
        return copy_glob_variable(state, variable->name, value, variable->accepted, field);
    case VARIABLE_INTEGER:
        return config_parse_integer_variable(state, variable->name, value, variable->minimum,
                                             variable->maximum, field);
    case VARIABLE_COUNT:
        return config_parse_u32_variable(state, variable->name, value, variable->minimum,
                                         variable->maximum, field);
    case VARIABLE_REAL:
        return parse_real_variable(state, variable->name, value, variable->real_minimum,
                                   variable->real_minimum_included, field);
    case VARIABLE_WORD:
        return parse_word_variable(state, variable->name, variable->accepted, variable->choices,
                                   variable->choice_count, value, field);
    case VARIABLE_INJECTION:
        return parse_injection_variable(state, variable->name, value, field);
    case VARIABLE_OWN:
        return variable->parse(state, variable->name, value);
    }
    return error_message(state->error, state->error_size, "%s: no parser", variable->name);
}

static int check_batch_size_limits(struct config_parse_state *state)
{
    const struct adaptdl_config *config = state->config;

    if (config->batch_size == 0 || config->max_batch_size == 0 ||
        config->max_batch_size >= config->batch_size)
        return 0;
    return error_message(state->error, state->error_size,
                        "ADAPTDL_MAX_BATCH_SIZE: \"%" PRIu64 "\" is below ADAPTDL_BATCH_SIZE \"%" PRIu64
                        "\"; accepted: a maximum global batch size >= ADAPTDL_BATCH_SIZE",
                        config->max_batch_size, config->batch_size);
}

/* ------------------------------------------------------------------------
 * Public entry points
 * ---------------------------------------------------------------------- */

static void set_config_defaults(struct adaptdl_config *config)
{
    /* every field not named here is 0, false or empty */
    *config = (struct adaptdl_config){
        .resume = RESUME_CONTINUE,
        .num_replicas = 1,
        .num_nodes = 1,
        .log_level = LOG_LEVEL_WARN,
        .grad_min = 1024,
        .stop_seconds = 10,
        .lr_rule = LR_RULE_NONE,
        .speedup_threshold = 1.05,
        .decide_seconds = 30,
        .payback_seconds = 600,
    };
}

/* ADAPTDL_DISABLE=1 promises a library that does nothing, so it is read
 * first and nothing else is: a broken variable elsewhere must not stop a
 * trainer that the user asked us to leave alone. */
static int parse_disable_variable(struct config_parse_state *state)
{
    const char *value = config_lookup(state->envp, "ADAPTDL_DISABLE");
    int disabled = 0;

    if (value == NULL)
        return 0;
    if (parse_word_variable(state, "ADAPTDL_DISABLE", "value", boolean_choices,
                            COUNT_OF(boolean_choices), value, &disabled) < 0)
        return -1;
    state->config->disabled = disabled;
    return 0;
}

static int parse_all_variables(struct config_parse_state *state)
{
    if (parse_disable_variable(state) < 0)
        return -1;
    if (state->config->disabled)
        return 0;
    for (size_t i = 0; i < COUNT_OF(config_variables); i++) {
        const char *value = config_lookup(state->envp, config_variables[i].name);
        if (value != NULL && parse_table_variable(state, &config_variables[i], value) < 0)
            return -1;
    }
    state->config->grad_min_given = config_lookup(state->envp, "ADAPTDL_GRAD_MIN") != NULL;
    /* Open MPI's node count after torchrun's: an MPI launcher's layout
     * takes precedence, as for the replica count; srun's applies only to
     * a layout taken from an srun step */
    if (config_parse_replica_layout(state) < 0 || config_parse_torchrun_node_count(state) < 0 ||
        config_parse_open_mpi_node_count(state) < 0 ||
        config_parse_slurm_node_count(state) < 0 || config_check_node_count(state) < 0)
        return -1;
    return check_batch_size_limits(state);
}

int config_parse(struct adaptdl_config *config, char *const *envp, char *error,
                 size_t error_size)
{
    struct config_parse_state state = {
        .config = config, .envp = envp, .error = error, .error_size = error_size};

    if (error != NULL && error_size > 0)
        error[0] = '\0';
    set_config_defaults(config);
    if (parse_all_variables(&state) == 0)
        return 0;
    config_free(config);
    return -1;
}

size_t config_table_variable_count(void)
{
    return COUNT_OF(config_variables);
}

const char *config_table_variable_name(size_t index)
{
    return index < COUNT_OF(config_variables) ? config_variables[index].name : NULL;
}

void config_free(struct adaptdl_config *config)
{
    if (config == NULL)
        return;
    config_free_data_entries(config->data, config->data_count);
    free(config->checkpoint_path);
    free(config->save_glob);
    free(config->log_file);
    free(config->target);
    free(config->metrics_file);
    free(config->hints_file);
    free(config->trace_file);
    free(config->bsz_arg.name);
    free(config->lr_arg.name);
    memset(config, 0, sizeof *config);
}
