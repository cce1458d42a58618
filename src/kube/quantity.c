/* Kubernetes resource.Quantity (see quantity.h for the rules).
 *
 * The amount is a signed 128-bit count of nano units. apimachinery keeps an
 * int64 mantissa with a base-10 scale and falls back to arbitrary-precision
 * decimals; since it rounds every parsed value to 1n, a fixed nano scale
 * gives the same answers with plain integer arithmetic, at the price of a
 * finite range (±(2^127-1)n), which we report as PRD_ERANGE. */
#include "kube/quantity.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

__extension__ typedef __int128 i128;
__extension__ typedef unsigned __int128 u128;

#define NANO ((int64_t)1000000000)
#define U128_MAX (~(u128)0)
#define I128_MAX ((i128)(U128_MAX >> 1))

/* apimachinery caps binary-SI quantities at 2^63-1 while parsing. */
#define BINARY_CAP_NANO ((u128)INT64_MAX * (u128)NANO)

static i128 get(const qty *q)
{
	u128 u = ((u128)(uint64_t)q->hi << 64) | q->lo;
	return (i128)u;
}

static void put(qty *q, i128 v)
{
	u128 u = (u128)v;
	q->lo = (uint64_t)u;
	q->hi = (int64_t)(uint64_t)(u >> 64);
}

static qty_format norm_format(int f)
{
	switch(f) {
	case QTY_DECIMAL_SI:
	case QTY_BINARY_SI:
	case QTY_DECIMAL_EXPONENT:
		return (qty_format)f;
	default:
		return QTY_DECIMAL_EXPONENT;
	}
}

/* ---- parsing ---------------------------------------------------------- */

/* The significant digits of a number: the integer digits (leading zeros
 * already skipped) followed by the fraction digits, read in place. */
typedef struct digits {
	const char *a;
	size_t na;
	const char *b;
	size_t nb;
} digits;

