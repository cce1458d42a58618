/* What `provreqd simulate` reads, records and prints, apart from running
 * the controller (src/cmd_simulate.c does that):
 *
 *   sim_input.c   the cluster input (files, directories, kubectl dumps),
 *                 the --request what-if files and the cloud config's
 *                 templateDir
 *   sim_record.c  condition transitions and node-group sizes over
 *                 simulated time, and the request state they imply
 *   sim_report.c  the JSON document behind `-o json` and `-o yaml`
 *   sim_svg.c     the `--plot` picture
 *
 * Times are nanoseconds of the simulated clock (Unix epoch, UTC). */
#ifndef PRD_SIM_SIM_H
#define PRD_SIM_SIM_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>

#include "kube/memapi.h"
#include "util/buf.h"
#include "util/err.h"

/* ---- input (sim_input.c) ------------------------------------------------ */

/* Objects read from files, each with where it came from ("FILE document
 * 2 item 5"), for messages. Both arrays have the same length. */
typedef struct sim_objs {
	json_object *objs;
	json_object *where;
} sim_objs;

void sim_objs_init(sim_objs *o);
void sim_objs_free(sim_objs *o);

/* Read the --cluster input: a YAML or JSON file (Lists such as `kubectl
 * get ... -o yaml` prints are flattened into their items), or every
 * *.yaml, *.yml and *.json file of a directory in name order
 * (cloud-config.yaml excepted). Files and documents that cannot be
 * objects are skipped with a warning logged naming them and why; a file
 * that cannot be read or parsed is an error. Appends to `out`. */
int sim_input_read(const char *path, sim_objs *out, prd_err *err);

/* Create the objects in the store in order. An object that cannot be
 * simulated (unknown kind, no name, refused by the store) is skipped with
 * a warning naming its kind, namespace/name, where it came from and why.
 * *loaded counts the objects created. Errors only for out of memory. */
int sim_input_load(memapi *m, const sim_objs *in, size_t *loaded, prd_err *err);

/* Read one --request file: a YAML stream of ProvisioningRequests and the
 * PodTemplates they use. Strict: anything else, or a request missing what
 * the controller needs, is an error naming the document. Appends to
 * `out`. */
int sim_requests_read(const char *path, sim_objs *out, prd_err *err);

/* Create the what-if objects; an error (naming the document) when one
 * clashes with an object of the cluster input or a request's PodTemplate
 * is in neither the request files nor the cluster. */
int sim_requests_load(memapi *m, const sim_objs *in, prd_err *err);

/* The cloud config text with a relative `templateDir` made relative to
 * the directory of `cfg_path` (as JSON when it changed). *out is a new
 * string (caller frees). Text that is not a YAML mapping is returned
 * unchanged for the driver to judge. */
int sim_cloud_config_resolve(const char *cfg_path, const char *text, char **out, prd_err *err);

/* ---- record (sim_record.c) ---------------------------------------------- */

enum sim_state {
	SIM_PENDING = 0,      /* created, accepted, waiting for capacity */
	SIM_SCALEUP,          /* Provisioned=False ScaleUpInProgress */
	SIM_PROVISIONED,      /* Provisioned=True */
	SIM_FAILED,           /* Failed=True */
	SIM_BOOKING_EXPIRED,  /* BookingExpired=True */
	SIM_NSTATES
};

/* Stable names of the states (JSON "state" values, plot legend). */
const char *sim_state_name(int state);

typedef struct sim_transition {
	int64_t t;
	bool initial;         /* already in the input, not a change */
	char *ns, *name, *type, *status, *reason, *message;
} sim_transition;

typedef struct sim_sample {
	int64_t t;
	char *group;
	int32_t target, ready;
} sim_sample;

typedef struct sim_req {
	char *ns, *name;
	int64_t created;
} sim_req;

typedef struct sim_record {
	int64_t start, end;
	sim_transition *tr;
	size_t ntr, cap_tr;
	sim_sample *smp;
	size_t nsmp, cap_smp;
	sim_req *req;
	size_t nreq, cap_req;
	char **groups;        /* group ids in the order first seen */
	size_t ngroups;
} sim_record;

void sim_record_init(sim_record *r, int64_t start, int64_t end);
void sim_record_free(sim_record *r);

/* Compare a ProvisioningRequest (JSON, borrowed) with what was last seen
 * of it and append one transition per condition whose status, reason or
 * message changed, stamped `t`. With `initial` the conditions are the
 * input's starting point (kept, not reported as changes). */
int sim_record_request(sim_record *r, int64_t t, json_object *pr, bool initial);

/* A node group's target size and Ready nodes at `t`; kept only when it
 * differs from the group's previous sample. */
int sim_record_size(sim_record *r, int64_t t, const char *group, int32_t target, int32_t ready);

/* The state implied by a request's conditions (status/reason strings,
 * NULL when the condition is absent). */
int sim_state_of(const char *provisioned, const char *provisioned_reason, const char *failed,
		 const char *booking_expired);

/* One stretch of a request in one state: [from, to), with the reason and
 * message of the latest condition change of the request within it (NULL
 * when none; borrowed from the record's transitions). */
typedef struct sim_span {
	int64_t from, to;
	int state;
	const char *type, *reason, *message;
} sim_span;

/* The states request `i` of the record went through, from its creation
 * (or the start) to the end. *spans is new (caller frees). */
int sim_record_spans(const sim_record *r, size_t i, sim_span **spans, size_t *n);

/* ---- output (sim_report.c, sim_svg.c) ----------------------------------- */

/* The report document (docs/simulate.md has its schema). `requests`,
 * `groups` and `summary` are taken over (their references move into the
 * document). Caller releases with json_object_put. */
json_object *sim_report_doc(const sim_record *r, json_object *requests, json_object *groups, json_object *summary);

/* RFC 3339 and "+1h5m" (since the start) for simulated time `t`. */
void sim_time_str(int64_t t, char *out, size_t n);
void sim_offset_str(int64_t start, int64_t t, char *out, size_t n);

/* The plot: node-group sizes over time and one bar per request coloured
 * by state, as SVG text appended to `out`. */
int sim_svg(const sim_record *r, buf *out);

#endif
