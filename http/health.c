/* SPDX-License-Identifier: MIT */
/*
 * health.c - a readiness handler for load balancers: 200 while the
 * runtime serves, 503 from the moment a drain begins (runtime_draining),
 * so that a balancer's probe takes the instance out of rotation while its
 * connections in flight finish - before the listening sockets close, not
 * after connections start being refused.
 */
#include "http.h"

int runtime_http_health_handler(struct runtime_http_request *req,
                                struct runtime_http_response *res, void *rt)
{
	struct runtime *of = rt ? rt : runtime_current();

	(void)req;
	if (!runtime_draining(of))
		return runtime_http_respond(res, 200, "text/plain; charset=utf-8", "ok\n", 3);
	runtime_http_set_close(res); /* the probe's connection need not linger */
	return runtime_http_respond(res, 503, "text/plain; charset=utf-8", "draining\n", 9);
}
