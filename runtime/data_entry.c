/* data_entry.c - the ADAPTDL_DATA grammar (adaptshim(7) "ADAPTDL_DATA"): `;`-separated
 * GLOB[:key=value...] entries, each key with its own small parser in
 * data_keys[], every malformed entry one line naming the entry, the key and
 * what is accepted (config.h, config_parse_data).  A glob must be one that
 * fnmatch reads as written (glob_pattern.h), and no two entries may have
 * the same one. */
#include "config.h"
#include "config_text.h"
#include "error_message.h"
#include "glob_pattern.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COUNT_OF CONFIG_COUNT_OF

/* Record, header, lookahead and count-field numbers: 2^40 bytes (1 TiB) is
 * far beyond any record or header, yet small enough that sums of two such
 * numbers can never overflow. */
#define DATA_NUMBER_LIMIT ((uint64_t)1 << 40)

static const struct word_choice boolean_choices[] = {{"0", 0}, {"1", 1}};

static const struct word_choice role_choices[] = {
    {"train", DATA_ROLE_TRAIN},
    {"eval", DATA_ROLE_EVAL},
};

static const struct word_choice tail_choices[] = {{"error", TAIL_ERROR}, {"drop", TAIL_DROP}};
static const struct word_choice resume_choices[] = {{"exact", 0}, {"whole-pass", 1}};

/* ------------------------------------------------------------------------
 * ADAPTDL_DATA (adaptshim(7) "ADAPTDL_DATA")
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
static const char *parse_data_number(const char *value, uint64_t minimum, uint64_t *out)
{
    return config_describe_number_problem(config_parse_decimal(value, minimum, DATA_NUMBER_LIMIT, out), minimum);
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
    if (!config_find_word_choice(role_choices, COUNT_OF(role_choices), value, &role))
        return "is not a known role";
    draft->entry->role = (enum data_role)role;
    draft->role_given = true;
    return NULL;
}

/* A 0 or 1 into *out (untouched otherwise). */
static const char *parse_boolean_value(const char *value, bool *out)
{
    int flag = 0;
    if (!config_find_word_choice(boolean_choices, COUNT_OF(boolean_choices), value, &flag))
        return "is not 0 or 1";
    *out = flag;
    return NULL;
}

static const char *parse_shuffle_key(struct data_entry_draft *draft, const char *value)
{
    const char *problem = parse_boolean_value(value, &draft->entry->shuffle);
    draft->shuffle_given = problem == NULL;
    return problem;
}

static const char *parse_shard_key(struct data_entry_draft *draft, const char *value)
{
    return parse_boolean_value(value, &draft->entry->shard);
}

static const char *parse_tail_key(struct data_entry_draft *draft, const char *value)
{
    int tail = 0;
    if (!config_find_word_choice(tail_choices, COUNT_OF(tail_choices), value, &tail))
        return "is not a known tail policy";
    draft->entry->tail = (enum tail_policy)tail;
    return NULL;
}

static const char *parse_resume_key(struct data_entry_draft *draft, const char *value)
{
    int whole_pass = 0;
    if (!config_find_word_choice(resume_choices, COUNT_OF(resume_choices), value, &whole_pass))
        return "is not a known resume policy";
    draft->entry->resume_whole_pass = whole_pass != 0;
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
    if (config_parse_decimal_span(value, (size_t)(first_comma - value), 0, DATA_NUMBER_LIMIT, &offset) !=
        NUMBER_OK)
        return "has an OFFSET that is not an integer from 0 to 2^40";
    kind = find_count_field_kind(type_text, (size_t)(second_comma - type_text));
    if (kind == NULL)
        return "has an unknown TYPE";
    if (config_parse_decimal(unit_text, 1, DATA_NUMBER_LIMIT, &unit) != NUMBER_OK)
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

/* Several entries may say role=train: adaptshim(7) "ADAPTDL_DATA" lets a dataset be split into
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
    {"resume", false, parse_resume_key, "resume=exact or resume=whole-pass"},
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
        config_append_to_list(out, out_size, data_keys[i].name);
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
    return error_message(parse->error, parse->error_size, "ADAPTDL_DATA entry %zu (\"%s\"): %s",
                        parse->entry_number,
                        config_quote_for_message(quoted_entry, sizeof quoted_entry, parse->entry_text,
                                          parse->entry_length),
                        detail);
}

/* Length of the prefix of text[0..length) before the first `stop` that is
 * not escaped.  A backslash always pairs with the byte after it: `\:` and
 * `\;` are the escapes of adaptshim(7) "ADAPTDL_DATA", and any other pair (`\*`, `\\`) is an
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
        return error_message(parse->error, parse->error_size, "ADAPTDL_DATA: out of memory");
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
    struct glob_pattern_problem glob_problem;
    char quoted[QUOTED_SIZE];

    if (length == 0)
        return report_data_entry_error(parse, "empty entry; accepted: GLOB[:key=value...] entries separated by single ';'");
    if (glob_length == 0)
        return report_data_entry_error(parse, "empty glob; accepted: GLOB[:key=value...] with a non-empty GLOB");

    entry->glob = unescape_glob(text, glob_length);
    if (entry->glob == NULL)
        return error_message(parse->error, parse->error_size, "ADAPTDL_DATA: out of memory");
    if (!glob_pattern_check(entry->glob, &glob_problem))
        return report_data_entry_error(parse, "glob \"%s\" %s; accepted: a well-formed fnmatch(3) glob (%s)",
                                       config_quote_for_message(quoted, sizeof quoted, entry->glob,
                                                                strlen(entry->glob)),
                                       glob_problem.problem, glob_problem.remedy);
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

void config_free_data_entries(struct data_entry *entries, size_t count)
{
    if (entries == NULL)
        return;
    for (size_t i = 0; i < count; i++)
        free(entries[i].glob);
    free(entries);
}

/* Two entries with the same glob describe the same files twice, and only
 * the first would ever apply (session_match_data takes the first match):
 * which keys were meant? */
static int check_distinct_data_globs(const struct data_entry *entries, size_t count,
                                     char *error, size_t error_size)
{
    char quoted[QUOTED_SIZE];

    for (size_t later = 1; later < count; later++)
        for (size_t earlier = 0; earlier < later; earlier++)
            if (strcmp(entries[earlier].glob, entries[later].glob) == 0)
                return error_message(
                    error, error_size,
                    "ADAPTDL_DATA entries %zu and %zu both have the glob \"%s\"; accepted: each "
                    "glob in one entry only, with all the keys its files need",
                    earlier + 1, later + 1,
                    config_quote_for_message(quoted, sizeof quoted, entries[later].glob,
                                             strlen(entries[later].glob)));
    return 0;
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
        return error_message(error, error_size, "ADAPTDL_DATA: empty value \"\"; accepted: GLOB[:key=value...] entries separated by ';'");

    length = strlen(value);
    count = count_data_entries(value, length);
    parsed = calloc(count, sizeof *parsed);
    if (parsed == NULL)
        return error_message(error, error_size, "ADAPTDL_DATA: out of memory");

    for (size_t i = 0; i < count; i++) {
        parse.entry_number = i + 1;
        parse.entry_text = value + offset;
        parse.entry_length = find_unescaped(value + offset, length - offset, ';');
        if (parse_data_entry(&parse, &parsed[i], i == 0) < 0) {
            config_free_data_entries(parsed, count);
            return -1;
        }
        offset += parse.entry_length + 1;
    }
    if (check_distinct_data_globs(parsed, count, error, error_size) < 0) {
        config_free_data_entries(parsed, count);
        return -1;
    }
    *entries = parsed;
    *entry_count = count;
    return 0;
}
