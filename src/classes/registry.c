/* The class registry: which module serves which provisioningClassName.
 * Small (a handful of modules), so a plain array searched in order. */
#include "classes/class.h"

#include <stdlib.h>
#include <string.h>

typedef struct reg_entry {
	const pr_class_module *m;
	char *provider;
} reg_entry;

struct pr_class_registry {
	reg_entry *v;
	const pr_class_module **mods; /* the modules alone, for pr_class_modules */
	size_t n, cap;
};

int pr_class_registry_new(pr_class_registry **out, prd_err *err)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : prd_err_set(err, PRD_ENOMEM, "out of memory");
}

void pr_class_registry_free(pr_class_registry *r)
{
	size_t i;
	if(!r)
		return;
	for(i = 0; i < r->n; i++)
		free(r->v[i].provider);
	free(r->v);
	free(r->mods);
	free(r);
}

static bool serves(const pr_class_module *m, const char *name)
{
	size_t k;
	if(!strcmp(m->name, name))
		return true;
	for(k = 0; m->aliases && m->aliases[k]; k++)
		if(!strcmp(m->aliases[k], name))
			return true;
	return false;
}

static const reg_entry *find(const pr_class_registry *r, const char *name)
{
	size_t i;
	for(i = 0; i < r->n; i++)
		if(serves(r->v[i].m, name))
			return &r->v[i];
	return NULL;
}

/* What the ProvisioningRequest CRD accepts as spec.provisioningClassName:
 * a DNS subdomain (lowercase letters, digits, '-' and '.'; each label
 * starts and ends with a letter or digit; at most 253 characters). */
static bool dns_subdomain(const char *s)
{
	size_t i, n = strlen(s);
	if(n == 0 || n > 253)
		return false;
	for(i = 0; i < n; i++) {
		char ch = s[i];
		bool alnum = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9');
		if(!alnum && ch != '-' && ch != '.')
			return false;
		if(!alnum && (i == 0 || i == n - 1 || s[i - 1] == '.' || s[i + 1] == '.'))
			return false;
	}
	return true;
}

int pr_class_register(pr_class_registry *r, const pr_class_module *m, const char *provider, prd_err *err)
{
	const reg_entry *have;
	size_t k;
	if(!m || !m->name || !m->name[0] || !m->decide)
		return prd_err_set(err, PRD_EINVAL, "%s: a class module needs a name and a decide function",
				   provider ? provider : "?");
	if(!dns_subdomain(m->name))
		return prd_err_set(err, PRD_EINVAL,
				   "%s: provisioning class '%.100s' is not a DNS subdomain (lowercase letters, digits, '-' "
				   "and '.'), so no ProvisioningRequest could name it",
				   provider ? provider : "?", m->name);
	if((have = find(r, m->name)))
		return prd_err_set(err, PRD_EEXIST, "provisioning class %s is served by both %s and %s", m->name,
				   have->provider, provider ? provider : "?");
	for(k = 0; m->aliases && m->aliases[k]; k++)
		if((have = find(r, m->aliases[k])))
			return prd_err_set(err, PRD_EEXIST, "provisioning class %s is served by both %s and %s",
					   m->aliases[k], have->provider, provider ? provider : "?");
	if(r->n == r->cap) {
		size_t cap = r->cap ? 2 * r->cap : 8;
		reg_entry *v = realloc(r->v, cap * sizeof(*v));
		const pr_class_module **mods;
		if(!v)
			return prd_err_set(err, PRD_ENOMEM, "out of memory");
		r->v = v;
		mods = realloc(r->mods, cap * sizeof(*mods));
		if(!mods)
			return prd_err_set(err, PRD_ENOMEM, "out of memory");
		r->mods = mods;
		r->cap = cap;
	}
	r->v[r->n].m = m;
	r->v[r->n].provider = strdup(provider ? provider : "?");
	if(!r->v[r->n].provider)
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	r->mods[r->n] = m;
	r->n++;
	return 0;
}

const pr_class_module *pr_class_lookup(const pr_class_registry *r, const char *class_name)
{
	const reg_entry *e;
	if(!r || !class_name)
		return NULL;
	e = find(r, class_name);
	return e ? e->m : NULL;
}

size_t pr_class_modules(const pr_class_registry *r, const pr_class_module *const **out)
{
	*out = r ? r->mods : NULL;
	return r ? r->n : 0;
}

const pr_class_module *const pr_class_builtins[] = { &pr_class_check_capacity, &pr_class_atomic, NULL };

const pr_class_module *pr_class_builtin(const char *class_name)
{
	size_t i;
	for(i = 0; class_name && pr_class_builtins[i]; i++)
		if(serves(pr_class_builtins[i], class_name))
			return pr_class_builtins[i];
	return NULL;
}
