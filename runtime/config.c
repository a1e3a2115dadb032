/* config.c - parses the ADAPTDL_* environment contract (SPEC §2, §3, §7).
 *
 * Everything here is pure: values come from the envp-style array handed in
 * by the caller (never getenv, so tests can feed any environment), nothing
 * is printed, and every malformed value becomes one line of the form
 *
 *     VARIABLE: what is wrong with "value"; accepted: what would have worked
 *
 * Each variable has its own small parser in config_variables[], each
 * ADAPTDL_DATA key its own in data_keys[]; rules that involve several
 * variables (replica layout, batch-size limits) run once all are read.
 *
 * Numbers are plain unsigned decimals: no sign, no blanks, no hex, no
 * trailing garbage.  A silently misread number in a launch environment is
 * worse than a refusal to start. */
#include "config.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COUNT_OF(array) (sizeof(array) / sizeof((array)[0]))

/* Record, header, lookahead and count-field numbers: 2^40 bytes (1 TiB) is
 * far beyond any record or header, yet small enough that sums of two such
 * numbers can never overflow. */
#define DATA_NUMBER_LIMIT ((uint64_t)1 << 40)
#define BATCH_SIZE_LIMIT ((uint64_t)1 << 40)
#define REPLICA_LIMIT ((uint64_t)1 << 20)

/* Room for one quoted value inside a message; longer values are cut. */
#define QUOTED_SIZE 128
/* Room for an "accepted: ..." list built from a table. */
#define LIST_SIZE 256

/* ------------------------------------------------------------------------
 * Messages
 * ---------------------------------------------------------------------- */

static int __attribute__((format(printf, 3, 4)))
report_error(char *error, size_t error_size, const char *format, ...)
{
    if (error != NULL && error_size > 0) {
        va_list args;
        va_start(args, format);
        vsnprintf(error, error_size, format, args);
        va_end(args);
    }
    return -1;
}

/* Copies text into out for use between double quotes in a one-line message.
 * Control bytes become \xNN (a newline inside a value must not break the
 * line), a double quote becomes \", and long values end in "...". */
const char *config_quote_for_message(char *out, size_t out_size, const char *text,
                                     size_t length)
{
    /* Longest escape (4) + "..." (3) + NUL (1) must always still fit. */
    const size_t reserve = 4 + 3 + 1;
    size_t used = 0;

    for (size_t i = 0; i < length; i++) {
        unsigned char c = (unsigned char)text[i];
        if (used + reserve > out_size) {
            memcpy(out + used, "...", 3);
            used += 3;
            break;
        }
        if (c < 0x20 || c == 0x7f) {
            used += (size_t)snprintf(out + used, out_size - used, "\\x%02x", c);
        } else if (c == '"') {
            out[used++] = '\\';
            out[used++] = '"';
        } else {
            out[used++] = (char)c;
        }
    }
    out[used] = '\0';
    return out;
}

/* Appends ", item" (or just "item" to an empty list), cutting at out_size. */
static void append_to_list(char *out, size_t out_size, const char *item)
{
    size_t used = strlen(out);
    if (used < out_size)
        snprintf(out + used, out_size - used, "%s%s", used > 0 ? ", " : "", item);
}

/* ------------------------------------------------------------------------
 * Numbers and words
 * ---------------------------------------------------------------------- */

enum number_status { NUMBER_OK, NUMBER_MALFORMED, NUMBER_TOO_SMALL, NUMBER_TOO_LARGE };

/* Parses text[0..length) as an unsigned decimal in [minimum, maximum].
 * Takes a length so that fields of "OFFSET,TYPE,UNIT" need no copy. */
static enum number_status parse_decimal_span(const char *text, size_t length, uint64_t minimum,
                                             uint64_t maximum, uint64_t *out)
{
    uint64_t value = 0;

    if (length == 0)
        return NUMBER_MALFORMED;
    /* Check every byte first, so "99999999999999999999x" is called
     * malformed rather than too large. */
    for (size_t i = 0; i < length; i++)
        if (text[i] < '0' || text[i] > '9')
            return NUMBER_MALFORMED;
    for (size_t i = 0; i < length; i++) {
        unsigned digit = (unsigned)(text[i] - '0');
        if (value > (UINT64_MAX - digit) / 10)
            return NUMBER_TOO_LARGE;
        value = value * 10 + digit;
    }
    if (value < minimum)
        return NUMBER_TOO_SMALL;
    if (value > maximum)
        return NUMBER_TOO_LARGE;
    *out = value;
    return NUMBER_OK;
}

static enum number_status parse_decimal(const char *text, uint64_t minimum, uint64_t maximum,
                                        uint64_t *out)
{
    return parse_decimal_span(text, strlen(text), minimum, maximum, out);
}

/* A finite number written entirely in text.  strtod alone would accept
 * leading blanks, "inf", "nan" and a prefix such as "30s".  strtod reads
 * the decimal point of LC_NUMERIC, which is still "C" when the shim parses
 * its configuration before the trainer's main. */
static bool parse_finite_number(const char *text, double *out)
{
    char *end;
    double value;

    if (text[0] == '\0' || text[0] == ' ' || (text[0] >= '\t' && text[0] <= '\r'))
        return false;
    value = strtod(text, &end);
    if (*end != '\0' || !isfinite(value))
        return false;
    *out = value;
    return true;
}

struct word_choice {
    const char *word;
    int value;
};

