/* libFuzzer target: any byte string either parses into JSON documents that
 * serialise, or fails with a message; never crashes or leaks. */
#include "util/yamljson.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_object *objs = NULL;
	prd_err e;
	int rc = yj_parse_objects((const char *)data, size, &objs, &e);
	if(rc == 0) {
		const char *s = json_object_to_json_string(objs);
		if(!s)
			abort();
		json_object_put(objs);
	} else if(objs || !e.msg[0]) {
		abort();
	}
	return 0;
}
