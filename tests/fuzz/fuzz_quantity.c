/* libFuzzer target for kube/quantity: any input either fails to parse or
 * gives a quantity whose canonical string parses back to the same amount;
 * arithmetic on it is consistent.
 *
 * The string need not print identically after one round trip: as in
 * apimachinery, a BinarySI value that is not a multiple of 1024 prints as
 * plain digits ("10958245613248000"), which parse back as DecimalSI and
 * then print as "10958245613248k". From the second string on it is stable. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kube/quantity.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	qty q, r, sum, diff, twice;
	char s1[QTY_STR_MAX], s2[QTY_STR_MAX], s3[QTY_STR_MAX];
	int64_t v;

	if(qty_parse_n((const char *)data, size, &q, NULL) != 0)
		return 0;
	if(qty_format_str(&q, s1, sizeof(s1)) != 0)
		abort();
	if(qty_parse(s1, &r, NULL) != 0 || !qty_equal(&q, &r))
		abort();
	if(qty_format_str(&r, s2, sizeof(s2)) != 0)
		abort();
	if(qty_get_format(&r) == qty_get_format(&q) && strcmp(s1, s2) != 0)
		abort();
	if(qty_parse(s2, &sum, NULL) != 0 || !qty_equal(&q, &sum))
		abort();
	if(qty_format_str(&sum, s3, sizeof(s3)) != 0 || strcmp(s2, s3) != 0)
		abort();

	/* q + q == q * 2 and q - q == 0, whenever they fit */
	sum = q;
	twice = q;
	if(qty_add(&sum, &r) == 0) {
		if(qty_mul(&twice, 2) != 0 || !qty_equal(&sum, &twice))
			abort();
		if(qty_cmp(&sum, &q) != qty_sign(&q))
			abort();
	}
	diff = q;
	if(qty_sub(&diff, &r) != 0 || !qty_is_zero(&diff))
		abort();

	/* Value rounds away from zero: |value| >= |q| and within 1 of it. */
	if(qty_value(&q, &v) == 0) {
		qty back = qty_from_int64(v, QTY_DECIMAL_SI);
		int c = qty_cmp(&back, &q);
		if(qty_sign(&q) >= 0 ? c < 0 : c > 0)
			abort();
	}
	if(qty_milli_value(&q, &v) == 0) {
		qty back = qty_from_milli(v, QTY_DECIMAL_SI);
		int c = qty_cmp(&back, &q);
		if(qty_sign(&q) >= 0 ? c < 0 : c > 0)
			abort();
	}
	return 0;
}
