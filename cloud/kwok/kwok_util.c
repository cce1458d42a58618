/* Helpers of the kwok driver that the other drivers do not share (the
 * shared ones are in cloud/common/drv_util.c). */
#include "kwok/kwok.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "util/rfc3339.h"

/* The alphabet apiserver's generateName uses: no vowels (no words), no
 * look-alike characters. */
static const char suffix_alphabet[] = "bcdfghjklmnpqrstvwxz2456789";

void kwok_random_suffix(kwok *k, char out[6])
{
	unsigned char b[5];
	size_t i;
	if(getrandom(b, sizeof(b), GRND_NONBLOCK) != (ssize_t)sizeof(b)) {
		/* No entropy yet (early boot): an xorshift seeded from the clock
		 * still differs between calls; apiserver refuses duplicates and
		 * the caller retries with another name. */
		if(!k->rng)
			k->rng = (uint64_t)k->host->now_ns(k->host->ctx) | 1;
		for(i = 0; i < sizeof(b); i++) {
			k->rng ^= k->rng << 13;
			k->rng ^= k->rng >> 7;
			k->rng ^= k->rng << 17;
			b[i] = (unsigned char)(k->rng >> 24);
		}
	}
	for(i = 0; i < sizeof(b); i++)
		out[i] = suffix_alphabet[b[i] % (sizeof(suffix_alphabet) - 1)];
	out[5] = '\0';
}

int64_t kwok_node_created_ns(json_object *node)
{
	const char *ts = kwok_jstr(kwok_jobj(node, "metadata"), "creationTimestamp");
	prd_err e;
	int64_t ns = 0;
	if(!ts || rfc3339_parse(ts, &ns, &e) || ns < 0)
		return 0;
	return ns;
}
