/* SPDX-License-Identifier: MIT */
/*
 * preload_target.c - a program that knows nothing of libruntime-preload,
 * for tests/preload_ld.sh, which runs it with LD_PRELOAD. One fiber blocks
 * in read(2) on a socketpair, another counts, sleeping with usleep(3),
 * and writes to the socketpair after its fifth count. With the library
 * preloaded the read parks its fiber and the counter runs: "parked" and
 * exit 0. Without it the read blocks the core thread until SO_RCVTIMEO
 * (10 s) gives up: "blocked" and exit 1.
 */
#include <runtime.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

static int sv[2];
static volatile int ticks, stop;
static int parked;

static void counter(void *arg)
{
	(void)arg;
	while (!stop) {
		if (++ticks == 5 && write(sv[1], "wake", 4) != 4)
			return;
		usleep(1000);
	}
}

static void reader(void *arg)
{
	char buf[8];
	(void)arg;
	ssize_t n = read(sv[0], buf, sizeof(buf));
	parked = n == 4 && ticks >= 5;
	stop = 1;
}

int main(void)
{
	struct runtime *rt;
	struct timeval tv = { 10, 0 };

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0 ||
	    setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0)
		return 2;
	int rc = runtime_create(&rt, NULL);
	if (rc == -ENOSYS || rc == -EOPNOTSUPP)
		return 77;
	if (rc < 0 || runtime_spawn(rt, reader, NULL) < 0 || runtime_spawn(rt, counter, NULL) < 0)
		return 2;
	rc = runtime_run(rt);
	runtime_destroy(rt);
	puts(parked ? "parked" : "blocked");
	return rc == 0 && parked ? 0 : 1;
}
