/* glob_pattern.c - reads an fnmatch(3) pattern the way glibc does with
 * flags 0, to tell a pattern that cannot match as written from one that
 * can, and to find the directory it is fixed to (see glob_pattern.h). */
#include "glob_pattern.h"
#include "config_text.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define COUNT_OF(array) (sizeof(array) / sizeof((array)[0]))

/* The classes every locale has (POSIX); glibc matches nothing for the
 * bracket expression of any other name, so one is almost surely a typo. */
static const char *const character_classes[] = {
    "alnum", "alpha", "blank", "cntrl", "digit", "graph",
    "lower", "print", "punct", "space", "upper", "xdigit",
};

static const char unclosed_bracket_remedy[] =
    "close it with ']', or write \\[ for a literal '['";
static const char lone_backslash_remedy[] = "write \\\\ for a literal backslash";
static const char character_class_remedy[] =
    "a class among alnum, alpha, blank, cntrl, digit, graph, lower, print, punct, space, "
    "upper, xdigit, as in [[:digit:]]";
static const char unclosed_element_remedy[] =
    "end \"[.\" with \".]\" and \"[=\" with \"=]\", or write \\[ for a literal '['";
static const char reversed_range_remedy[] =
    "a range from a lower to a higher character, such as 0-9 or a-z";

/* Fills *problem (when there is one to fill); returns false, so that a
 * failing reader can `return report_problem(...)`. */
static bool __attribute__((format(printf, 3, 4)))
report_problem(struct glob_pattern_problem *problem, const char *remedy, const char *format, ...)
{
    va_list args;

    if (problem == NULL)
        return false;
    va_start(args, format);
    vsnprintf(problem->problem, sizeof problem->problem, format, args);
    va_end(args);
    problem->remedy = remedy;
    return false;
}

/* The part of the pattern a problem starts at, quoted and cut short. */
static const char *quote_from(char *out, size_t out_size, const char *text)
{
    return config_quote_for_message(out, out_size, text, strlen(text));
}

static bool report_unclosed_bracket(const char *pattern, size_t start,
                                    struct glob_pattern_problem *problem)
{
    char quoted[48];
    return report_problem(problem, unclosed_bracket_remedy,
                          "has a '[' that no ']' closes (\"%s\")",
                          quote_from(quoted, sizeof quoted, pattern + start));
}

static bool is_known_character_class(const char *name, size_t length)
{
    for (size_t i = 0; i < COUNT_OF(character_classes); i++)
        if (strlen(character_classes[i]) == length &&
            memcmp(character_classes[i], name, length) == 0)
            return true;
    return false;
}

