/* Unit tests for common/base/key.c: base64 form, Ed25519 public keys, key files. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/key.h"

/* Vectors computed outside rove (Python's base64 module). */
#define SEQ_B64 "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
#define FF_B64 "//////////////////////////////////////////8="
/* RFC 8032 section 7.1, TEST 1 and TEST 2. */
#define RFC1_SECRET_B64 "nWGxne/9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A="
#define RFC1_PUBLIC_B64 "11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo="

static const uint8_t rfc1_secret[KEY_LEN] = {
	0x9d, 0x61, 0xb1, 0x9d, 0xef, 0xfd, 0x5a, 0x60, 0xba, 0x84, 0x4a, 0xf4,
	0x92, 0xec, 0x2c, 0xc4, 0x44, 0x49, 0xc5, 0x69, 0x7b, 0x32, 0x69, 0x19,
	0x70, 0x3b, 0xac, 0x03, 0x1c, 0xae, 0x7f, 0x60,
};
static const uint8_t rfc1_public[KEY_LEN] = {
	0xd7, 0x5a, 0x98, 0x01, 0x82, 0xb1, 0x0a, 0xb7, 0xd5, 0x4b, 0xfe, 0xd3,
	0xc9, 0x64, 0x07, 0x3a, 0x0e, 0xe1, 0x72, 0xf3, 0xda, 0xa6, 0x23, 0x25,
	0xaf, 0x02, 0x1a, 0x68, 0xf7, 0x07, 0x51, 0x1a,
};
static const uint8_t rfc2_secret[KEY_LEN] = {
	0x4c, 0xcd, 0x08, 0x9b, 0x28, 0xff, 0x96, 0xda, 0x9d, 0xb6, 0xc3, 0x46,
	0xec, 0x11, 0x4e, 0x0f, 0x5b, 0x8a, 0x31, 0x9f, 0x35, 0xab, 0xa6, 0x24,
	0xda, 0x8c, 0xf6, 0xed, 0x4f, 0xb8, 0xa6, 0xfb,
};
static const uint8_t rfc2_public[KEY_LEN] = {
	0x3d, 0x40, 0x17, 0xc3, 0xe8, 0x43, 0x89, 0x5a, 0x92, 0xb7, 0x0a, 0xa7,
	0x4d, 0x1b, 0x7e, 0xbc, 0x9c, 0x98, 0x2c, 0xcf, 0x2e, 0xc4, 0x96, 0x8c,
	0xc0, 0xcd, 0x55, 0xf1, 0x2a, 0xf4, 0x66, 0x0c,
};

static void
seq_key(uint8_t k[static KEY_LEN])
{
	for (size_t i = 0; i < KEY_LEN; i++)
		k[i] = (uint8_t)i;
}

static void
test_encode_vectors(void **state)
{
	uint8_t k[KEY_LEN];
	char out[KEY_B64_LEN + 1];

	(void)state;
	seq_key(k);
	memset(out, 'x', sizeof out);
	key_encode(k, out);
	assert_string_equal(out, SEQ_B64);
	assert_int_equal(strlen(out), KEY_B64_LEN);

	memset(k, 0xff, sizeof k);
	key_encode(k, out);
	assert_string_equal(out, FF_B64);

	key_encode(rfc1_secret, out);
	assert_string_equal(out, RFC1_SECRET_B64);
	key_encode(rfc1_public, out);
	assert_string_equal(out, RFC1_PUBLIC_B64);
}

static void
test_decode_vectors(void **state)
{
	uint8_t k[KEY_LEN], want[KEY_LEN];

	(void)state;
	seq_key(want);
	assert_int_equal(key_decode(SEQ_B64, k), 0);
	assert_memory_equal(k, want, KEY_LEN);

	memset(want, 0xff, sizeof want);
	assert_int_equal(key_decode(FF_B64, k), 0);
	assert_memory_equal(k, want, KEY_LEN);

	assert_int_equal(key_decode(RFC1_PUBLIC_B64, k), 0);
	assert_memory_equal(k, rfc1_public, KEY_LEN);
}

static void
test_round_trip(void **state)
{
	uint8_t k[KEY_LEN], back[KEY_LEN];
	char text[KEY_B64_LEN + 1];

	(void)state;
	/* Every byte value at every position, in a few rotations. */
	for (unsigned r = 0; r < 256; r += 7) {
		for (size_t i = 0; i < KEY_LEN; i++)
			k[i] = (uint8_t)(r + i * 37);
		key_encode(k, text);
		assert_int_equal(strlen(text), KEY_B64_LEN);
		assert_int_equal(text[KEY_B64_LEN - 1], '=');
		memset(back, 0, sizeof back);
		assert_int_equal(key_decode(text, back), 0);
		assert_memory_equal(back, k, KEY_LEN);
	}
}

