/* Ed25519 keys through wolfCrypt: generation, base64 form, key files. */
#include <wolfssl/options.h>
#include <wolfssl/wolfcrypt/coding.h>
#include <wolfssl/wolfcrypt/ed25519.h>
#include <wolfssl/wolfcrypt/random.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "key.h"
#include "xmalloc.h"

void
key_encode(const uint8_t key[static KEY_LEN], char out[static KEY_B64_LEN + 1])
{
	word32 outlen = KEY_B64_LEN + 1;

	if (Base64_Encode_NoNl(key, KEY_LEN, (byte *)out, &outlen) != 0 ||
	    outlen != KEY_B64_LEN)
		outlen = 0;
	out[outlen] = '\0';
}

int
key_decode(const char *text, uint8_t key[static KEY_LEN])
{
	uint8_t buf[KEY_LEN + 4];
	char canon[KEY_B64_LEN + 1];
	word32 outlen = sizeof buf;
	size_t len;

	while (isspace((unsigned char)*text))
		text++;
	len = strlen(text);
	while (len > 0 && isspace((unsigned char)text[len - 1]))
		len--;
	if (len != KEY_B64_LEN)
		return -1;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)text[i];
		if (!isalnum(c) && c != '+' && c != '/' && c != '=')
			return -1;
	}
	if (Base64_Decode((const byte *)text, (word32)len, buf, &outlen) != 0 ||
	    outlen != KEY_LEN)
		return -1;
	/* Only the canonical spelling: the unused low bits of the last
	 * character must be zero, so equal keys compare equal as text. */
	key_encode(buf, canon);
	if (memcmp(canon, text, KEY_B64_LEN) != 0) {
		explicit_bzero(buf, sizeof buf);
		return -1;
	}
	memcpy(key, buf, KEY_LEN);
	explicit_bzero(buf, sizeof buf);
	return 0;
}

int
key_generate(uint8_t priv[static KEY_LEN])
{
	WC_RNG rng;
	int ret;

	if (wc_InitRng(&rng) != 0)
		return -1;
	ret = wc_RNG_GenerateBlock(&rng, priv, KEY_LEN);
	wc_FreeRng(&rng);
	return ret == 0 ? 0 : -1;
}

int
key_public(const uint8_t priv[static KEY_LEN], uint8_t pub[static KEY_LEN])
{
	ed25519_key k;
	int ret = -1;

	if (wc_ed25519_init(&k) != 0)
		return -1;
	if (wc_ed25519_import_private_only(priv, KEY_LEN, &k) == 0 &&
	    wc_ed25519_make_public(&k, pub, KEY_LEN) == 0)
		ret = 0;
	wc_ed25519_free(&k);
	return ret;
}

int
key_load_private(const char *path, uint8_t priv[static KEY_LEN], char **cause)
{
	char text[256];
	struct stat st;
	ssize_t n;
	int fd, ret = -1;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1) {
		xasprintf(cause, "%s: %s", path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) == -1) {
		xasprintf(cause, "%s: %s", path, strerror(errno));
		goto out;
	}
	if (st.st_mode & (S_IRWXG | S_IRWXO)) {
		xasprintf(cause, "%s: private key is accessible by group or others "
		    "(mode %04o); chmod 600 it", path, (unsigned)(st.st_mode & 07777));
		goto out;
	}
	n = read(fd, text, sizeof text - 1);
	if (n < 0) {
		xasprintf(cause, "%s: %s", path, strerror(errno));
		goto out;
	}
	text[n] = '\0';
	if (key_decode(text, priv) != 0) {
		xasprintf(cause, "%s: not a rove private key (expected %d base64 "
		    "characters, as written by 'rove genkey')", path, KEY_B64_LEN);
		goto out;
	}
	ret = 0;
out:
	explicit_bzero(text, sizeof text);
	close(fd);
	return ret;
}
