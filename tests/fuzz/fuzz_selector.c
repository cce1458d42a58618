/* libFuzzer target for kube/selector: any input either fails to parse or
 * gives a selector whose canonical string parses back to an equal selector
 * and prints identically again. Inputs starting with '{' are also tried as
 * LabelSelector JSON, and every parsed selector is matched against labels
 * taken from its own requirements. */
#include <json-c/json.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kube/selector.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void round_trip(const sel *a)
{
	char *s1 = sel_to_string(a), *s2;
	sel *b = NULL;
	sel_label labels[8];
	size_t i, n = 0;

	if(!s1)
		abort();
	if(!sel_is_nothing(a)) {
		if(sel_parse(s1, &b, NULL) != 0 || !sel_equal(a, b))
			abort();
		s2 = sel_to_string(b);
		if(!s2 || strcmp(s1, s2) != 0)
			abort();
		free(s2);
		sel_free(b);
	}
	for(i = 0; i < sel_count(a) && n < 8; i++) {
		labels[n].key = sel_req_key(a, i);
		labels[n].value = sel_req_nvalues(a, i) ? sel_req_value(a, i, 0) : "";
		n++;
	}
	(void)sel_matches_pairs(a, labels, n);
	free(s1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	sel *a = NULL;

	if(!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	if(sel_parse(s, &a, NULL) == 0) {
		round_trip(a);
		sel_free(a);
	}
	if(size && s[0] == '{') {
		json_object *o = json_tokener_parse(s);
		if(o && sel_from_json(o, &a, NULL) == 0) {
			round_trip(a);
			(void)sel_matches_json(a, o);
			sel_free(a);
		}
		json_object_put(o);
	}
	free(s);
	return 0;
}
