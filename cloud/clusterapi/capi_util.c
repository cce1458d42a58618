/* Helpers of the clusterapi driver that the other drivers do not share
 * (the shared ones are in cloud/common/drv_util.c). */
#include "clusterapi/clusterapi.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const kind_names[CAPI_KINDS] = {"MachineDeployment", "MachineSet", "MachinePool"};
static const char *const kind_plurals[CAPI_KINDS] = {"machinedeployments", "machinesets", "machinepools"};

const char *capi_kind_name(capi_kind k)
{
	return k < CAPI_KINDS ? kind_names[k] : "?";
}

const char *capi_kind_plural(capi_kind k)
{
	return k < CAPI_KINDS ? kind_plurals[k] : "?";
}

void capi_path(const capi *c, char *out, size_t n, const char *plural, const char *ns, const char *name,
	       const char *sub)
{
	snprintf(out, n, "/apis/" CAPI_GROUP "/%s%s%s/%s%s%s%s%s", c->version, ns ? "/namespaces/" : "", ns ? ns : "",
		 plural, name ? "/" : "", name ? name : "", sub ? "/" : "", sub ? sub : "");
}
