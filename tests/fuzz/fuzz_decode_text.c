/* libFuzzer target: the text decoders against the json-c decoders. The
 * first byte picks the kind (even: Node, odd: Pod), the rest is the JSON
 * text. Both ways must give the same object or the same error; neither may
 * crash or leak. Also splits the input as a list page and a watch event,
 * which must never crash either. */
#include "../unit/decode_same.h"
#include "kube/jscan.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	kube_intern *in;
	kube_kind kind;
	kube_page pg;
	kube_jstr obj;
	char type[16];
	const char *json;
	size_t len;

	if(size < 1)
		return 0;
	kind = data[0] % 2 ? KUBE_KIND_POD : KUBE_KIND_NODE;
	json = (const char *)data + 1;
	len = size - 1;
	in = kube_intern_new();
	if(!in)
		return 0;
	if(ds_check(kind, json, len, 20, in, NULL))
		abort();
	/* Every string went back to the table. */
	if(kube_intern_count(in) != 0)
		abort();
	kube_intern_free(in);
	if(kube__page_scan(json, len, 20, &pg) == 0) {
		size_t i;
		for(i = 0; i < pg.nitems; i++)
			if(pg.items[i].s < json || pg.items[i].s + pg.items[i].len > json + len)
				abort();
	}
	kube__page_free(&pg);
	if(kube__event_scan(json, len, 20, type, &obj) == 0 && (obj.s < json || obj.s + obj.len > json + len))
		abort();
	return 0;
}