static bool find_word_choice(const struct word_choice *choices, size_t count, const char *word,
                             int *value)
{
    for (size_t i = 0; i < count; i++) {
        if (strcmp(choices[i].word, word) == 0) {
            *value = choices[i].value;
            return true;
        }
    }
    return false;
}

static const char *join_word_choices(char *out, size_t out_size,
                                     const struct word_choice *choices, size_t count)
{
    out[0] = '\0';
    for (size_t i = 0; i < count; i++)
        append_to_list(out, out_size, choices[i].word);
    return out;
}

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

static const struct word_choice role_choices[] = {
    {"train", DATA_ROLE_TRAIN},
    {"eval", DATA_ROLE_EVAL},
};

static const struct word_choice tail_choices[] = {{"error", TAIL_ERROR}, {"drop", TAIL_DROP}};

const char *log_level_name(enum log_level level)
{
    for (size_t i = 0; i < COUNT_OF(log_level_choices); i++)
        if (log_level_choices[i].value == (int)level)
            return log_level_choices[i].word;
    return "unknown";
}

/* ------------------------------------------------------------------------
 * ADAPTDL_DATA (SPEC §3)
 * ---------------------------------------------------------------------- */

/* Where in ADAPTDL_DATA we are, so that every message can name the entry. */
struct data_parse {
    size_t entry_number;    /* 1-based */
    const char *entry_text; /* the raw entry, escapes intact */
    size_t entry_length;
    char *error;
    size_t error_size;
};

/* An entry being filled, plus what is needed to apply defaults that depend
 * on other keys (shuffle follows role, whichever order they came in). */
struct data_entry_draft {
    struct data_entry *entry;
    unsigned keys_seen;     /* bit i set: data_keys[i] was given */
    bool role_given;
    bool shuffle_given;
    const char *count_text; /* the count= value, for the header-fit message */
};

struct count_field_kind {
    const char *name;
    enum count_field_type type;
    uint64_t width;
};

static const struct count_field_kind count_field_kinds[] = {
    {"u32le", COUNT_FIELD_U32LE, 4}, {"u32be", COUNT_FIELD_U32BE, 4},
    {"i32le", COUNT_FIELD_I32LE, 4}, {"u64le", COUNT_FIELD_U64LE, 8},
    {"u64be", COUNT_FIELD_U64BE, 8},
};

static const struct count_field_kind *find_count_field_kind(const char *name, size_t length)
{
    for (size_t i = 0; i < COUNT_OF(count_field_kinds); i++)
        if (strlen(count_field_kinds[i].name) == length &&
            memcmp(count_field_kinds[i].name, name, length) == 0)
            return &count_field_kinds[i];
    return NULL;
}

static const struct count_field_kind *count_field_kind_of(enum count_field_type type)
{
    for (size_t i = 0; i < COUNT_OF(count_field_kinds); i++)
        if (count_field_kinds[i].type == type)
            return &count_field_kinds[i];
    return NULL;
}

/* What is wrong with a key's number, phrased to follow `key="value"`. */
static const char *describe_number_problem(enum number_status status, uint64_t minimum)
{
    if (status == NUMBER_OK)
        return NULL;
    if (status == NUMBER_TOO_LARGE)
        return "is too large";
    return minimum > 0 ? "is not a positive integer" : "is not an unsigned integer";
}

static const char *parse_data_number(const char *value, uint64_t minimum, uint64_t *out)
{
    return describe_number_problem(parse_decimal(value, minimum, DATA_NUMBER_LIMIT, out), minimum);
}

/* Each key parser returns NULL on success, or what is wrong with the value
 * (a phrase that reads after `key="value"`). */

static const char *parse_record_key(struct data_entry_draft *draft, const char *value)
{
    return parse_data_number(value, 1, &draft->entry->record_size);
}

static const char *parse_lines_key(struct data_entry_draft *draft, const char *value)
{
    (void)value; /* a flag: parse_data_key_item() made sure there is none */
    draft->entry->lines = true;
    return NULL;
}

static const char *parse_header_key(struct data_entry_draft *draft, const char *value)
{
    return parse_data_number(value, 0, &draft->entry->header_size);
}

static const char *parse_role_key(struct data_entry_draft *draft, const char *value)
{
    int role = 0;
    if (!find_word_choice(role_choices, COUNT_OF(role_choices), value, &role))
        return "is not a known role";
    draft->entry->role = (enum data_role)role;
    draft->role_given = true;
    return NULL;
}

static const char *parse_shuffle_key(struct data_entry_draft *draft, const char *value)
{
    int shuffle = 0;
    if (!find_word_choice(boolean_choices, COUNT_OF(boolean_choices), value, &shuffle))
        return "is not 0 or 1";
    draft->entry->shuffle = shuffle;
    draft->shuffle_given = true;
    return NULL;
}

static const char *parse_shard_key(struct data_entry_draft *draft, const char *value)
{
    int shard = 0;
    if (!find_word_choice(boolean_choices, COUNT_OF(boolean_choices), value, &shard))
        return "is not 0 or 1";
    draft->entry->shard = shard;
    return NULL;
}

static const char *parse_tail_key(struct data_entry_draft *draft, const char *value)
{
    int tail = 0;
    if (!find_word_choice(tail_choices, COUNT_OF(tail_choices), value, &tail))
        return "is not a known tail policy";
    draft->entry->tail = (enum tail_policy)tail;
    return NULL;
}

static const char *parse_lookahead_key(struct data_entry_draft *draft, const char *value)
{
    return parse_data_number(value, 0, &draft->entry->lookahead);
}

