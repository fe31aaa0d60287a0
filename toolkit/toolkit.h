/* SPDX-License-Identifier: MIT */
/*
 * toolkit.h - what the toolkit's files share (never installed). The
 * toolkit is built into libruntime but uses only <runtime.h>'s public
 * calls: nothing here reaches into runtime/internal.h.
 */
#ifndef RUNTIME_TOOLKIT_INTERNAL_H
#define RUNTIME_TOOLKIT_INTERNAL_H

#include "config.h"

#include <runtime.h>
#include <limits.h>
#include <stdbool.h>

#define MIN(a, b) ((a) < (b) ? (a) : (b))

/*
 * Write every byte of iov[0..iovcnt) through t's writev, looping over
 * short writes (iov is advanced in place: the caller's array is scratch).
 * Returns the total, or -errno (-EIO if a writev took no byte); *done (if
 * not NULL) receives the bytes written either way.
 */
ssize_t runtime__transport_write_all(const struct runtime_transport *t, struct iovec *iov,
                                     int iovcnt, size_t *done);

#endif
