/* A controller against the in-memory API, a real state store and a fake
 * clock, with the helpers the tests of ProvisioningClasses, quotas and
 * topology share (tests/unit/test_pclass.c, test_quota.c). */
#ifndef PRD_TESTS_CTLFIX_H
#define PRD_TESTS_CTLFIX_H

#include <json-c/json.h>
#include <stdbool.h>

#include "driver/host.h"
#include "driver/loader.h"
#include "kube/api.h"
#include "kube/memapi.h"
#include "provreq/controller.h"
#include "state/state.h"
#include "util/clock.h"

#define T0 (1714557600LL * PRD_NS_PER_SEC)
#define SEC PRD_NS_PER_SEC
#define MIN (60 * SEC)

extern memapi *m;
extern clk fake;
extern state_db *db;
extern pr_ctl *ctl;
extern kube_api api;
extern cloud_drivers drivers;

/* A request to the API from YAML (merge patch for PATCH); 0 or the error. */
int fx_send(const char *method, const char *path, const char *yaml);
/* A Ready node with 16Gi of memory and 110 pods; labels: "k: v, k2: v2" or NULL. */
void add_node_l(const char *name, const char *cpu, const char *labels);
#define add_node(name, cpu) add_node_l(name, cpu, NULL)
void add_ns(const char *name, const char *labels);
/* A PodTemplate whose one container requests cpu. */
void add_template(const char *ns, const char *name, const char *cpu);
void add_pr(const char *ns, const char *name, const char *cls, const char *tpl, int count, const char *params);
void add_pclass(const char *name, const char *spec);
void edit_pclass(const char *name, const char *spec_patch);
json_object *get_pr(const char *ns, const char *name);
/* "status/reason" of a condition, or "-" (static buffers). */
const char *cond(const char *ns, const char *name, const char *type);
const char *cond_msg(const char *ns, const char *name, const char *type);
const char *detail_of(const char *ns, const char *name, const char *key);
bool has_event(const char *ns, const char *kind, const char *reason);
void pass(void);
/* A controller with the default configuration (cfg NULL) or cfg, and the
 * example driver with driver_cfg (NULL: none). */
void start_cfg(const char *driver_cfg, const pr_config *cfg);
#define start(driver_cfg) start_cfg(driver_cfg, NULL)
void stop(void);

#endif
