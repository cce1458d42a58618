/* The process_* metrics every Prometheus client library exports, read from
 * procfs (Linux): CPU time, start time, resident and virtual memory, open
 * and maximum file descriptors. The HTTP endpoint refreshes them before
 * each /metrics answer, so they cost nothing between scrapes. */
#ifndef PRD_OPS_PROCSTAT_H
#define PRD_OPS_PROCSTAT_H

#include "util/err.h"

typedef struct procstat {
	double cpu_seconds;     /* utime + stime */
	double start_time;      /* seconds since the epoch */
	double resident_bytes;
	double virtual_bytes;
	double open_fds;
	double max_fds;         /* soft RLIMIT_NOFILE; -1 when unlimited */
} procstat;

/* Read the figures of "self" under `proc_root` ("/proc" in the daemon, a
 * directory of files laid out the same way in tests): self/stat,
 * self/fd/, self/limits and stat (for btime). `ticks_per_s` and
 * `page_size` are sysconf(_SC_CLK_TCK) and sysconf(_SC_PAGESIZE) in the
 * daemon. PRD_EIO or PRD_EINVAL with the file named when one is missing
 * or not as procfs writes it; *out is then untouched. */
int procstat_read(const char *proc_root, long ticks_per_s, long page_size, procstat *out, prd_err *err);

/* Set the process_* families from p (an unlimited max_fds as +Inf). */
void procstat_publish(const procstat *p);

/* procstat_read("/proc", ...) and procstat_publish; a failure is logged
 * once and leaves the families as they were. */
void procstat_update(void);

#endif