static bool is_ascii_letter(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* "[:name:]" at pattern[*cursor]: true with *cursor past it when it is a
 * known class; false with the problem when it names an unknown one.  When
 * no ":]" follows the letters it is no class at all (glibc then takes the
 * '[' as a member): true with *cursor unchanged and *is_class false. */
static bool scan_character_class(const char *pattern, size_t *cursor, bool *is_class,
                                 struct glob_pattern_problem *problem)
{
    size_t name = *cursor + 2;
    size_t name_end = name;
    char quoted[48];

    *is_class = false;
    while (is_ascii_letter(pattern[name_end]))
        name_end++;
    if (pattern[name_end] != ':' || pattern[name_end + 1] != ']')
        return true;
    if (!is_known_character_class(pattern + name, name_end - name))
        return report_problem(problem, character_class_remedy,
                              "names an unknown character class \"%s\" (it matches nothing)",
                              config_quote_for_message(quoted, sizeof quoted, pattern + *cursor,
                                                       name_end + 2 - *cursor));
    *is_class = true;
    *cursor = name_end + 2;
    return true;
}

/* One member of a bracket expression at pattern[*cursor]: a character
 * (escaped or not), a character class, or a "[.x.]" / "[=x=]" element.
 * True with *cursor past it and *character its byte (-1 for a class or an
 * element, which cannot end a range we could check); false with the
 * problem.  `start` is where the bracket expression opened. */
static bool scan_bracket_member(const char *pattern, size_t start, size_t *cursor,
                                int *character, struct glob_pattern_problem *problem)
{
    size_t i = *cursor;

    if (pattern[i] == '[' && pattern[i + 1] == ':') {
        bool is_class;
        if (!scan_character_class(pattern, cursor, &is_class, problem))
            return false;
        if (is_class) {
            *character = -1;
            return true;
        }
    } else if (pattern[i] == '[' && (pattern[i + 1] == '.' || pattern[i + 1] == '=')) {
        const char closer[3] = {pattern[i + 1], ']', '\0'};
        const char *end = strstr(pattern + i + 2, closer);
        char quoted[48];
        if (end == NULL)
            return report_problem(problem, unclosed_element_remedy,
                                  "has a \"[%c\" that no \"%s\" ends (\"%s\")", pattern[i + 1],
                                  closer, quote_from(quoted, sizeof quoted, pattern + i));
        *cursor = (size_t)(end - pattern) + 2;
        *character = -1;
        return true;
    }
    if (pattern[i] == '\\') {
        /* an escape that the end of the pattern cuts off also leaves the
         * bracket expression open */
        if (pattern[i + 1] == '\0')
            return report_unclosed_bracket(pattern, start, problem);
        i++;
    }
    *character = (unsigned char)pattern[i];
    *cursor = i + 1;
    return true;
}

/* The bracket expression that opens at pattern[start]: true with *cursor
 * just past its ']', false with the problem. */
static bool scan_bracket_expression(const char *pattern, size_t start, size_t *cursor,
                                    struct glob_pattern_problem *problem)
{
    size_t i = start + 1;
    char quoted[48];

    if (pattern[i] == '!' || pattern[i] == '^')
        i++;
    if (pattern[i] == ']') /* first: a member, not the end */
        i++;
    while (pattern[i] != ']') {
        size_t member = i;
        int first, last;
        if (pattern[i] == '\0')
            return report_unclosed_bracket(pattern, start, problem);
        if (!scan_bracket_member(pattern, start, &i, &first, problem))
            return false;
        /* a '-' before the closing ']' is a member of its own */
        if (first < 0 || pattern[i] != '-' || pattern[i + 1] == ']' || pattern[i + 1] == '\0')
            continue;
        i++;
        if (!scan_bracket_member(pattern, start, &i, &last, problem))
            return false;
        /* Ranges of ASCII characters compare by code in every locale that
         * glibc supports; other bytes may be parts of multibyte characters. */
        if (last >= 0 && first < 0x80 && last < 0x80 && last < first)
            return report_problem(problem, reversed_range_remedy,
                                  "has a reversed range \"%s\" (it matches nothing)",
                                  config_quote_for_message(quoted, sizeof quoted,
                                                           pattern + member, i - member));
    }
    *cursor = i + 1;
    return true;
}

bool glob_pattern_check(const char *pattern, struct glob_pattern_problem *problem)
{
    size_t i = 0;

    while (pattern[i] != '\0') {
        if (pattern[i] == '\\') {
            if (pattern[i + 1] == '\0')
                return report_problem(problem, lone_backslash_remedy,
                                      "ends in a lone backslash (it escapes nothing, so the "
                                      "glob matches no path)");
            i += 2;
        } else if (pattern[i] == '[') {
            if (!scan_bracket_expression(pattern, i, &i, problem))
                return false;
        } else {
            i++;
        }
    }
    return true;
}

int glob_pattern_fixed_directory(const char *pattern, char *out, size_t out_size)
{
    size_t used = 0;          /* bytes of out: the literal prefix, unescaped */
    size_t directory_end = 0; /* bytes of out before its last '/' */
    bool has_separator = false;

    if (out_size == 0)
        return -1;
    for (size_t i = 0; pattern[i] != '\0'; i++) {
        char c = pattern[i];
        if (c == '*' || c == '?' || c == '[')
            break;
        if (c == '\\' && pattern[i + 1] != '\0')
            c = pattern[++i];
        if (c == '/') {
            directory_end = used;
            has_separator = true;
        }
        if (used + 1 >= out_size)
            return -1;
        out[used++] = c;
    }
    /* "/x*": the root; "x*": no directory of its own */
    if (has_separator && directory_end == 0)
        directory_end = 1;
    out[directory_end] = '\0';
    return 0;
}
