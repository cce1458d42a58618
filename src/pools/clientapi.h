/* kube_api over the REST client (kube/client.h). The client is borrowed
 * and must outlive every use of the returned kube_api; calls may come from
 * any thread, as kube_request allows. */
#ifndef PRD_POOLS_CLIENTAPI_H
#define PRD_POOLS_CLIENTAPI_H

#include "kube/api.h"
#include "kube/client.h"

kube_api pool_api_from_client(kube_client *c);

#endif