static void
test_decode_whitespace(void **state)
{
	uint8_t k[KEY_LEN], want[KEY_LEN];

	(void)state;
	seq_key(want);
	assert_int_equal(key_decode(SEQ_B64 "\n", k), 0);
	assert_memory_equal(k, want, KEY_LEN);
	memset(k, 0, sizeof k);
	assert_int_equal(key_decode("  \t" SEQ_B64 " \r\n\n", k), 0);
	assert_memory_equal(k, want, KEY_LEN);
	memset(k, 0, sizeof k);
	assert_int_equal(key_decode("\n\n" SEQ_B64, k), 0);
	assert_memory_equal(k, want, KEY_LEN);
}

static void
test_decode_rejects(void **state)
{
	uint8_t k[KEY_LEN], sentinel[KEY_LEN];
	static const char *const bad[] = {
		"",
		"   \n",
		/* 43 and 45 characters */
		"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8",
		"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8==",
		/* 88 characters: two keys */
		SEQ_B64 SEQ_B64,
		/* base64 of 31 and of 33 bytes: 44 characters each */
		"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA==",
		"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
		/* base64url alphabet, and other strangers */
		"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwd-h8=",
		"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwd_h8=",
		"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwd.h8=",
		"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwd\x80h8=",
		/* whitespace inside: 44 characters with a space among them */
		"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwd h8=",
		/* padding in the middle */
		"AAECAwQF=gcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
		"============================================",
		/* SEQ_B64 with the two unused low bits of the last character
		 * set: the same bytes, but not the form key_encode writes, so
		 * one key would have several spellings */
		"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh9=",
		"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh/=",
	};

	(void)state;
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		memset(k, 0xa5, sizeof k);
		memset(sentinel, 0xa5, sizeof sentinel);
		if (key_decode(bad[i], k) != -1)
			fail_msg("key_decode accepted bad[%zu] \"%s\"", i, bad[i]);
		/* A refused key leaves the output alone. */
		assert_memory_equal(k, sentinel, KEY_LEN);
	}
}

static void
test_public_rfc8032(void **state)
{
	uint8_t pub[KEY_LEN];

	(void)state;
	memset(pub, 0, sizeof pub);
	assert_int_equal(key_public(rfc1_secret, pub), 0);
	assert_memory_equal(pub, rfc1_public, KEY_LEN);
	memset(pub, 0, sizeof pub);
	assert_int_equal(key_public(rfc2_secret, pub), 0);
	assert_memory_equal(pub, rfc2_public, KEY_LEN);
}

static void
test_generate(void **state)
{
	uint8_t a[KEY_LEN], b[KEY_LEN], zero[KEY_LEN], pa[KEY_LEN], pb[KEY_LEN];

	(void)state;
	memset(zero, 0, sizeof zero);
	memset(a, 0, sizeof a);
	memset(b, 0, sizeof b);
	assert_int_equal(key_generate(a), 0);
	assert_int_equal(key_generate(b), 0);
	assert_memory_not_equal(a, zero, KEY_LEN);
	assert_memory_not_equal(a, b, KEY_LEN);
	assert_int_equal(key_public(a, pa), 0);
	assert_int_equal(key_public(b, pb), 0);
	assert_memory_not_equal(pa, pb, KEY_LEN);
	/* The public key is a function of the private key. */
	assert_int_equal(key_public(a, pb), 0);
	assert_memory_equal(pa, pb, KEY_LEN);
}

/* Key files live in a private temporary directory per test. */
struct keydir {
	char dir[64];
	char path[128];
};

static int
keydir_setup(void **state)
{
	struct keydir *kd = calloc(1, sizeof *kd);

	if (kd == NULL)
		return -1;
	snprintf(kd->dir, sizeof kd->dir, "/tmp/rove-test-key.XXXXXX");
	if (mkdtemp(kd->dir) == NULL) {
		free(kd);
		return -1;
	}
	snprintf(kd->path, sizeof kd->path, "%s/private.key", kd->dir);
	*state = kd;
	return 0;
}

static int
keydir_teardown(void **state)
{
	struct keydir *kd = *state;

	unlink(kd->path);
	rmdir(kd->dir);
	free(kd);
	return 0;
}

static void
write_key_file(const char *path, const char *text, mode_t mode)
{
	int fd;

	unlink(path);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	assert_true(fd != -1);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	/* Explicitly, so the umask cannot interfere. */
	assert_int_equal(fchmod(fd, mode), 0);
	close(fd);
}

static void
test_load_ok(void **state)
{
	struct keydir *kd = *state;
	uint8_t k[KEY_LEN];
	char *cause = NULL;

	write_key_file(kd->path, RFC1_SECRET_B64 "\n", 0600);
	memset(k, 0, sizeof k);
	assert_int_equal(key_load_private(kd->path, k, &cause), 0);
	assert_null(cause);
	assert_memory_equal(k, rfc1_secret, KEY_LEN);

	/* 0400 is as private as 0600, and no newline is needed. */
	write_key_file(kd->path, RFC1_SECRET_B64, 0400);
	memset(k, 0, sizeof k);
	assert_int_equal(key_load_private(kd->path, k, &cause), 0);
	assert_null(cause);
	assert_memory_equal(k, rfc1_secret, KEY_LEN);
}

