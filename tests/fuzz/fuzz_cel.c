/* libFuzzer target for sched/cel: any input either fails to compile with
 * PRD_EUNSUPPORTED or PRD_EINVAL and a message, or compiles and evaluates
 * on a few devices to 1, 0 or an error, never crashing or leaking. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sched/cel.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	sched_dev_attr attrs[3] = {
		{ "gpu.example.com/model", SCHED_ATTR_STRING, 0, false, "a100" },
		{ "gpu.example.com/index", SCHED_ATTR_INT, 3, false, NULL },
		{ "gpu.example.com/mig", SCHED_ATTR_BOOL, 0, true, NULL },
	};
	sched_dev_cap caps[1];
	sched_device devs[2];
	sched_cel *c = NULL;
	prd_err e;
	char *s;
	int rc, k;

	s = malloc(size + 1);
	if(!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	caps[0].name = "gpu.example.com/memory";
	caps[0].value = qty_from_int64((int64_t)40 << 30, QTY_BINARY_SI);
	devs[0] = (sched_device){ "gpu.example.com", "p", "d0", attrs, 3, caps, 1 };
	devs[1] = (sched_device){ "other", "p", "d1", NULL, 0, NULL, 0 };
	rc = sched_cel_compile(s, &c, &e);
	if(rc) {
		if((rc != PRD_EUNSUPPORTED && rc != PRD_EINVAL && rc != PRD_ENOMEM) || c || !e.msg[0])
			abort();
	} else {
		if(!c || strcmp(sched_cel_text(c), s) != 0)
			abort();
		for(k = 0; k < 2; k++) {
			int r = sched_cel_eval(c, &devs[k], &e);
			if(r != 0 && r != 1 && r >= 0)
				abort();
		}
		sched_cel_free(c);
	}
	free(s);
	return 0;
}
