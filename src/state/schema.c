/* The state store's schema as an ordered list of migrations. A migration
 * that has shipped is never edited: a change is a new step at the end, and
 * STATE_SCHEMA_VERSION moves with it. tests/unit/test_state.c keeps a
 * verbatim copy of version 1 to prove that old databases still upgrade. */
#include "state/state_int.h"

/* Version 1: request state, node-group backoff, scale-up intents and
 * bookings (docs/design.md §7). Times are nanoseconds since the Unix
 * epoch; phase is stored as text so the file reads well in sqlite3. */
static const char schema_v1[] =
	"CREATE TABLE request_state ("
	" uid             TEXT NOT NULL PRIMARY KEY,"
	" namespace       TEXT NOT NULL,"
	" name            TEXT NOT NULL,"
	" first_seen_ns   INTEGER NOT NULL,"
	" valid_until_ns  INTEGER,"
	" attempts        INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),"
	" next_attempt_ns INTEGER NOT NULL DEFAULT 0,"
	" last_outcome    TEXT NOT NULL DEFAULT ''"
	") WITHOUT ROWID;"
	"CREATE TABLE group_backoff ("
	" group_id        TEXT NOT NULL PRIMARY KEY,"
	" failures        INTEGER NOT NULL CHECK (failures > 0),"
	" duration_ns     INTEGER NOT NULL CHECK (duration_ns > 0),"
	" last_failure_ns INTEGER NOT NULL,"
	" until_ns        INTEGER NOT NULL"
	") WITHOUT ROWID;"
	"CREATE TABLE scaleup_intent ("
	" plan_id       TEXT NOT NULL PRIMARY KEY,"
	" request_uid   TEXT NOT NULL,"
	" node_group    TEXT NOT NULL,"
	" delta         INTEGER NOT NULL CHECK (delta > 0),"
	" target_before INTEGER NOT NULL CHECK (target_before >= 0),"
	" phase         TEXT NOT NULL CHECK (phase IN ('planned','increasing',"
	"                 'waiting-for-nodes','done','rolling-back','rolled-back')),"
	" deadline_ns   INTEGER NOT NULL,"
	" created_ns    INTEGER NOT NULL,"
	" updated_ns    INTEGER NOT NULL"
	");"
	"CREATE INDEX scaleup_intent_phase ON scaleup_intent(phase);"
	"CREATE TABLE booking ("
	" request_uid    TEXT NOT NULL,"
	" node_name      TEXT NOT NULL,"
	" resources_json TEXT NOT NULL,"
	" created_ns     INTEGER NOT NULL,"
	" expires_ns     INTEGER NOT NULL,"
	" PRIMARY KEY (request_uid, node_name)"
	") WITHOUT ROWID;";

/* Version 2. Version 1 recorded only the delta of a scale-up, so rolling
 * back after a crash had to guess which nodes the plan created from the
 * group's current size, which races with any other scale-up of the same
 * group. Each created node is now recorded against its plan. Intents and
 * group backoffs also keep the error that caused them, so recovery, events
 * and metrics can say why; and bookings get an index on expiry because
 * "all unexpired bookings" is read on every check-capacity pass. */
static const char schema_v2[] =
	"CREATE TABLE scaleup_intent_node ("
	" plan_id   TEXT NOT NULL REFERENCES scaleup_intent(plan_id) ON DELETE CASCADE,"
	" node_name TEXT NOT NULL,"
	" seq       INTEGER NOT NULL,"
	" added_ns  INTEGER NOT NULL,"
	" PRIMARY KEY (plan_id, node_name)"
	") WITHOUT ROWID;"
	"ALTER TABLE scaleup_intent ADD COLUMN last_error TEXT NOT NULL DEFAULT '';"
	"ALTER TABLE group_backoff ADD COLUMN last_error TEXT NOT NULL DEFAULT '';"
	"CREATE INDEX booking_expires ON booking(expires_ns);";

/* Version 3. A crash between the cloud call and recording the nodes it
 * made left version 2 without a way to tell those nodes from the group's
 * older ones. The group's instances are now recorded with the plan before
 * the cloud is called, so recovery deletes exactly what appeared since. */
static const char schema_v3[] =
	"ALTER TABLE scaleup_intent ADD COLUMN known_before TEXT NOT NULL DEFAULT '';";

/* Version 4. Two replicas share the work: a plan records the leader
 * term (lease holder and leaseTransitions) that made it, so a returning
 * leader's stale plan can be told from the current one's. */
static const char schema_v4[] =
	"ALTER TABLE scaleup_intent ADD COLUMN term TEXT NOT NULL DEFAULT '';";

/* Version 5. Node auto-provisioning: the groups a plan is to create, or
 * created, recorded before the cloud is asked (classes/nap.c). */
static const char schema_v5[] =
	"CREATE TABLE nap_group ("
	" group_id TEXT PRIMARY KEY,"
	" spec     TEXT NOT NULL"
	") WITHOUT ROWID;";

const state__migration state__migrations[] = {
	{ 1, schema_v1 },
	{ 2, schema_v2 },
	{ 3, schema_v3 },
	{ 4, schema_v4 },
	{ 5, schema_v5 },
};

const size_t state__n_migrations = sizeof(state__migrations) / sizeof(state__migrations[0]);
