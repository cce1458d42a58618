/* Small string helpers. Functions returning char* hand ownership to the
 * caller (free with free()) and return NULL on allocation failure. */
#ifndef PRD_UTIL_STR_H
#define PRD_UTIL_STR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

char *str_dup(const char *s);              /* NULL in → NULL out */
char *str_ndup(const char *s, size_t n);
char *str_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
bool str_eq(const char *a, const char *b); /* NULL-safe */
bool str_starts_with(const char *s, const char *prefix);
bool str_ends_with(const char *s, const char *suffix);
/* Copy src into dst (size n), always terminating; returns false if cut. */
bool str_copy(char *dst, size_t n, const char *src);
/* Trim ASCII white space in place; returns s. */
char *str_trim(char *s);
/* Strict decimal integer parse of the whole string (optional sign, no
 * white space). 0, PRD_EINVAL or PRD_ERANGE. */
int str_to_int64(const char *s, int64_t *out);
/* Like str_to_int64 but for a byte range. */
int str_to_int64_n(const char *s, size_t n, int64_t *out);
/* Parse "true"/"false" (case-insensitive). */
int str_to_bool(const char *s, bool *out);
/* Is s a DNS-1123 subdomain (lowercase alnum, '-', '.', <=253)? */
bool str_is_dns_subdomain(const char *s);
/* Is s a DNS-1123 label (lowercase alnum and '-', <=63)? */
bool str_is_dns_label(const char *s);
/* Is s[0..n) a Kubernetes qualified name ([DNS-subdomain "/"] name, the
 * name 1..63 alphanumerics, '-', '_' and '.', alphanumeric at both ends)?
 * Label, annotation and taint keys are these. */
bool str_is_qualified_name(const char *s, size_t n);
/* Is v a label value: empty, or a qualified name without a prefix? */
bool str_is_label_value(const char *v);
/* Parse a Go-style duration ("90s", "1m30s", "10m", "2h", "500ms", "7d" is
 * accepted as days for convenience) into nanoseconds. */
int str_parse_duration(const char *s, int64_t *out_ns);
/* Levenshtein distance between a and b; (size_t)-1 when either is 128
 * characters or longer (it is meant for flag and class names). */
size_t str_edit_distance(const char *a, const char *b);
/* For "did you mean X?": the candidate nearest to `word`, if it is within
 * a third of the word's length (at least 2 edits); NULL otherwise. The
 * first of equally near candidates wins. Returns one of `cands`. */
const char *str_closest(const char *word, const char *const *cands, size_t n);
/* FNV-1a 64-bit hash. */
uint64_t str_hash(const char *s, size_t n);

#endif