static unsigned digit_at(const digits *d, size_t i)
{
	return (unsigned)(i < d->na ? d->a[i] - '0' : d->b[i - d->na] - '0');
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* Compute ceil(D × 10^p × 2^k) where D is the digit sequence read as an
 * integer: the magnitude in nano units, rounded up as apimachinery does.
 * Digits past the nano position only matter through the carry they push
 * into it and whether anything non-zero is left, so inputs of any length
 * are handled without storing them. Sets *ovf when the result does not fit
 * 128 bits. */
static u128 nano_magnitude(const digits *d, int64_t p, unsigned k, bool *ovf)
{
	int64_t len = (int64_t)(d->na + d->nb);
	int64_t ip = len + p;  /* digits of D that land left of the nano point */
	int64_t nint = ip <= 0 ? 0 : (ip < len ? ip : len);
	u128 ipart = 0, carry = 0, x;
	bool nonzero = false;
	int64_t i, z;

	*ovf = false;
	for(i = 0; i < nint; i++) {
		if(ipart > (U128_MAX - 9) / 10) {
			*ovf = true;
			return 0;
		}
		ipart = ipart * 10 + digit_at(d, (size_t)i);
	}
	for(i = len; i < ip && ipart != 0; i++) {
		if(ipart > U128_MAX / 10) {
			*ovf = true;
			return 0;
		}
		ipart *= 10;
	}
	if(k > 0) {
		if(ipart > (U128_MAX >> k)) {
			*ovf = true;
			return 0;
		}
		ipart <<= k;
	}
	/* Fraction × 2^k, from the last digit up: carry ends as its integer
	 * part, nonzero says whether a fraction remains (then round up). */
	for(i = len - 1; i >= nint; i--) {
		u128 t = ((u128)digit_at(d, (size_t)i) << k) + carry;
		if(t % 10)
			nonzero = true;
		carry = t / 10;
	}
	for(z = ip < 0 ? -ip : 0; z > 0 && carry != 0; z--) {
		if(carry % 10)
			nonzero = true;
		carry /= 10;
	}
	x = ipart + carry;
	if(x < ipart || x + (nonzero ? 1 : 0) < x) {
		*ovf = true;
		return 0;
	}
	return x + (nonzero ? 1 : 0);
}

/* Go's strconv.ParseInt(s, 10, 64) on n bytes: optional sign, at least one
 * digit. Returns 0, PRD_EINVAL or PRD_ERANGE. */
static int parse_exponent(const char *s, size_t n, int64_t *out)
{
	size_t i = 0;
	bool neg = false;
	uint64_t v = 0, lim;

	if(i < n && (s[i] == '+' || s[i] == '-'))
		neg = s[i++] == '-';
	if(i == n)
		return PRD_EINVAL;
	lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
	for(; i < n; i++) {
		if(!is_digit(s[i]))
			return PRD_EINVAL;
		if(v > (lim - (uint64_t)(s[i] - '0')) / 10)
			return PRD_ERANGE;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	*out = neg ? (int64_t)(0 - v) : (int64_t)v;
	return 0;
}

typedef struct suffix_def {
	const char *s;
	int base;
	int exp;
} suffix_def;

static const suffix_def suffixes[] = {
	{"", 10, 0}, {"n", 10, -9}, {"u", 10, -6}, {"m", 10, -3},
	{"k", 10, 3}, {"M", 10, 6}, {"G", 10, 9}, {"T", 10, 12},
	{"P", 10, 15}, {"E", 10, 18},
	{"Ki", 2, 10}, {"Mi", 2, 20}, {"Gi", 2, 30}, {"Ti", 2, 40},
	{"Pi", 2, 50}, {"Ei", 2, 60},
};

/* apimachinery's suffix interpretation: the fixed SI and binary suffixes
 * first, then e/E followed by a signed integer. */
static int interpret_suffix(const char *s, size_t n, int *base, int64_t *exp,
	qty_format *fmt, prd_err *err)
{
	size_t i;
	int rc;

	for(i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
		if(strlen(suffixes[i].s) == n && memcmp(suffixes[i].s, s, n) == 0) {
			*base = suffixes[i].base;
			*exp = suffixes[i].exp;
			*fmt = suffixes[i].base == 2 ? QTY_BINARY_SI : QTY_DECIMAL_SI;
			return 0;
		}
	}
	if(n > 1 && (s[0] == 'e' || s[0] == 'E')) {
		rc = parse_exponent(s + 1, n - 1, exp);
		if(rc == 0 && (*exp < INT32_MIN || *exp > INT32_MAX))
			rc = PRD_ERANGE;
		if(rc == PRD_ERANGE)
			return prd_err_set(err, PRD_ERANGE,
				"quantity exponent \"%.*s\" is out of range",
				(int)(n > 32 ? 32 : n), s);
		if(rc == 0) {
			*base = 10;
			*fmt = QTY_DECIMAL_EXPONENT;
			return 0;
		}
	}
	return prd_err_set(err, PRD_EINVAL,
		"unable to parse quantity's suffix \"%.*s\" (expected one of n u m k M G T P E Ki Mi Gi Ti Pi Ei or e<exponent>)",
		(int)(n > 32 ? 32 : n), s);
}

static bool is_suffix_char(char c)
{
	return c != '\0' && strchr("eEinumkKMGTP", c) != NULL;
}

int qty_parse_n(const char *s, size_t n, qty *out, prd_err *err)
{
	size_t pos = 0, sfx;
	bool neg = false, ovf;
	digits d = {"", 0, "", 0};
	int base = 10, rc;
	int64_t exp = 0, p;
	qty_format fmt = QTY_DECIMAL_SI;
	u128 mag;
	qty q;

	if(!s || n == 0)
		return prd_err_set(err, PRD_EINVAL, "quantity is empty");
	if(s[0] == '-' || s[0] == '+')
		neg = s[pos++] == '-';
	while(pos < n && s[pos] == '0')
		pos++;
	d.a = s + pos;
	while(pos < n && is_digit(s[pos]))
		pos++;
	d.na = (size_t)(s + pos - d.a);
	if(pos < n && s[pos] == '.') {
		pos++;
		d.b = s + pos;
		while(pos < n && is_digit(s[pos]))
			pos++;
		d.nb = (size_t)(s + pos - d.b);
	}
	sfx = pos;
	while(pos < n && is_suffix_char(s[pos]))
		pos++;
	if(pos < n && (s[pos] == '-' || s[pos] == '+'))
		pos++;
	while(pos < n && is_digit(s[pos]))
		pos++;
	if(pos < n)
		return prd_err_set(err, PRD_EINVAL,
			"quantity has an unexpected character at offset %zu "
			"(expected [+-]digits[.digits][suffix], no white space)", pos);

	rc = interpret_suffix(s + sfx, n - sfx, &base, &exp, &fmt, err);
	if(rc)
		return rc;

	/* value = D × 10^(exp - fraction digits) (× 2^exp for binary); in nano
	 * units the decimal shift grows by 9. */
	p = (base == 10 ? exp : 0) - (int64_t)d.nb + 9;
	mag = nano_magnitude(&d, p, base == 2 ? (unsigned)exp : 0, &ovf);
	if(base == 2) {
		if(ovf || mag > BINARY_CAP_NANO)
			mag = BINARY_CAP_NANO;
		if(mag > 0 && mag < (u128)NANO)
			fmt = QTY_DECIMAL_SI;
	} else if(ovf || mag > (u128)I128_MAX) {
		return prd_err_set(err, PRD_ERANGE,
			"quantity is too large (the limit is about 1.7e29)");
	}
	put(&q, neg ? -(i128)mag : (i128)mag);
	q.format = (uint8_t)fmt;
	*out = q;
	return 0;
}

int qty_parse(const char *s, qty *out, prd_err *err)
{
	return qty_parse_n(s, s ? strlen(s) : 0, out, err);
}

/* ---- printing --------------------------------------------------------- */

static size_t u128_digits(u128 v, char *tmp)
{
	size_t n = 0;
	do {
		tmp[n++] = (char)('0' + (int)(v % 10));
		v /= 10;
	} while(v);
	return n;  /* reversed */
}

static const char *decimal_si_suffix(int e)
{
	static const char *const names[] = {"n", "u", "m", "", "k", "M", "G", "T", "P", "E"};
	if(e < -9 || e > 18 || e % 3)
		return NULL;
	return names[(e + 9) / 3];
}

/* apimachinery's CanonicalizeBytes: BinarySI prints with the largest exact
 * power-of-1024 suffix when the value is whole and at least 1024 in
 * magnitude, else as DecimalSI; DecimalSI and DecimalExponent print the
 * mantissa with the largest multiple-of-3 exponent that keeps it whole. */
int qty_format_str(const qty *q, char *buf, size_t n)
{
	static const char *const bin[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
	char out[QTY_STR_MAX], tmp[48], ebuf[16];
	const char *sfx = "";
	i128 v = get(q);
	u128 m;
	qty_format fmt = norm_format(q->format);
	size_t len = 0, nd, i;
	int e;

	if(v == 0) {
		out[len++] = '0';
		goto emit;
	}
	m = v < 0 ? (u128)(-v) : (u128)v;
	if(v < 0)
		out[len++] = '-';
	if(fmt == QTY_BINARY_SI) {
		if(m < (u128)1024 * NANO || m % NANO)
			fmt = QTY_DECIMAL_SI;
	}
	if(fmt == QTY_BINARY_SI) {
		unsigned j = 0;
		m /= NANO;
		while(j < 6 && m % 1024 == 0) {
			m /= 1024;
			j++;
		}
		sfx = bin[j];
	} else {
		const char *si;

		e = -9;
		while(m % 10 == 0) {
			m /= 10;
			e++;
		}
		while(e % 3) {
			m *= 10;   /* cannot overflow: undoes a division above */
			e--;
		}
		si = fmt == QTY_DECIMAL_SI ? decimal_si_suffix(e) : NULL;
		if(si)
			sfx = si;
		else if(e != 0) {
			snprintf(ebuf, sizeof(ebuf), "e%d", e);
			sfx = ebuf;
		}
	}
	nd = u128_digits(m, tmp);
	for(i = 0; i < nd; i++)
		out[len++] = tmp[nd - 1 - i];
emit:
	for(i = 0; sfx[i]; i++)
		out[len++] = sfx[i];
	out[len] = '\0';
	if(len + 1 > n) {
		if(n)
			buf[0] = '\0';
		return PRD_ERANGE;
	}
	memcpy(buf, out, len + 1);
	return 0;
}

const char *qty_str(const qty *q, char buf[QTY_STR_MAX])
{
	qty_format_str(q, buf, QTY_STR_MAX);
	return buf;
}

/* ---- construction and arithmetic -------------------------------------- */

qty qty_from_int64(int64_t v, qty_format f)
{
	qty q;
	put(&q, (i128)v * NANO);
	q.format = (uint8_t)norm_format((int)f);
	return q;
}

qty qty_from_milli(int64_t v, qty_format f)
{
	qty q;
	put(&q, (i128)v * 1000000);
	q.format = (uint8_t)norm_format((int)f);
	return q;
}

qty_format qty_get_format(const qty *q)
{
	return norm_format(q->format);
}

void qty_set_format(qty *q, qty_format f)
{
	q->format = (uint8_t)norm_format((int)f);
}

/* Store r in q unless it is -2^127, which is kept out of range so that
 * negation is always exact. */
static int store(qty *q, i128 r, qty_format fmt)
{
	if(r < -I128_MAX)
		return PRD_ERANGE;
	put(q, r);
	q->format = (uint8_t)fmt;
	return 0;
}

int qty_add(qty *q, const qty *y)
{
	i128 a = get(q), r;
	qty_format fmt = a == 0 ? norm_format(y->format) : norm_format(q->format);

	if(__builtin_add_overflow(a, get(y), &r))
		return PRD_ERANGE;
	return store(q, r, fmt);
}

int qty_sub(qty *q, const qty *y)
{
	i128 a = get(q), r;
	qty_format fmt = a == 0 ? norm_format(y->format) : norm_format(q->format);

	if(__builtin_sub_overflow(a, get(y), &r))
		return PRD_ERANGE;
	return store(q, r, fmt);
}

int qty_mul(qty *q, int64_t n)
{
	i128 r;

	if(__builtin_mul_overflow(get(q), (i128)n, &r))
		return PRD_ERANGE;
	return store(q, r, norm_format(q->format));
}

void qty_neg(qty *q)
{
	put(q, -get(q));
}

int qty_cmp(const qty *a, const qty *b)
{
	i128 x = get(a), y = get(b);
	return x < y ? -1 : x > y;
}

int qty_cmp_int64(const qty *a, int64_t b)
{
	i128 x = get(a), y = (i128)b * NANO;
	return x < y ? -1 : x > y;
}

bool qty_equal(const qty *a, const qty *b)
{
	return get(a) == get(b);
}

bool qty_is_zero(const qty *q)
{
	return q->lo == 0 && q->hi == 0;
}

int qty_sign(const qty *q)
{
	i128 v = get(q);
	return v < 0 ? -1 : v > 0;
}

/* ceil(|q| / unit) with q's sign, as an int64. */
static int scaled(const qty *q, int64_t unit, int64_t *out)
{
	i128 v = get(q);
	u128 m = v < 0 ? (u128)(-v) : (u128)v;
	u128 w = m / (u128)unit + (m % (u128)unit ? 1 : 0);

	if(v >= 0) {
		if(w > (u128)INT64_MAX)
			return PRD_ERANGE;
		*out = (int64_t)w;
	} else {
		if(w > (u128)INT64_MAX + 1)
			return PRD_ERANGE;
		*out = (int64_t)(0 - (uint64_t)w);
	}
	return 0;
}

int qty_value(const qty *q, int64_t *out)
{
	return scaled(q, NANO, out);
}

int qty_milli_value(const qty *q, int64_t *out)
{
	return scaled(q, 1000000, out);
}