static void
expect_refused(const char *path, const char *want_cause)
{
	uint8_t k[KEY_LEN];
	char *cause = NULL;

	assert_int_equal(key_load_private(path, k, &cause), -1);
	assert_non_null(cause);
	assert_string_equal(cause, want_cause);
	free(cause);
}

static void
test_load_modes(void **state)
{
	struct keydir *kd = *state;
	static const mode_t modes[] = { 0640, 0604, 0660, 0644, 0610, 0601, 0700 };
	char want[256];

	for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
		write_key_file(kd->path, RFC1_SECRET_B64 "\n", modes[i]);
		if (modes[i] == 0700) {
			/* The owner's execute bit concerns nobody else. */
			uint8_t k[KEY_LEN];
			char *cause = NULL;
			assert_int_equal(key_load_private(kd->path, k, &cause), 0);
			assert_null(cause);
			continue;
		}
		snprintf(want, sizeof want, "%s: private key is accessible by "
		    "group or others (mode %04o); chmod 600 it", kd->path,
		    (unsigned)modes[i]);
		expect_refused(kd->path, want);
	}
}

static void
test_load_missing(void **state)
{
	struct keydir *kd = *state;
	char want[256];

	unlink(kd->path);
	snprintf(want, sizeof want, "%s: No such file or directory", kd->path);
	expect_refused(kd->path, want);
}

static void
test_load_garbage(void **state)
{
	struct keydir *kd = *state;
	static const char *const contents[] = {
		"",
		"\n",
		"not a key at all\n",
		/* a 31-byte key, a 33-byte key, two keys, a url-safe key */
		"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA==\n",
		"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\n",
		SEQ_B64 "\n" SEQ_B64 "\n",
		"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwd_h8=\n",
		/* a PEM file is not our format */
		"-----BEGIN PRIVATE KEY-----\n"
		"MC4CAQAwBQYDK2VwBCIEIJ1hsZ3v/VpguoRK9JLsLMREScVpezJpGXA7rAMcrn9g\n"
		"-----END PRIVATE KEY-----\n",
	};
	char want[256];

	snprintf(want, sizeof want, "%s: not a rove private key (expected 44 "
	    "base64 characters, as written by 'rove genkey')", kd->path);
	for (size_t i = 0; i < sizeof contents / sizeof contents[0]; i++) {
		write_key_file(kd->path, contents[i], 0600);
		expect_refused(kd->path, want);
	}
}

static void
test_load_binary(void **state)
{
	struct keydir *kd = *state;
	uint8_t junk[600];
	char want[256];
	int fd;

	/* Binary content longer than the read buffer, NULs included. */
	for (size_t i = 0; i < sizeof junk; i++)
		junk[i] = (uint8_t)(i * 131 + 7);
	junk[10] = 0;
	unlink(kd->path);
	fd = open(kd->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	assert_true(fd != -1);
	assert_int_equal(write(fd, junk, sizeof junk), (ssize_t)sizeof junk);
	assert_int_equal(fchmod(fd, 0600), 0);
	close(fd);
	snprintf(want, sizeof want, "%s: not a rove private key (expected 44 "
	    "base64 characters, as written by 'rove genkey')", kd->path);
	expect_refused(kd->path, want);
}

static void
test_load_directory(void **state)
{
	struct keydir *kd = *state;
	char want[256];

	/* The temporary directory is 0700: it passes the mode check and then
	 * cannot be read. */
	snprintf(want, sizeof want, "%s: Is a directory", kd->dir);
	expect_refused(kd->dir, want);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_encode_vectors),
		cmocka_unit_test(test_decode_vectors),
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_decode_whitespace),
		cmocka_unit_test(test_decode_rejects),
		cmocka_unit_test(test_public_rfc8032),
		cmocka_unit_test(test_generate),
		cmocka_unit_test_setup_teardown(test_load_ok, keydir_setup,
		    keydir_teardown),
		cmocka_unit_test_setup_teardown(test_load_modes, keydir_setup,
		    keydir_teardown),
		cmocka_unit_test_setup_teardown(test_load_missing, keydir_setup,
		    keydir_teardown),
		cmocka_unit_test_setup_teardown(test_load_garbage, keydir_setup,
		    keydir_teardown),
		cmocka_unit_test_setup_teardown(test_load_binary, keydir_setup,
		    keydir_teardown),
		cmocka_unit_test_setup_teardown(test_load_directory, keydir_setup,
		    keydir_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