/* count=OFFSET,TYPE,UNIT.  Whether the field lies inside the header is
 * checked once the whole entry is read, since header= may come later. */
static const char *parse_count_key(struct data_entry_draft *draft, const char *value)
{
    const char *first_comma = strchr(value, ',');
    const char *second_comma = first_comma != NULL ? strchr(first_comma + 1, ',') : NULL;
    const char *type_text, *unit_text;
    const struct count_field_kind *kind;
    uint64_t offset, unit;

    if (second_comma == NULL)
        return "is not OFFSET,TYPE,UNIT";
    type_text = first_comma + 1;
    unit_text = second_comma + 1;
    if (parse_decimal_span(value, (size_t)(first_comma - value), 0, DATA_NUMBER_LIMIT, &offset) !=
        NUMBER_OK)
        return "has an OFFSET that is not an integer from 0 to 2^40";
    kind = find_count_field_kind(type_text, (size_t)(second_comma - type_text));
    if (kind == NULL)
        return "has an unknown TYPE";
    if (parse_decimal(unit_text, 1, DATA_NUMBER_LIMIT, &unit) != NUMBER_OK)
        return "has a UNIT that is not an integer from 1 to 2^40";

    draft->entry->has_count_field = true;
    draft->entry->count_offset = offset;
    draft->entry->count_type = kind->type;
    draft->entry->count_unit = unit;
    draft->count_text = value;
    return NULL;
}

struct data_key {
    const char *name;
    bool is_flag; /* written bare, as `lines`; the others need `=value` */
    const char *(*parse)(struct data_entry_draft *draft, const char *value);
    const char *accepted;
};

/* Several entries may say role=train: SPEC §3 lets a dataset be split into
 * shard files, all of them train files.  What is an error is one key given
 * twice inside one entry (`role=train:role=eval`): which one was meant? */
static const struct data_key data_keys[] = {
    {"record", false, parse_record_key, "record=BYTES (1..2^40)"},
    {"lines", true, parse_lines_key, "lines (without a value)"},
    {"header", false, parse_header_key, "header=BYTES (0..2^40)"},
    {"role", false, parse_role_key, "role=train or role=eval"},
    {"shuffle", false, parse_shuffle_key, "shuffle=0 or shuffle=1"},
    {"shard", false, parse_shard_key, "shard=0 or shard=1"},
    {"tail", false, parse_tail_key, "tail=error or tail=drop"},
    {"lookahead", false, parse_lookahead_key, "lookahead=N (0..2^40)"},
    {"count", false, parse_count_key,
     "count=OFFSET,TYPE,UNIT with TYPE one of u32le, u32be, i32le, u64le, u64be and UNIT >= 1"},
};

static const struct data_key *find_data_key(const char *name)
{
    for (size_t i = 0; i < COUNT_OF(data_keys); i++)
        if (strcmp(data_keys[i].name, name) == 0)
            return &data_keys[i];
    return NULL;
}

static const char *join_data_key_names(char *out, size_t out_size)
{
    out[0] = '\0';
    for (size_t i = 0; i < COUNT_OF(data_keys); i++)
        append_to_list(out, out_size, data_keys[i].name);
    return out;
}

/* "ADAPTDL_DATA entry N ("raw entry"): " followed by the formatted detail. */
static int __attribute__((format(printf, 2, 3)))
report_data_entry_error(const struct data_parse *parse, const char *format, ...)
{
    char detail[512];
    char quoted_entry[QUOTED_SIZE];
    va_list args;

    va_start(args, format);
    vsnprintf(detail, sizeof detail, format, args);
    va_end(args);
    return report_error(parse->error, parse->error_size, "ADAPTDL_DATA entry %zu (\"%s\"): %s",
                        parse->entry_number,
                        config_quote_for_message(quoted_entry, sizeof quoted_entry, parse->entry_text,
                                          parse->entry_length),
                        detail);
}

/* Length of the prefix of text[0..length) before the first `stop` that is
 * not escaped.  A backslash always pairs with the byte after it: `\:` and
 * `\;` are the escapes of SPEC §3, and any other pair (`\*`, `\\`) is an
 * fnmatch escape that must stay whole, so `\\;` still ends an entry. */
static size_t find_unescaped(const char *text, size_t length, char stop)
{
    size_t i = 0;
    while (i < length && text[i] != stop)
        i += (text[i] == '\\' && i + 1 < length) ? 2 : 1;
    return i;
}

/* Copies a GLOB, turning `\:` and `\;` into `:` and `;`.  Every other
 * backslash pair is kept as written: fnmatch(3) gives it its meaning. */
static char *unescape_glob(const char *text, size_t length)
{
    char *glob = malloc(length + 1);
    size_t used = 0;

    if (glob == NULL)
        return NULL;
    for (size_t i = 0; i < length; i++) {
        bool escape_pair = text[i] == '\\' && i + 1 < length;
        if (escape_pair && (text[i + 1] == ':' || text[i + 1] == ';')) {
            glob[used++] = text[++i];
        } else if (escape_pair) {
            glob[used++] = text[i++];
            glob[used++] = text[i];
        } else {
            glob[used++] = text[i];
        }
    }
    glob[used] = '\0';
    return glob;
}

