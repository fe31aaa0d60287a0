/* SPDX-License-Identifier: MIT */
/*
 * fuzz_replay.c - runs saved inputs through a libFuzzer target's
 * LLVMFuzzerTestOneInput without libFuzzer, so that make check replays the
 * fuzzers' corpora and every crash they found (fuzz/regressions/) with the
 * ordinary compiler, in the plain, ASan and TSan builds alike. Linked with
 * one target: tests/replay_http_parser, tests/replay_http_server,
 * tests/replay_https_server, tests/replay_http_response,
 * tests/replay_h2_server (fuzz_http_server.c with -DFUZZ_H2).
 *
 *   replay_http_xxx FILE|DIR...   (a directory: its files, in name order)
 *
 * Each input is read into a buffer of exactly its size (so that ASan sees
 * a read past it) and run once. Exit 0 when every input ran; an input that
 * breaks one of the target's checks aborts or traps, as under libFuzzer.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static unsigned replayed;

static int replay_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	struct stat st;
	uint8_t *data;

	if (!f || fstat(fileno(f), &st) < 0) {
		perror(path);
		return -1;
	}
	data = malloc(st.st_size ? (size_t)st.st_size : 1);
	if (!data || fread(data, 1, (size_t)st.st_size, f) != (size_t)st.st_size) {
		fprintf(stderr, "%s: cannot read\n", path);
		fclose(f);
		free(data);
		return -1;
	}
	fclose(f);
	fprintf(stderr, "replay: %s\n", path); /* the last one named is the culprit */
	LLVMFuzzerTestOneInput(data, (size_t)st.st_size);
	free(data);
	replayed++;
	return 0;
}

static int only_files(const struct dirent *d)
{
	return d->d_name[0] != '.';
}

static int replay(const char *path)
{
	struct dirent **names;
	struct stat st;
	char full[4096];
	int n, rc = 0;

	if (stat(path, &st) < 0) {
		perror(path);
		return -1;
	}
	if (!S_ISDIR(st.st_mode))
		return replay_file(path);
	if ((n = scandir(path, &names, only_files, alphasort)) < 0) {
		perror(path);
		return -1;
	}
	for (int i = 0; i < n; i++) {
		snprintf(full, sizeof(full), "%s/%s", path, names[i]->d_name);
		if (rc == 0 && stat(full, &st) == 0 && S_ISREG(st.st_mode))
			rc = replay_file(full);
		free(names[i]);
	}
	free(names);
	return rc;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
		return 2;
	}
	if (LLVMFuzzerInitialize)
		LLVMFuzzerInitialize(&argc, &argv);
	for (int i = 1; i < argc; i++)
		if (replay(argv[i]) < 0)
			return 1;
	fprintf(stderr, "replay: %u inputs, all passed\n", replayed);
	return 0;
}
