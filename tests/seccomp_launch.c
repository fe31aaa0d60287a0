/* SPDX-License-Identifier: MIT */
/*
 * seccomp_launch - run a command where io_uring is forbidden, as in a
 * default Docker container (moby's profile since 25.0) or a containerd
 * 2.0 RuntimeDefault pod: a seccomp filter answers io_uring_setup,
 * io_uring_enter and io_uring_register with EPERM and lets every other
 * system call through. The filter is inherited by every process the
 * command starts.
 *
 *   seccomp_launch [--errno ENOSYS] COMMAND [ARGS...]
 *
 * --errno ENOSYS answers ENOSYS instead, as some other profiles do.
 * Exit status: the command's; 126 if the filter or exec failed.
 */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define ARCH AUDIT_ARCH_AARCH64
#else
#error "seccomp_launch: x86_64 and aarch64 only"
#endif

/* The io_uring calls have the same numbers on every architecture. */
_Static_assert(__NR_io_uring_setup == 425 && __NR_io_uring_enter == 426 &&
               __NR_io_uring_register == 427, "io_uring's system call numbers");

static int install(int err)
{
	struct sock_filter prog[] = {
		/* Another architecture's calls: let them be (none come here). */
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ARCH, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, __NR_io_uring_setup, 0, 2),
		BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, __NR_io_uring_register, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (unsigned)err),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog fprog = { .len = sizeof(prog) / sizeof(prog[0]), .filter = prog };

	/* Without privileges a filter needs no_new_privs, as runc sets it. */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -errno;
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fprog) < 0)
		return -errno;
	return 0;
}

int main(int argc, char **argv)
{
	int err = EPERM, first = 1;

	if (argc > 2 && !strcmp(argv[1], "--errno")) {
		if (strcmp(argv[2], "ENOSYS") && strcmp(argv[2], "EPERM")) {
			fprintf(stderr, "seccomp_launch: --errno: EPERM or ENOSYS\n");
			return 126;
		}
		err = strcmp(argv[2], "ENOSYS") ? EPERM : ENOSYS;
		first = 3;
	}
	if (first >= argc) {
		fprintf(stderr, "usage: seccomp_launch [--errno ENOSYS] COMMAND [ARGS...]\n");
		return 126;
	}
	int rc = install(err);
	if (rc < 0) {
		fprintf(stderr, "seccomp_launch: filter: %s\n", strerror(-rc));
		return 126;
	}
	execvp(argv[first], argv + first);
	fprintf(stderr, "seccomp_launch: %s: %s\n", argv[first], strerror(errno));
	return 126;
}