/* One `key` or `key=value` item (NUL-terminated, modifiable). */
static int parse_data_key_item(const struct data_parse *parse, struct data_entry_draft *draft,
                               char *item)
{
    char names[LIST_SIZE];
    char quoted[QUOTED_SIZE];
    char *value = strchr(item, '=');
    const struct data_key *key;
    const char *problem;
    unsigned key_bit;

    if (value != NULL)
        *value++ = '\0';
    if (item[0] == '\0')
        return report_data_entry_error(parse, "empty key; accepted: %s",
                                       join_data_key_names(names, sizeof names));
    key = find_data_key(item);
    if (key == NULL)
        return report_data_entry_error(parse, "unknown key \"%s\"; accepted: %s",
                                       config_quote_for_message(quoted, sizeof quoted, item, strlen(item)),
                                       join_data_key_names(names, sizeof names));
    key_bit = 1u << (key - data_keys);
    if (draft->keys_seen & key_bit)
        return report_data_entry_error(parse, "%s given twice; accepted: each key at most once per entry (%s)",
                                       key->name, key->accepted);
    draft->keys_seen |= key_bit;

    if (key->is_flag && value != NULL)
        return report_data_entry_error(parse, "%s=\"%s\" takes no value; accepted: %s", key->name,
                                       config_quote_for_message(quoted, sizeof quoted, value, strlen(value)),
                                       key->accepted);
    if (!key->is_flag && value == NULL)
        return report_data_entry_error(parse, "%s has no value; accepted: %s", key->name,
                                       key->accepted);
    problem = key->parse(draft, value);
    if (problem != NULL)
        return report_data_entry_error(parse, "%s=\"%s\" %s; accepted: %s", key->name,
                                       config_quote_for_message(quoted, sizeof quoted, value, strlen(value)),
                                       problem, key->accepted);
    return 0;
}

/* Rules between keys, then the defaults that depend on them. */
static int finish_data_entry(const struct data_parse *parse, struct data_entry_draft *draft,
                             bool is_first_entry)
{
    struct data_entry *entry = draft->entry;

    if (entry->lines && entry->record_size > 0)
        return report_data_entry_error(parse, "lines and record= exclude each other; accepted: either record=BYTES or lines");
    if (!entry->lines && entry->record_size == 0)
        return report_data_entry_error(parse, "no record size; accepted: record=BYTES (1..2^40) or lines");
    if (entry->has_count_field) {
        uint64_t width = count_field_kind_of(entry->count_type)->width;
        char quoted[QUOTED_SIZE];
        /* Both terms are at most 2^40, so the sum cannot overflow. */
        if (entry->count_offset + width > entry->header_size)
            return report_data_entry_error(
                parse,
                "count=\"%s\" lies outside the header (bytes %" PRIu64 "..%" PRIu64
                " of a %" PRIu64 "-byte header); accepted: OFFSET + %" PRIu64 " <= header=BYTES",
                config_quote_for_message(quoted, sizeof quoted, draft->count_text,
                                  strlen(draft->count_text)),
                entry->count_offset, entry->count_offset + width - 1, entry->header_size, width);
    }
    if (!draft->role_given)
        entry->role = is_first_entry ? DATA_ROLE_TRAIN : DATA_ROLE_EVAL;
    if (!draft->shuffle_given)
        entry->shuffle = entry->role == DATA_ROLE_TRAIN;
    return 0;
}

/* Parses the key items of an entry, "key=value:key:...", then finishes the
 * entry.  The items are copied once so that they can be cut in place. */
static int parse_data_key_items(const struct data_parse *parse, struct data_entry_draft *draft,
                                const char *text, size_t length, bool is_first_entry)
{
    char *items = strndup(text, length);
    char *cursor = items;
    char *item;
    int result = 0;

    if (items == NULL)
        return report_error(parse->error, parse->error_size, "ADAPTDL_DATA: out of memory");
    while (result == 0 && (item = strsep(&cursor, ":")) != NULL)
        result = parse_data_key_item(parse, draft, item);
    /* Finished before the copy is freed: draft->count_text points into it. */
    if (result == 0)
        result = finish_data_entry(parse, draft, is_first_entry);
    free(items);
    return result;
}

static int parse_data_entry(const struct data_parse *parse, struct data_entry *entry,
                            bool is_first_entry)
{
    const char *text = parse->entry_text;
    size_t length = parse->entry_length;
    size_t glob_length = find_unescaped(text, length, ':');
    struct data_entry_draft draft = {.entry = entry};

    if (length == 0)
        return report_data_entry_error(parse, "empty entry; accepted: GLOB[:key=value...] entries separated by single ';'");
    if (glob_length == 0)
        return report_data_entry_error(parse, "empty glob; accepted: GLOB[:key=value...] with a non-empty GLOB");

    entry->glob = unescape_glob(text, glob_length);
    if (entry->glob == NULL)
        return report_error(parse->error, parse->error_size, "ADAPTDL_DATA: out of memory");
    entry->shard = true;
    entry->tail = TAIL_ERROR;

    if (glob_length == length)
        return finish_data_entry(parse, &draft, is_first_entry);
    /* text[glob_length] is the ':' that starts the keys; "GLOB:" alone
     * yields one empty key, which is reported as such. */
    return parse_data_key_items(parse, &draft, text + glob_length + 1, length - glob_length - 1,
                                is_first_entry);
}

/* Number of entries: one more than the unescaped `;`.  A trailing `;` thus
 * counts an empty last entry, reported like any other empty entry. */
static size_t count_data_entries(const char *value, size_t length)
{
    size_t count = 1;
    size_t offset = find_unescaped(value, length, ';');

    while (offset < length) {
        count++;
        offset += 1 + find_unescaped(value + offset + 1, length - offset - 1, ';');
    }
    return count;
}

