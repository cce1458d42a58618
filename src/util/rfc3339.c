/* RFC 3339 timestamps as Kubernetes writes (metav1.Time, MicroTime) and
 * reads them. */
#include "util/rfc3339.h"
#include "util/clock.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Days since 1970-01-01 of a proleptic Gregorian date (valid for any year;
 * Howard Hinnant's well-known civil-date arithmetic). */
static int64_t days_from_civil(int64_t y, int m, int d)
{
	int64_t era, yoe, doy, doe;
	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = y - era * 400;
	doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, int *m, int *d)
{
	int64_t era, doe, yoe, doy, mp;
	z += 719468;
	era = (z >= 0 ? z : z - 146096) / 146097;
	doe = z - era * 146097;
	yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	mp = (5 * doy + 2) / 153;
	*d = (int)(doy - (153 * mp + 2) / 5 + 1);
	*m = (int)(mp < 10 ? mp + 3 : mp - 9);
	*y = yoe + era * 400 + (*m <= 2);
}

static bool is_leap(int64_t y)
{
	return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int digits(const char *s, int n, int *out)
{
	int i, v = 0;
	for(i = 0; i < n; i++) {
		if(s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	*out = v;
	return 0;
}

int rfc3339_parse(const char *s, int64_t *out_ns, prd_err *err)
{
	static const int mdays[] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
	int Y, M, D, h, mi, sec, oh = 0, om = 0, sign = 0;
	int64_t frac = 0, days, total;
	size_t len, i = 19;
	int fd = 0;

	if(!s)
		return prd_err_set(err, PRD_EINVAL, "timestamp is missing");
	len = strlen(s);
	if(len < 20 || digits(s, 4, &Y) || s[4] != '-' || digits(s + 5, 2, &M) ||
	   s[7] != '-' || digits(s + 8, 2, &D) || (s[10] != 'T' && s[10] != 't') ||
	   digits(s + 11, 2, &h) || s[13] != ':' || digits(s + 14, 2, &mi) ||
	   s[16] != ':' || digits(s + 17, 2, &sec))
		goto bad;
	if(M < 1 || M > 12 || D < 1 ||
	   D > mdays[M - 1] + (M == 2 && is_leap(Y)) || h > 23 || mi > 59 || sec > 59)
		goto bad;
	if(s[i] == '.') {
		i++;
		if(i >= len || s[i] < '0' || s[i] > '9')
			goto bad;
		while(i < len && s[i] >= '0' && s[i] <= '9') {
			if(fd < 9) {
				frac = frac * 10 + (s[i] - '0');
				fd++;
			}
			i++;
		}
		while(fd < 9) {
			frac *= 10;
			fd++;
		}
	}
	if(i < len && (s[i] == 'Z' || s[i] == 'z') && i + 1 == len) {
		sign = 0;
	} else if(i < len && (s[i] == '+' || s[i] == '-') && i + 6 == len &&
		  !digits(s + i + 1, 2, &oh) && s[i + 3] == ':' &&
		  !digits(s + i + 4, 2, &om) && oh <= 23 && om <= 59) {
		sign = s[i] == '-' ? -1 : 1;
	} else {
		goto bad;
	}
	days = days_from_civil(Y, M, D);
	total = days * 86400 + h * 3600 + mi * 60 + sec;
	if(sign)
		total -= sign * (oh * 3600 + om * 60);
	/* Nanoseconds since the epoch in an int64 reach from 1677 to 2262. */
	if(total > INT64_MAX / PRD_NS_PER_SEC - 1 || total < INT64_MIN / PRD_NS_PER_SEC + 1)
		return prd_err_set(err, PRD_EINVAL, "RFC 3339 timestamp \"%.64s\" is out of range (years 1678 to 2261)", s);
	*out_ns = total * PRD_NS_PER_SEC + frac;
	return PRD_OK;
bad:
	return prd_err_set(err, PRD_EINVAL,
			   "invalid RFC 3339 timestamp \"%.64s\" (want e.g. 2024-05-01T10:00:00Z)", s);
}

static int split(int64_t ns, int64_t *y, int *m, int *d, int *h, int *mi, int *sec, int64_t *sub)
{
	int64_t secs = ns / PRD_NS_PER_SEC, rem = ns % PRD_NS_PER_SEC, days, sod;
	if(rem < 0) {
		rem += PRD_NS_PER_SEC;
		secs--;
	}
	days = secs / 86400;
	sod = secs % 86400;
	if(sod < 0) {
		sod += 86400;
		days--;
	}
	civil_from_days(days, y, m, d);
	*h = (int)(sod / 3600);
	*mi = (int)(sod % 3600 / 60);
	*sec = (int)(sod % 60);
	*sub = rem;
	return 0;
}

int rfc3339_format(int64_t ns, char *out, size_t outlen)
{
	int64_t y, sub;
	int m, d, h, mi, sec, n;
	split(ns, &y, &m, &d, &h, &mi, &sec, &sub);
	n = snprintf(out, outlen, "%04lld-%02d-%02dT%02d:%02d:%02dZ", (long long)y, m, d, h, mi, sec);
	return n < 0 || (size_t)n >= outlen ? PRD_ERANGE : PRD_OK;
}

int rfc3339_format_micro(int64_t ns, char *out, size_t outlen)
{
	int64_t y, sub;
	int m, d, h, mi, sec, n;
	split(ns, &y, &m, &d, &h, &mi, &sec, &sub);
	n = snprintf(out, outlen, "%04lld-%02d-%02dT%02d:%02d:%02d.%06lldZ", (long long)y, m, d, h, mi,
		     sec, (long long)(sub / 1000));
	return n < 0 || (size_t)n >= outlen ? PRD_ERANGE : PRD_OK;
}
