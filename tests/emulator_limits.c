/* SPDX-License-Identifier: MIT */
/*
 * emulator_limits.c - which of the limits that tests/qemu.skip names hold
 * where this program runs: one word per line for each that does, nothing
 * for the others. build.sh runs it under qemu-user beside the aarch64
 * suites and skips only the tests whose limit it printed, so that a skip
 * is never taken for an emulator's limit that is not there (a newer qemu,
 * binfmt_misc), and a real kernel prints nothing. Plain libc, no runtime.
 *
 *   madvise_guard_broken   madvise(MADV_GUARD_INSTALL) succeeds, yet a
 *                          write to the page does not end in SIGSEGV
 *                          (qemu-user 7.2 passes the advice to the host,
 *                          then spins on the host's fault: killed after 5 s)
 *   host_syscall_numbers   /proc/self/task/TID/syscall of a thread blocked
 *                          in read(2) does not name read's number here
 *   no_guest_exec          this program cannot execve itself (an emulator
 *                          with no binfmt_misc entry runs only the host's)
 *   accept4_flags_dropped  accept4 with a flag it does not know does not
 *                          answer EINVAL
 */
#define _GNU_SOURCE /* accept4 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define MADV_GUARD_INSTALL_ 102

/* Does a write to a page madvised as a guard fail to end in SIGSEGV? In
 * a child, which installs the guard itself: under qemu the parent must
 * never hold such a page (qemu touching it would spin too). */
static int madvise_guard_broken(void)
{
	int status = 0;
	pid_t done = 0, pid = fork();

	if (pid == 0) {
		size_t page = (size_t)sysconf(_SC_PAGESIZE);
		char *p = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		               -1, 0);
		if (p == MAP_FAILED || madvise(p, page, MADV_GUARD_INSTALL_) != 0)
			_exit(2); /* no such advice: mprotect guards, which work */
		*(volatile char *)p = 1;
		_exit(0);
	}
	for (int i = 0; i < 500 && pid > 0 && !done; i++) {
		usleep(10000);
		done = waitpid(pid, &status, WNOHANG);
	}
	if (pid > 0 && !done) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
	}
	return !(WIFEXITED(status) && WEXITSTATUS(status) == 2) &&
	       !(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV);
}

static int pipe_fd[2];
static volatile pid_t reader_tid;

static void *blocked_reader(void *arg)
{
	char c;

	(void)arg;
	reader_tid = (pid_t)syscall(SYS_gettid);
	if (read(pipe_fd[0], &c, 1) < 0)
		return NULL;
	return NULL;
}

/* The first field of /proc/self/task/TID/syscall, or -1. */
static long current_syscall(pid_t tid)
{
	char path[64];
	long nr = -1;

	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", (int)tid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	if (fscanf(f, "%ld", &nr) != 1)
		nr = -1;
	fclose(f);
	return nr;
}

/* Does the kernel's view of a thread blocked in read(2) name another
 * number than this program's SYS_read? */
static int host_syscall_numbers(void)
{
	pthread_t t;
	long nr = -1;

	if (pipe(pipe_fd) < 0 || pthread_create(&t, NULL, blocked_reader, NULL) != 0)
		return 0;
	for (int i = 0; i < 500 && nr != SYS_read; i++) { /* until it blocks: 5 s at most */
		usleep(10000);
		if (reader_tid)
			nr = current_syscall(reader_tid);
	}
	if (write(pipe_fd[1], "x", 1) != 1)
		return 0;
	pthread_join(t, NULL);
	return nr >= 0 && nr != SYS_read;
}

/* Can this program run itself again? */
static int no_guest_exec(const char *self)
{
	int status;
	pid_t pid = fork();

	if (pid == 0) {
		execl(self, self, "--exit", (char *)NULL);
		_exit(127);
	}
	return pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
	       WEXITSTATUS(status) != 0;
}

/* accept4 with an unknown flag on a listener with nothing queued: the
 * kernel says EINVAL before it looks at the queue. */
static int accept4_flags_dropped(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int l = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);

	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 1) < 0)
		return 0;
	int rc = accept4(l, NULL, NULL, 0x4000000);
	int err = errno;
	close(l);
	return rc >= 0 || err != EINVAL;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "--exit"))
		return 0;
	if (madvise_guard_broken())
		puts("madvise_guard_broken");
	if (host_syscall_numbers())
		puts("host_syscall_numbers");
	if (no_guest_exec("/proc/self/exe"))
		puts("no_guest_exec");
	if (accept4_flags_dropped())
		puts("accept4_flags_dropped");
	return 0;
}
