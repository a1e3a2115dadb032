/* glob_pattern.h - what an fnmatch(3) pattern (flags 0, as the library
 * matches ADAPTDL_DATA, ADAPTDL_SAVE and ADAPTDL_TARGET) says before any
 * path is matched: whether it is written as meant, and the directory it
 * is fixed to.
 *
 * fnmatch never reports a malformed pattern: glibc takes a '[' that no ']'
 * closes as a literal '[', and a pattern ending in a lone backslash or
 * naming an unknown character class matches nothing at all.  Either way
 * the setting quietly matches nothing, so the configuration refuses such
 * patterns at start-up (adaptshim(7) "ENVIRONMENT": never a silent default). */
#ifndef ADAPTSHIM_GLOB_PATTERN_H
#define ADAPTSHIM_GLOB_PATTERN_H

#include <stdbool.h>
#include <stddef.h>

/* Why a pattern is not accepted, phrased for "NAME: \"pattern\" <problem>;
 * accepted: ... (<remedy>)". */
struct glob_pattern_problem {
    char problem[160];   /* "has a '[' that no ']' closes (\"[0-9.bin\")" */
    const char *remedy;  /* "close it with ']', or write \\[ for a literal '['" */
};

/* True when fnmatch(3) with flags 0 reads pattern as written: every '['
 * opens a bracket expression that a ']' closes, every character class is
 * a known one, every "[." and "[=" element is ended, no range is reversed
 * (z-a matches nothing) and no backslash is left escaping nothing.  False
 * with *problem filled otherwise (problem may be NULL). */
bool glob_pattern_check(const char *pattern, struct glob_pattern_problem *problem);

/* The directory a path must lie in for pattern to match it: the
 * components before the first one holding a wildcard ('*', '?', '['), or
 * before the last '/' when there is none, with fnmatch's backslash escapes
 * removed ("/data/run\*1/x*.bin" -> "/data/run*1").  "/" for a pattern
 * such as "/x*"; an empty string when the pattern has no '/' before its
 * first wildcard (the working directory, for a relative path).  Every
 * path the pattern matches starts with this directory: nothing before the
 * first wildcard can vary.  0, or -1 when it does not fit in out. */
int glob_pattern_fixed_directory(const char *pattern, char *out, size_t out_size);

#endif
