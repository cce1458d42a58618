/* libFuzzer target: parse arbitrary text as an RFC 3339 time; whatever
 * parses must format and parse back to the same second. */
#include "util/rfc3339.h"
#include "util/clock.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char in[64], out[RFC3339_MAX];
	int64_t ns, back;
	if(size >= sizeof(in))
		return 0;
	memcpy(in, data, size);
	in[size] = '\0';
	if(rfc3339_parse(in, &ns, NULL))
		return 0;
	if(rfc3339_format_micro(ns, out, sizeof(out)) || rfc3339_parse(out, &back, NULL))
		abort();
	if(back / 1000 != ns / 1000 && !(ns < 0))
		abort();
	return 0;
}