static void free_data_entries(struct data_entry *entries, size_t count)
{
    if (entries == NULL)
        return;
    for (size_t i = 0; i < count; i++)
        free(entries[i].glob);
    free(entries);
}

int config_parse_data(const char *value, struct data_entry **entries, size_t *entry_count,
                      char *error, size_t error_size)
{
    struct data_parse parse = {.error = error, .error_size = error_size};
    struct data_entry *parsed;
    size_t length, count, offset = 0;

    *entries = NULL;
    *entry_count = 0;
    if (value == NULL || value[0] == '\0')
        return report_error(error, error_size, "ADAPTDL_DATA: empty value \"\"; accepted: GLOB[:key=value...] entries separated by ';'");

    length = strlen(value);
    count = count_data_entries(value, length);
    parsed = calloc(count, sizeof *parsed);
    if (parsed == NULL)
        return report_error(error, error_size, "ADAPTDL_DATA: out of memory");

    for (size_t i = 0; i < count; i++) {
        parse.entry_number = i + 1;
        parse.entry_text = value + offset;
        parse.entry_length = find_unescaped(value + offset, length - offset, ';');
        if (parse_data_entry(&parse, &parsed[i], i == 0) < 0) {
            free_data_entries(parsed, count);
            return -1;
        }
        offset += parse.entry_length + 1;
    }
    *entries = parsed;
    *entry_count = count;
    return 0;
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

struct config_parse_state {
    struct adaptdl_config *config;
    char *const *envp;
    char *error;
    size_t error_size;
};

static int parse_word_variable(struct config_parse_state *state, const char *name,
                               const char *noun, const struct word_choice *choices, size_t count,
                               const char *value, int *out)
{
    char quoted[QUOTED_SIZE];
    char accepted[LIST_SIZE];

    if (find_word_choice(choices, count, value, out))
        return 0;
    return report_error(state->error, state->error_size, "%s: unknown %s \"%s\"; accepted: %s",
                        name, noun, config_quote_for_message(quoted, sizeof quoted, value, strlen(value)),
                        join_word_choices(accepted, sizeof accepted, choices, count));
}

static int parse_integer_variable(struct config_parse_state *state, const char *name,
                                  const char *value, uint64_t minimum, uint64_t maximum,
                                  uint64_t *out)
{
    char quoted[QUOTED_SIZE];
    enum number_status status = parse_decimal(value, minimum, maximum, out);

    if (status == NUMBER_OK)
        return 0;
    return report_error(state->error, state->error_size,
                        "%s: \"%s\" %s; accepted: an integer from %" PRIu64 " to %" PRIu64, name,
                        config_quote_for_message(quoted, sizeof quoted, value, strlen(value)),
                        status == NUMBER_MALFORMED ? "is not an unsigned decimal integer"
                                                   : "is out of range",
                        minimum, maximum);
}

/* The same for 32-bit fields; maximum must fit in uint32_t. */
static int parse_u32_variable(struct config_parse_state *state, const char *name,
                              const char *value, uint64_t minimum, uint64_t maximum,
                              uint32_t *out)
{
    uint64_t wide;
    if (parse_integer_variable(state, name, value, minimum, maximum, &wide) < 0)
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

    if (!parse_finite_number(value, &number))
        return report_error(state->error, state->error_size,
                            "%s: \"%s\" is not a finite number; accepted: a finite number %s %g",
                            name, config_quote_for_message(quoted, sizeof quoted, value, strlen(value)),
                            bound, minimum);
    if (number < minimum || (!minimum_included && number == minimum))
        return report_error(state->error, state->error_size,
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
        return report_error(state->error, state->error_size,
                            "%s: empty value \"\"; accepted: %s", name, accepted);
    *out = strdup(value);
    if (*out == NULL)
        return report_error(state->error, state->error_size, "%s: out of memory", name);
    return 0;
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
        return report_error(state->error, state->error_size,
                            "%s: \"%s\" has neither an argv: nor an env: prefix; accepted: %s",
                            name, quoted, accepted);
    }
    if (problem != NULL)
        return report_error(state->error, state->error_size, "%s: \"%s\" %s; accepted: %s", name,
                            quoted, problem, accepted);
    target->name = strdup(rest);
    if (target->name == NULL)
        return report_error(state->error, state->error_size, "%s: out of memory", name);
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

static int parse_checkpoint_path_variable(struct config_parse_state *state, const char *name,
                                          const char *value)
{
    return copy_nonempty_variable(state, name, value, "a directory path",
                                  &state->config->checkpoint_path);
}

static int parse_save_variable(struct config_parse_state *state, const char *name,
                               const char *value)
{
    return copy_nonempty_variable(state, name, value,
                                  "a non-empty fnmatch(3) glob of the trainer's checkpoint files",
                                  &state->config->save_glob);
}

static int parse_resume_variable(struct config_parse_state *state, const char *name,
                                 const char *value)
{
    int resume = 0;
    if (parse_word_variable(state, name, "mode", resume_choices, COUNT_OF(resume_choices), value,
                            &resume) < 0)
        return -1;
    state->config->resume = (enum resume_mode)resume;
    return 0;
}

static int parse_seed_variable(struct config_parse_state *state, const char *name,
                               const char *value)
{
    return parse_integer_variable(state, name, value, 0, UINT64_MAX, &state->config->seed);
}

static int parse_num_nodes_variable(struct config_parse_state *state, const char *name,
                                    const char *value)
{
    return parse_u32_variable(state, name, value, 1, REPLICA_LIMIT, &state->config->num_nodes);
}

static int parse_num_restarts_variable(struct config_parse_state *state, const char *name,
                                       const char *value)
{
    return parse_u32_variable(state, name, value, 0, UINT32_MAX, &state->config->num_restarts);
}

static int parse_log_variable(struct config_parse_state *state, const char *name,
                              const char *value)
{
    int level = 0;
    if (parse_word_variable(state, name, "level", log_level_choices,
                            COUNT_OF(log_level_choices), value, &level) < 0)
        return -1;
    state->config->log_level = (enum log_level)level;
    return 0;
}

static int parse_log_file_variable(struct config_parse_state *state, const char *name,
                                   const char *value)
{
    return copy_nonempty_variable(state, name, value,
                                  "a file path, where %r stands for the rank and %p for the pid",
                                  &state->config->log_file);
}

static int parse_target_variable(struct config_parse_state *state, const char *name,
                                 const char *value)
{
    return copy_nonempty_variable(state, name, value,
                                  "a non-empty fnmatch(3) glob of program basenames",
                                  &state->config->target);
}

static int parse_grad_min_variable(struct config_parse_state *state, const char *name,
                                   const char *value)
{
    return parse_integer_variable(state, name, value, 0, UINT64_MAX, &state->config->grad_min);
}

static int parse_drain_variable(struct config_parse_state *state, const char *name,
                                const char *value)
{
    return parse_real_variable(state, name, value, 0, true, &state->config->drain_seconds);
}

static int parse_stop_seconds_variable(struct config_parse_state *state, const char *name,
                                       const char *value)
{
    return parse_real_variable(state, name, value, 0, true, &state->config->stop_seconds);
}

static int parse_metrics_file_variable(struct config_parse_state *state, const char *name,
                                       const char *value)
{
    return copy_nonempty_variable(state, name, value,
                                  "a file path, where %r stands for the rank and %p for the pid",
                                  &state->config->metrics_file);
}

static int parse_hints_file_variable(struct config_parse_state *state, const char *name,
                                     const char *value)
{
    return copy_nonempty_variable(state, name, value, "a file path",
                                  &state->config->hints_file);
}

static int parse_batch_size_variable(struct config_parse_state *state, const char *name,
                                     const char *value)
{
    return parse_integer_variable(state, name, value, 1, BATCH_SIZE_LIMIT,
                                  &state->config->batch_size);
}

static int parse_max_batch_size_variable(struct config_parse_state *state, const char *name,
                                         const char *value)
{
    return parse_integer_variable(state, name, value, 1, BATCH_SIZE_LIMIT,
                                  &state->config->max_batch_size);
}

static int parse_local_bsz_bounds_variable(struct config_parse_state *state, const char *name,
                                           const char *value)
{
    static const char accepted[] = "MIN:MAX with 1 <= MIN <= MAX <= 2^40";
    char quoted[QUOTED_SIZE];
    const char *colon = strchr(value, ':');
    uint64_t minimum, maximum;

    config_quote_for_message(quoted, sizeof quoted, value, strlen(value));
    if (colon == NULL ||
        parse_decimal_span(value, (size_t)(colon - value), 1, BATCH_SIZE_LIMIT, &minimum) !=
            NUMBER_OK ||
        parse_decimal(colon + 1, 1, BATCH_SIZE_LIMIT, &maximum) != NUMBER_OK)
        return report_error(state->error, state->error_size,
                            "%s: \"%s\" is not MIN:MAX of two positive integers; accepted: %s",
                            name, quoted, accepted);
    if (minimum > maximum)
        return report_error(state->error, state->error_size,
                            "%s: \"%s\" has MIN above MAX; accepted: %s", name, quoted, accepted);
    state->config->local_bsz_min = minimum;
    state->config->local_bsz_max = maximum;
    return 0;
}

static int parse_bsz_arg_variable(struct config_parse_state *state, const char *name,
                                  const char *value)
{
    return parse_injection_variable(state, name, value, &state->config->bsz_arg);
}

static int parse_lr_arg_variable(struct config_parse_state *state, const char *name,
                                 const char *value)
{
    return parse_injection_variable(state, name, value, &state->config->lr_arg);
}

static int parse_lr_rule_variable(struct config_parse_state *state, const char *name,
                                  const char *value)
{
    int rule = 0;
    if (parse_word_variable(state, name, "rule", lr_rule_choices, COUNT_OF(lr_rule_choices),
                            value, &rule) < 0)
        return -1;
    state->config->lr_rule = (enum lr_rule)rule;
    return 0;
}

static int parse_speedup_variable(struct config_parse_state *state, const char *name,
                                  const char *value)
{
    return parse_real_variable(state, name, value, 1, true, &state->config->speedup_threshold);
}

static int parse_decide_seconds_variable(struct config_parse_state *state, const char *name,
                                         const char *value)
{
    return parse_real_variable(state, name, value, 0, false, &state->config->decide_seconds);
}

static int parse_payback_seconds_variable(struct config_parse_state *state, const char *name,
                                          const char *value)
{
    return parse_real_variable(state, name, value, 0, false, &state->config->payback_seconds);
}

static int parse_replicas_range_variable(struct config_parse_state *state, const char *name,
                                         const char *value)
{
    char quoted[QUOTED_SIZE];
    char accepted[96];
    const char *colon = strchr(value, ':');
    uint64_t minimum, maximum;

    snprintf(accepted, sizeof accepted, "MIN:MAX with 1 <= MIN <= MAX <= %" PRIu64,
             (uint64_t)REPLICA_LIMIT);
    config_quote_for_message(quoted, sizeof quoted, value, strlen(value));
    if (colon == NULL ||
        parse_decimal_span(value, (size_t)(colon - value), 1, REPLICA_LIMIT, &minimum) !=
            NUMBER_OK ||
        parse_decimal(colon + 1, 1, REPLICA_LIMIT, &maximum) != NUMBER_OK)
        return report_error(state->error, state->error_size,
                            "%s: \"%s\" is not MIN:MAX of two replica counts; accepted: %s",
                            name, quoted, accepted);
    if (minimum > maximum)
        return report_error(state->error, state->error_size,
                            "%s: \"%s\" has MIN above MAX; accepted: %s", name, quoted, accepted);
    state->config->replicas_min = (uint32_t)minimum;
    state->config->replicas_max = (uint32_t)maximum;
    return 0;
}

/* Variables read one by one, in this order (the first error is reported).
 * ADAPTDL_DISABLE is read before all of them, and the replica layout
 * (ADAPTDL_NUM_REPLICAS, ADAPTDL_REPLICA_RANK and their MPI and torchrun
 * fallbacks, and the node count torchrun implies when ADAPTDL_NUM_NODES is
 * not set) after them, by parse_replica_layout() and
 * parse_torchrun_node_count(). */
static const struct config_variable {
    const char *name;
    int (*parse)(struct config_parse_state *state, const char *name, const char *value);
} config_variables[] = {
    {"ADAPTDL_LOG", parse_log_variable},
    {"ADAPTDL_LOG_FILE", parse_log_file_variable},
    {"ADAPTDL_TARGET", parse_target_variable},
    {"ADAPTDL_DATA", parse_data_variable},
    {"ADAPTDL_CHECKPOINT_PATH", parse_checkpoint_path_variable},
    {"ADAPTDL_SAVE", parse_save_variable},
    {"ADAPTDL_RESUME", parse_resume_variable},
    {"ADAPTDL_SEED", parse_seed_variable},
    {"ADAPTDL_NUM_NODES", parse_num_nodes_variable},
    {"ADAPTDL_NUM_RESTARTS", parse_num_restarts_variable},
    {"ADAPTDL_GRAD_MIN", parse_grad_min_variable},
    {"ADAPTDL_DRAIN", parse_drain_variable},
    {"ADAPTDL_STOP_SECONDS", parse_stop_seconds_variable},
    {"ADAPTDL_METRICS_FILE", parse_metrics_file_variable},
    {"ADAPTDL_HINTS_FILE", parse_hints_file_variable},
    {"ADAPTDL_BATCH_SIZE", parse_batch_size_variable},
    {"ADAPTDL_MAX_BATCH_SIZE", parse_max_batch_size_variable},
    {"ADAPTDL_LOCAL_BSZ_BOUNDS", parse_local_bsz_bounds_variable},
    {"ADAPTDL_BSZ_ARG", parse_bsz_arg_variable},
    {"ADAPTDL_LR_ARG", parse_lr_arg_variable},
    {"ADAPTDL_LR_RULE", parse_lr_rule_variable},
    {"ADAPTDL_SPEEDUP", parse_speedup_variable},
    {"ADAPTDL_DECIDE_SECONDS", parse_decide_seconds_variable},
    {"ADAPTDL_PAYBACK_SECONDS", parse_payback_seconds_variable},
    {"ADAPTDL_REPLICAS_RANGE", parse_replicas_range_variable},
};

/* ------------------------------------------------------------------------
 * Rules across variables
 * ---------------------------------------------------------------------- */

/* Where one number of the replica layout comes from, best source first:
 * our own variables, then the MPI launchers', then torchrun's.  Each number
 * is resolved on its own: the wrapper may export ADAPTDL_NUM_REPLICAS for
 * all ranks while mpirun gives each its rank.  Only Open MPI's and PMI's
 * variables say that MPI started the process: torchrun starts plain
 * processes, and a torchrun job must not be taken for an MPI one. */
struct layout_source {
    const char *name;
    bool set_by_mpi_launcher;
};
static const struct layout_source replica_count_sources[] = {
    {"ADAPTDL_NUM_REPLICAS", false},
    {"OMPI_COMM_WORLD_SIZE", true},
    {"PMI_SIZE", true},
    {"WORLD_SIZE", false},
};
static const struct layout_source replica_rank_sources[] = {
    {"ADAPTDL_REPLICA_RANK", false},
    {"OMPI_COMM_WORLD_RANK", true},
    {"PMI_RANK", true},
    {"RANK", false},
};

/* Reads the first variable of sources that is set; *source stays NULL (and
 * *out untouched) when none is. */
static int resolve_layout_number(struct config_parse_state *state,
                                 const struct layout_source sources[], size_t source_count,
                                 uint64_t minimum, uint64_t maximum, uint32_t *out,
                                 const struct layout_source **source)
{
    *source = NULL;
    for (size_t i = 0; i < source_count; i++) {
        const char *value = config_lookup(state->envp, sources[i].name);
        if (value == NULL)
            continue;
        *source = &sources[i];
        return parse_u32_variable(state, sources[i].name, value, minimum, maximum, out);
    }
    return 0;
}

static bool layout_source_is_mpi(const struct layout_source *source)
{
    return source != NULL && source->set_by_mpi_launcher;
}

static int check_rank_below_count(struct config_parse_state *state,
                                  const struct layout_source *count_source,
                                  const struct layout_source *rank_source)
{
    const struct adaptdl_config *config = state->config;
    char count_text[64];

    if (config->replica_rank < config->num_replicas)
        return 0;
    /* The default rank 0 is below any count, so a rank variable is set. */
    if (count_source != NULL)
        snprintf(count_text, sizeof count_text, "%s \"%" PRIu32 "\"", count_source->name,
                 config->num_replicas);
    else
        snprintf(count_text, sizeof count_text,
                 "the default replica count 1 (ADAPTDL_NUM_REPLICAS unset)");
    return report_error(state->error, state->error_size,
                        "%s: \"%" PRIu32 "\" is not below %s; accepted: a rank from 0 to %" PRIu32,
                        rank_source->name, config->replica_rank, count_text,
                        config->num_replicas - 1);
}

static int parse_replica_layout(struct config_parse_state *state)
{
    struct adaptdl_config *config = state->config;
    const struct layout_source *count_source, *rank_source;

    if (resolve_layout_number(state, replica_count_sources, COUNT_OF(replica_count_sources), 1,
                              REPLICA_LIMIT, &config->num_replicas, &count_source) < 0 ||
        resolve_layout_number(state, replica_rank_sources, COUNT_OF(replica_rank_sources), 0,
                              REPLICA_LIMIT - 1, &config->replica_rank, &rank_source) < 0)
        return -1;
    config->layout_from_mpi =
        layout_source_is_mpi(count_source) || layout_source_is_mpi(rank_source);
    return check_rank_below_count(state, count_source, rank_source);
}

/* torchrun exports WORLD_SIZE (processes in the job) and LOCAL_WORLD_SIZE
 * (processes on this node, the same on every node): their ratio is the node
 * count, used when ADAPTDL_NUM_NODES is not set.  Both must be set; a
 * LOCAL_WORLD_SIZE that does not divide WORLD_SIZE is refused rather than
 * rounded, since the node count feeds the throughput model (§7). */
static int parse_torchrun_node_count(struct config_parse_state *state)
{
    const char *world_text = config_lookup(state->envp, "WORLD_SIZE");
    const char *local_text = config_lookup(state->envp, "LOCAL_WORLD_SIZE");
    char world_quoted[QUOTED_SIZE], local_quoted[QUOTED_SIZE];
    uint64_t world, local;

    if (config_lookup(state->envp, "ADAPTDL_NUM_NODES") != NULL || world_text == NULL ||
        local_text == NULL)
        return 0;
    if (parse_integer_variable(state, "WORLD_SIZE", world_text, 1, REPLICA_LIMIT, &world) < 0)
        return -1;
    config_quote_for_message(world_quoted, sizeof world_quoted, world_text, strlen(world_text));
    config_quote_for_message(local_quoted, sizeof local_quoted, local_text, strlen(local_text));
    const char *problem =
        describe_number_problem(parse_decimal(local_text, 1, REPLICA_LIMIT, &local), 1);
    if (problem != NULL)
        return report_error(state->error, state->error_size,
                            "LOCAL_WORLD_SIZE: \"%s\" %s; accepted: the processes per node, a "
                            "divisor of WORLD_SIZE \"%s\" (or set ADAPTDL_NUM_NODES)",
                            local_quoted, problem, world_quoted);
    if (world % local != 0)
        return report_error(state->error, state->error_size,
                            "LOCAL_WORLD_SIZE: \"%s\" does not divide WORLD_SIZE \"%s\"; "
                            "accepted: the processes per node, a divisor of WORLD_SIZE (or set "
                            "ADAPTDL_NUM_NODES)",
                            local_quoted, world_quoted);
    state->config->num_nodes = (uint32_t)(world / local);
    return 0;
}

static int check_batch_size_limits(struct config_parse_state *state)
{
    const struct adaptdl_config *config = state->config;

    if (config->batch_size == 0 || config->max_batch_size == 0 ||
        config->max_batch_size >= config->batch_size)
        return 0;
    return report_error(state->error, state->error_size,
                        "ADAPTDL_MAX_BATCH_SIZE: \"%" PRIu64 "\" is below ADAPTDL_BATCH_SIZE \"%" PRIu64
                        "\"; accepted: a maximum global batch size >= ADAPTDL_BATCH_SIZE",
                        config->max_batch_size, config->batch_size);
}

/* ------------------------------------------------------------------------
 * Public entry points
 * ---------------------------------------------------------------------- */

static void set_config_defaults(struct adaptdl_config *config)
{
    memset(config, 0, sizeof *config);
    config->resume = RESUME_REPLAY;
    config->seed = 0;
    config->num_replicas = 1;
    config->replica_rank = 0;
    config->num_nodes = 1;
    config->log_level = LOG_LEVEL_WARN;
    config->grad_min = 1024;
    config->drain_seconds = 0;
    config->stop_seconds = 10;
    config->lr_rule = LR_RULE_NONE;
    config->speedup_threshold = 1.05;
    config->decide_seconds = 30;
    config->payback_seconds = 600;
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
        if (value != NULL && config_variables[i].parse(state, config_variables[i].name, value) < 0)
            return -1;
    }
    if (parse_replica_layout(state) < 0 || parse_torchrun_node_count(state) < 0)
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

void config_free(struct adaptdl_config *config)
{
    if (config == NULL)
        return;
    free_data_entries(config->data, config->data_count);
    free(config->checkpoint_path);
    free(config->save_glob);
    free(config->log_file);
    free(config->target);
    free(config->metrics_file);
    free(config->hints_file);
    free(config->bsz_arg.name);
    free(config->lr_arg.name);
    memset(config, 0, sizeof *config);
}
