/* libFuzzer harness for common/config/cfg.c: both roles, errors, print round trip. */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/cfg.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

#define FUZZ_PATH "fuzz.conf"

/* cfg_print output as a heap string (caller frees). */
static char *
print_cfg(const struct cfg *cfg, size_t *len)
{
	char *text = NULL;
	FILE *f;

	f = open_memstream(&text, len);
	assert(f != NULL);
	cfg_print(cfg, f);
	assert(fclose(f) == 0);
	return text;
}

static void
check_errors(int r, const struct cfg_errors *errs, const char *path)
{
	size_t plen = strlen(path);

	assert(r == 0 || r == -1);
	/* Valid means no messages; invalid means at least one. */
	assert((r == 0) == (errs->n == 0));
	for (size_t i = 0; i < errs->n; i++) {
		assert(errs->msg[i] != NULL);
		assert(strncmp(errs->msg[i], path, plen) == 0);
		assert(errs->msg[i][plen] == ':');
	}
}

/* A valid configuration prints as text that parses back and prints the
 * same again. */
static void
check_reprint(const struct cfg *cfg, enum cfg_role role)
{
	struct cfg again;
	struct cfg_errors errs;
	char *text, *text2;
	size_t len, len2;
	int r;

	text = print_cfg(cfg, &len);
	memset(&again, 0, sizeof again);
	memset(&errs, 0, sizeof errs);
	r = cfg_load_buffer("reprint.conf", text, len, role, &again, &errs);
	if (r != 0) {
		for (size_t i = 0; i < errs.n; i++)
			fprintf(stderr, "%s\n", errs.msg[i]);
		fprintf(stderr, "--- printed:\n%s---\n", text);
	}
	assert(r == 0);
	text2 = print_cfg(&again, &len2);
	if (len != len2 || memcmp(text, text2, len) != 0)
		fprintf(stderr, "--- first:\n%s--- second:\n%s---\n", text, text2);
	assert(len == len2 && memcmp(text, text2, len) == 0);
	free(text);
	free(text2);
	cfg_clear(&again);
	cfg_errors_clear(&errs);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const enum cfg_role roles[] = { CFG_ROLE_SERVER, CFG_ROLE_CLIENT };
	struct cfg cfg;
	struct cfg_errors errs;
	int r;

	for (size_t i = 0; i < sizeof roles / sizeof roles[0]; i++) {
		memset(&cfg, 0, sizeof cfg);
		memset(&errs, 0, sizeof errs);
		r = cfg_load_buffer(FUZZ_PATH, (const char *)data, size,
		    roles[i], &cfg, &errs);
		check_errors(r, &errs, FUZZ_PATH);
		if (r == 0)
			check_reprint(&cfg, roles[i]);
		cfg_clear(&cfg);
		cfg_errors_clear(&errs);
	}
	return 0;
}
