/* Error codes (PRD_E*) and the prd_err message every module fills in. */
#include "util/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int prd_err_set(prd_err *e, int code, const char *fmt, ...)
{
	if(e) {
		va_list ap;
		e->code = code;
		va_start(ap, fmt);
		vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
		va_end(ap);
	}
	return code;
}

int prd_err_prefix(prd_err *e, const char *fmt, ...)
{
	char old[PRD_ERR_MSG_MAX];
	va_list ap;
	int n;

	if(!e)
		return PRD_EINTERNAL;
	memcpy(old, e->msg, sizeof(old));
	old[sizeof(old) - 1] = '\0';
	va_start(ap, fmt);
	n = vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
	/* Append ": old" to whatever room the prefix left; cut if needed. */
	if(n >= 0 && (size_t)n < sizeof(e->msg) - 3) {
		size_t used = (size_t)n, room = sizeof(e->msg) - used - 3;
		size_t ol = strlen(old);
		if(ol > room)
			ol = room;
		memcpy(e->msg + used, ": ", 2);
		memcpy(e->msg + used + 2, old, ol);
		e->msg[used + 2 + ol] = '\0';
	}
	return e->code;
}

void prd_err_clear(prd_err *e)
{
	if(e) {
		e->code = 0;
		e->msg[0] = '\0';
	}
}

const char *prd_strerror(int code)
{
	switch(code) {
	case PRD_OK: return "OK";
	case PRD_ENOMEM: return "ENOMEM";
	case PRD_EINVAL: return "EINVAL";
	case PRD_EIO: return "EIO";
	case PRD_ENOTFOUND: return "ENOTFOUND";
	case PRD_EEXIST: return "EEXIST";
	case PRD_ECONFLICT: return "ECONFLICT";
	case PRD_ERANGE: return "ERANGE";
	case PRD_ETIMEDOUT: return "ETIMEDOUT";
	case PRD_EPERM: return "EPERM";
	case PRD_EGONE: return "EGONE";
	case PRD_EAGAIN: return "EAGAIN";
	case PRD_EUNSUPPORTED: return "EUNSUPPORTED";
	case PRD_ECORRUPT: return "ECORRUPT";
	case PRD_EINTERNAL: return "EINTERNAL";
	default: return "EUNKNOWN";
	}
}
