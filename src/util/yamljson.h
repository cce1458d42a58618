/* YAML → JSON: every object, config file and fixture is read through here
 * and handled as a json-c tree.
 *
 * Scalars follow YAML 1.2's core schema for plain (unquoted) scalars: null,
 * booleans, integers (decimal, 0x, 0o) and floats become JSON types; quoted
 * and block scalars stay strings. Anchors and aliases are expanded (with a
 * limit against alias bombs). Mapping keys are always strings. */
#ifndef PRD_UTIL_YAMLJSON_H
#define PRD_UTIL_YAMLJSON_H

#include <json-c/json.h>
#include <stddef.h>

#include "util/err.h"

/* Parse every document in `data` into a new JSON array (caller releases
 * with json_object_put). Empty documents are skipped. On error returns
 * PRD_EINVAL with "line L, column C: problem" in err. */
int yj_parse_all(const char *data, size_t len, json_object **docs, prd_err *err);

/* Like yj_parse_all, but flattens Kubernetes lists: a document whose kind
 * ends in "List" and that has an `items` array contributes its items. */
int yj_parse_objects(const char *data, size_t len, json_object **objs, prd_err *err);

/* Parse exactly one document (error if zero or several). */
int yj_parse_one(const char *data, size_t len, json_object **doc, prd_err *err);

/* Read a whole file (at most 64 MiB) and yj_parse_objects it. */
int yj_load_file(const char *path, json_object **objs, prd_err *err);

/* Read a file into memory (caller frees). */
int yj_read_file(const char *path, size_t max, char **data, size_t *len, prd_err *err);

/* Append `obj` to `out` as a YAML document (no "---"), strings quoted
 * wherever a YAML reader would otherwise take them for another type, the
 * way kubectl prints (src/util/yaml_print.c). 0 or an error code. */
struct buf;
int yj_print_yaml(json_object *obj, struct buf *out);

#endif
