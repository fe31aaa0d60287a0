/* SPDX-License-Identifier: MIT */
/*
 * version.c - what library is loaded, and names for the errors it returns.
 */
#include "config.h"

#include <string.h>

#include "runtime.h"

unsigned runtime_version(void)
{
	return RUNTIME_VERSION;
}

const char *runtime_version_string(void)
{
	return RUNTIME_VERSION_STRING;
}

const char *runtime_error_name(int rc)
{
	if (rc >= 0)
		return "OK";
#ifdef HAVE_STRERRORNAME_NP
	/* rc == INT_MIN has no positive errno: no name either. */
	const char *name = rc > -4096 ? strerrorname_np(-rc) : NULL;
	if (name)
		return name;
#endif
	return "UNKNOWN";
}
