/* verify_plan.c - where adaptdl-verify kills a case, how it names a commit,
 * and the ADAPTDL_DATA of a fix trial (see verify_plan.h). */
#include "verify_plan.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "error_message.h"

/* Whether the positions to look at are the train files' (true when the
 * commit bound at least one). */
static bool commit_binds_train_file(const struct history_commit *commit)
{
    for (size_t i = 0; i < commit->binding_count; i++)
        if (commit->bindings[i].bound && commit->bindings[i].train)
            return true;
    return false;
}

/* Records of the bound pass the file had delivered (padding aside) when
 * the commit bound it: its list up to the binding, as far as the history
 * still holds it. */
static uint64_t commit_pass_deliveries(const struct resume_history *history,
                                       const struct history_binding *binding)
{
    if (binding->file >= history->file_count)
        return 0;
    const struct history_file *file = &history->files[binding->file];
    size_t end = binding->length < file->count ? binding->length : file->count;
    uint64_t delivered = 0;
    for (size_t i = 0; i < end; i++)
        delivered += file->deliveries[i].pass == binding->pass && !file->deliveries[i].padding;
    return delivered;
}

enum commit_place verify_commit_place(const struct resume_history *history,
                                      const struct history_commit *commit)
{
    bool train_only = commit_binds_train_file(commit);
    bool boundary = false;
    for (size_t i = 0; i < commit->binding_count; i++) {
        const struct history_binding *binding = &commit->bindings[i];
        if (!binding->bound || (train_only && !binding->train))
            continue;
        if (binding->index > 0 && binding->index < binding->pass_length)
            return COMMIT_MID_EPOCH;
        /* a reader in its own order binds its in-order prefix, which may
         * be 0 while it is well into the pass */
        uint64_t delivered = commit_pass_deliveries(history, binding);
        if (delivered > 0 && delivered < binding->pass_length)
            return COMMIT_MID_EPOCH;
        if ((binding->index == 0 && binding->pass > 0) ||
            (binding->pass_length > 0 && binding->index >= binding->pass_length))
            boundary = true;
    }
    return boundary ? COMMIT_EPOCH_END : COMMIT_BEFORE_TRAINING;
}

/* The highest pass a commit bound a (train) file at. */
static uint64_t commit_highest_pass(const struct history_commit *commit)
{
    bool train_only = commit_binds_train_file(commit);
    uint64_t highest = 0;
    for (size_t i = 0; i < commit->binding_count; i++) {
        const struct history_binding *binding = &commit->bindings[i];
        if (binding->bound && (!train_only || binding->train) && binding->pass > highest)
            highest = binding->pass;
    }
    return highest;
}

size_t verify_choose_commit(const struct resume_history *reference, enum commit_place place)
{
    size_t last = reference->commit_count;
    size_t first = 0, first_after_first_pass = 0;
    for (size_t i = 0; i + 1 < last; i++) {
        const struct history_commit *commit = &reference->commits[i];
        if (verify_commit_place(reference, commit) != place)
            continue;
        if (first == 0)
            first = i + 1;
        if (first_after_first_pass == 0 && commit_highest_pass(commit) >= 1)
            first_after_first_pass = i + 1;
    }
    if (first_after_first_pass != 0)
        return first_after_first_pass;
    if (first != 0)
        return first;
    if (last > 0 && verify_commit_place(reference, &reference->commits[last - 1]) == place)
        return last;
    return 0;
}

void verify_describe_commit(const struct resume_history *history,
                            const struct history_commit *commit, char *out, size_t out_size)
{
    bool train_only = commit_binds_train_file(commit);
    const struct history_binding *shown = NULL;
    size_t others = 0;
    for (size_t i = 0; i < commit->binding_count; i++) {
        const struct history_binding *binding = &commit->bindings[i];
        if (!binding->bound || (train_only && !binding->train))
            continue;
        if (shown == NULL)
            shown = binding;
        else
            others++;
    }
    if (shown == NULL) {
        snprintf(out, out_size, "commit %zu: no data file bound", commit->ordinal);
        return;
    }
    const char *name = shown->file < history->file_count ? history->files[shown->file].name : "?";
    char more[48] = "";
    if (others > 0)
        snprintf(more, sizeof more, " (+%zu file%s)", others, others == 1 ? "" : "s");
    /* what the trainer was handed, when its in-order prefix says less */
    char handed[48] = "";
    uint64_t delivered = commit_pass_deliveries(history, shown);
    if (delivered > shown->index)
        snprintf(handed, sizeof handed, " (%" PRIu64 " read)", delivered);
    snprintf(out, out_size, "commit %zu: %s pass %" PRIu64 " at %" PRIu64 "%s of %" PRIu64 "%s",
             commit->ordinal, name, shown->pass, shown->index, handed, shown->pass_length, more);
}

/* Length of the ADAPTDL_DATA entry at `text` (up to an unescaped ';'),
 * with the grammar's escapes (data_entry.c). */
static size_t data_entry_length(const char *text)
{
    size_t i = 0;
    while (text[i] != '\0' && text[i] != ';')
        i += (text[i] == '\\' && text[i + 1] != '\0') ? 2 : 1;
    return i;
}

/* Whether the entry already gives key `name` (name_length bytes, up to the
 * '='): then it is left as the user wrote it. */
static bool data_entry_has_key(const char *entry, size_t length, const char *name,
                               size_t name_length)
{
    for (size_t i = 0; i + name_length + 1 < length; i++)
        if (entry[i] == ':' && (i == 0 || entry[i - 1] != '\\') &&
            strncmp(entry + i + 1, name, name_length) == 0 &&
            (entry[i + 1 + name_length] == '=' || entry[i + 1 + name_length] == ':' ||
             i + 1 + name_length == length))
            return true;
    return false;
}

char *verify_data_with_key(const char *value, const char *key, char *error, size_t error_size)
{
    struct data_entry *entries;
    size_t entry_count;
    if (config_parse_data(value, &entries, &entry_count, error, error_size) != 0)
        return NULL;
    size_t key_length = strlen(key);
    const char *equals = strchr(key, '=');
    size_t name_length = equals != NULL ? (size_t)(equals - key) : key_length;
    size_t capacity = strlen(value) + entry_count * (key_length + 1) + 1;
    char *result = malloc(capacity);
    if (result == NULL) {
        config_free_data_entries(entries, entry_count);
        error_message(error, error_size, "ADAPTDL_DATA: out of memory");
        return NULL;
    }
    size_t used = 0;
    const char *cursor = value;
    for (size_t i = 0; i < entry_count; i++) {
        size_t length = data_entry_length(cursor);
        memcpy(result + used, cursor, length);
        used += length;
        if (entries[i].role == DATA_ROLE_TRAIN &&
            !data_entry_has_key(cursor, length, key, name_length)) {
            result[used++] = ':';
            memcpy(result + used, key, key_length);
            used += key_length;
        }
        cursor += length;
        if (*cursor == ';')
            result[used++] = *cursor++;
    }
    result[used] = '\0';
    config_free_data_entries(entries, entry_count);
    if (config_parse_data(result, &entries, &entry_count, error, error_size) != 0) {
        free(result);
        return NULL;
    }
    config_free_data_entries(entries, entry_count);
    return result;
}
