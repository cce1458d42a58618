/* JSON tree → YAML text through libyaml's emitter (which handles indenting
 * and escaping). The one decision left to us is the scalar style: a string
 * that a YAML reader would resolve to null, a boolean, a number or a
 * timestamp ("3", "true", "0x1f", "1e3", "2024-01-01") is double-quoted so
 * it stays a string; everything else is left for libyaml to print plain
 * where it can, as kubectl does. */
#include "util/yamljson.h"
#include "util/buf.h"

#include "util/err.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

static int write_handler(void *data, unsigned char *buffer, size_t size)
{
	return buf_append(data, buffer, size) == 0;
}

/* YAML 1.1 and 1.2 words for null and booleans. */
static bool is_reserved_word(const char *s)
{
	static const char *const words[] = {
		"", "~", "null", "Null", "NULL", "true", "True", "TRUE", "false", "False", "FALSE",
		"yes", "Yes", "YES", "no", "No", "NO", "on", "On", "ON", "off", "Off", "OFF",
		"y", "Y", "n", "N", ".inf", ".Inf", ".INF", "-.inf", "-.Inf", "-.INF", "+.inf",
		".nan", ".NaN", ".NAN", "<<", "="
	};
	size_t i;
	for(i = 0; i < sizeof(words) / sizeof(words[0]); i++)
		if(strcmp(s, words[i]) == 0)
			return true;
	return false;
}

/* Would a YAML reader take this plain scalar for a number or a date? */
static bool looks_numeric(const char *s)
{
	const char *p = s;
	char *end;
	size_t i, n = strlen(s);

	if(*p == '+' || *p == '-')
		p++;
	if(!*p || !(isdigit((unsigned char)*p) || (*p == '.' && isdigit((unsigned char)p[1]))))
		return false;
	/* decimal, float, exponent, hex (strtod reads 0x too) */
	strtod(s, &end);
	if(*end == '\0')
		return true;
	/* 0o17, 0b101, 1_000 (YAML 1.1), 1:30 sexagesimal */
	if(p[0] == '0' && (p[1] == 'o' || p[1] == 'b'))
		return true;
	for(i = 0; i < n; i++) {
		char c = s[i];
		if(!(isdigit((unsigned char)c) || c == '_' || c == ':' || c == '.' || c == '+' || c == '-'))
			break;
	}
	if(i == n)
		return true; /* digits with _ : . - only: numbers, times, dates */
	/* timestamps: 2001-12-14t21:59:43.10-05:00 and friends */
	if(n >= 10 && isdigit((unsigned char)s[0]) && isdigit((unsigned char)s[1]) &&
	   isdigit((unsigned char)s[2]) && isdigit((unsigned char)s[3]) && s[4] == '-')
		return true;
	return false;
}

static int emit_scalar(yaml_emitter_t *em, const char *s, bool plain_ok)
{
	yaml_event_t ev;
	yaml_scalar_style_t style = YAML_ANY_SCALAR_STYLE;
	if(!plain_ok)
		style = YAML_DOUBLE_QUOTED_SCALAR_STYLE;
	if(!yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)s, (int)strlen(s), 1, 1, style))
		return PRD_ENOMEM;
	return yaml_emitter_emit(em, &ev) ? 0 : PRD_EIO;
}

static int emit_string(yaml_emitter_t *em, const char *s)
{
	return emit_scalar(em, s, !is_reserved_word(s) && !looks_numeric(s));
}

static int emit_node(yaml_emitter_t *em, json_object *v, int depth)
{
	yaml_event_t ev;
	char num[64];
	int rc = 0;

	if(depth > 100)
		return PRD_EINVAL;
	switch(json_object_get_type(v)) {
	case json_type_null:
		return emit_scalar(em, "null", true);
	case json_type_boolean:
		return emit_scalar(em, json_object_get_boolean(v) ? "true" : "false", true);
	case json_type_int:
		snprintf(num, sizeof(num), "%lld", (long long)json_object_get_int64(v));
		return emit_scalar(em, num, true);
	case json_type_double:
		snprintf(num, sizeof(num), "%.17g", json_object_get_double(v));
		return emit_scalar(em, num, true);
	case json_type_string:
		return emit_string(em, json_object_get_string(v));
	case json_type_object: {
		bool empty = json_object_object_length(v) == 0;
		if(!yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1,
							empty ? YAML_FLOW_MAPPING_STYLE : YAML_BLOCK_MAPPING_STYLE) ||
		   !yaml_emitter_emit(em, &ev))
			return PRD_EIO;
		json_object_object_foreach(v, key, val) {
			rc = emit_string(em, key);
			if(!rc)
				rc = emit_node(em, val, depth + 1);
			if(rc)
				return rc;
		}
		if(!yaml_mapping_end_event_initialize(&ev) || !yaml_emitter_emit(em, &ev))
			return PRD_EIO;
		return 0;
	}
	case json_type_array: {
		size_t i, n = json_object_array_length(v);
		if(!yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1,
							 n ? YAML_BLOCK_SEQUENCE_STYLE : YAML_FLOW_SEQUENCE_STYLE) ||
		   !yaml_emitter_emit(em, &ev))
			return PRD_EIO;
		for(i = 0; i < n && !rc; i++)
			rc = emit_node(em, json_object_array_get_idx(v, i), depth + 1);
		if(rc)
			return rc;
		if(!yaml_sequence_end_event_initialize(&ev) || !yaml_emitter_emit(em, &ev))
			return PRD_EIO;
		return 0;
	}
	}
	return PRD_EINVAL;
}

int yj_print_yaml(json_object *obj, struct buf *out)
{
	yaml_emitter_t em;
	yaml_event_t ev;
	int rc = 0;

	if(!yaml_emitter_initialize(&em))
		return PRD_ENOMEM;
	yaml_emitter_set_output(&em, write_handler, out);
	yaml_emitter_set_unicode(&em, 1);
	yaml_emitter_set_width(&em, -1);
	yaml_emitter_set_indent(&em, 2);
	if(!yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING) || !yaml_emitter_emit(&em, &ev) ||
	   !yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1) || !yaml_emitter_emit(&em, &ev)) {
		rc = PRD_EIO;
		goto done;
	}
	rc = emit_node(&em, obj, 0);
	if(rc)
		goto done;
	if(!yaml_document_end_event_initialize(&ev, 1) || !yaml_emitter_emit(&em, &ev) ||
	   !yaml_stream_end_event_initialize(&ev) || !yaml_emitter_emit(&em, &ev) || !yaml_emitter_flush(&em))
		rc = PRD_EIO;
done:
	yaml_emitter_delete(&em);
	if(!rc && out->failed)
		rc = out->failed;
	return rc;
}
