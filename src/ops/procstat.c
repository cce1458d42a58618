/* The process_* metrics (CPU time, start time, memory, file descriptors)
 * read from procfs before each /metrics answer. */
#include "ops/procstat.h"
#include "ops/log.h"
#include "ops/metrics.h"
#include "util/str.h"

#include <dirent.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Read a small procfs file (they are a few KiB at most) into out. */
static int slurp(const char *root, const char *name, char *out, size_t size, prd_err *err)
{
	char path[4096];
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "%s/%s", root, name);
	f = fopen(path, "r");
	if(!f)
		return prd_err_set(err, PRD_EIO, "cannot read %s", path);
	n = fread(out, 1, size - 1, f);
	fclose(f);
	out[n] = '\0';
	return PRD_OK;
}

/* Fields of self/stat after the command name, which may itself hold
 * spaces and parentheses: the text after its last ')' is "state ppid ...",
 * field 3 of proc(5) onwards. want[i] is a proc(5) field number. */
static int stat_fields(const char *text, const int *want, size_t n, double *out)
{
	const char *p = strrchr(text, ')');
	int field = 3;
	size_t i = 0;

	if(!p)
		return -1;
	p++;
	while(i < n && *p) {
		char *end;
		double v;
		while(*p == ' ')
			p++;
		if(field == want[i]) {
			v = strtod(p, &end);
			if(end == p)
				return -1;
			out[i++] = v;
		}
		while(*p && *p != ' ')
			p++;
		field++;
	}
	return i == n ? 0 : -1;
}

static int count_fds(const char *root, double *out, prd_err *err)
{
	char path[4096];
	struct dirent *de;
	DIR *d;
	long n = 0;

	snprintf(path, sizeof(path), "%s/self/fd", root);
	d = opendir(path);
	if(!d)
		return prd_err_set(err, PRD_EIO, "cannot list %s", path);
	while((de = readdir(d)))
		if(strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, ".."))
			n++;
	closedir(d);
	*out = (double)n; /* the listing's own descriptor included, as Prometheus' clients count */
	return PRD_OK;
}

/* "Max open files  SOFT  HARD  files": the soft limit, -1 if unlimited. */
static int max_fds(const char *limits, double *out)
{
	const char *p = strstr(limits, "Max open files");
	char *end;

	if(!p)
		return -1;
	p += strlen("Max open files");
	while(*p == ' ')
		p++;
	if(strncmp(p, "unlimited", 9) == 0) {
		*out = -1;
		return 0;
	}
	*out = strtod(p, &end);
	return end == p ? -1 : 0;
}

int procstat_read(const char *root, long ticks_per_s, long page_size, procstat *out, prd_err *err)
{
	/* proc(5): utime 14, stime 15, starttime 22, vsize 23, rss 24. */
	static const int want[] = { 14, 15, 22, 23, 24 };
	double f[5];
	char text[8192];
	const char *bt;
	procstat p;
	int rc;

	if(ticks_per_s <= 0 || page_size <= 0)
		return prd_err_set(err, PRD_EINVAL, "procstat: ticks and page size must be positive");
	if((rc = slurp(root, "self/stat", text, sizeof(text), err)))
		return rc;
	if(stat_fields(text, want, 5, f))
		return prd_err_set(err, PRD_EINVAL, "%s/self/stat: not as proc(5) describes it", root);
	p.cpu_seconds = (f[0] + f[1]) / (double)ticks_per_s;
	p.virtual_bytes = f[3];
	p.resident_bytes = f[4] * (double)page_size;
	if((rc = slurp(root, "stat", text, sizeof(text), err)))
		return rc;
	bt = strstr(text, "\nbtime ");
	if(!bt)
		return prd_err_set(err, PRD_EINVAL, "%s/stat: no btime line", root);
	p.start_time = strtod(bt + 7, NULL) + f[2] / (double)ticks_per_s;
	if((rc = slurp(root, "self/limits", text, sizeof(text), err)))
		return rc;
	if(max_fds(text, &p.max_fds))
		return prd_err_set(err, PRD_EINVAL, "%s/self/limits: no 'Max open files' line", root);
	if((rc = count_fds(root, &p.open_fds, err)))
		return rc;
	*out = p;
	return PRD_OK;
}

void procstat_publish(const procstat *p)
{
	metrics_counter_raise(M_PROCESS_CPU, NULL, p->cpu_seconds);
	metrics_gauge_set(M_PROCESS_START, NULL, p->start_time);
	metrics_gauge_set(M_PROCESS_RSS, NULL, p->resident_bytes);
	metrics_gauge_set(M_PROCESS_VMEM, NULL, p->virtual_bytes);
	metrics_gauge_set(M_PROCESS_FDS, NULL, p->open_fds);
	metrics_gauge_set(M_PROCESS_MAX_FDS, NULL, p->max_fds >= 0 ? p->max_fds : INFINITY);
}

void procstat_update(void)
{
	/* One line per process, not one per scrape. Only the HTTP server's
	 * one thread calls this. */
	static bool warned;
	procstat p;
	prd_err e;

	if(procstat_read("/proc", sysconf(_SC_CLK_TCK), sysconf(_SC_PAGESIZE), &p, &e) == PRD_OK) {
		procstat_publish(&p);
	} else if(!warned) {
		warned = true;
		log_warn("process metrics unavailable", "error", e.msg);
	}
}
