/* SPDX-License-Identifier: MIT */
/*
 * runtime_toolkit.h - the toolkit: what a service needs between the core
 * calls of <runtime.h> and its own logic, so that it does not write it by
 * hand: buffered reading and writing over a small transport interface
 * (a socket, a receive stream, later TLS), copying between connections,
 * connections with read and write deadlines, serving on every core,
 * graceful drain and rate limiting. Included by <runtime.h>; built into
 * libruntime from toolkit/, using only the core's public calls.
 *
 * The conventions of <runtime.h> hold here: errors are -errno, calls
 * that wait need fiber context, and each call states its threads, errors
 * and races.
 */
#ifndef RUNTIME_TOOLKIT_H
#define RUNTIME_TOOLKIT_H

#include "runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif
#endif /* RUNTIME_TOOLKIT_H */
