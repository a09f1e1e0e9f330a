/* wolfCrypt's DRBG behind one call, safe across fork(). */
#include <wolfssl/options.h>
#include <wolfssl/wolfcrypt/random.h>

#include <pthread.h>
#include <stdbool.h>

#include "log.h"
#include "random.h"

static WC_RNG random_rng;
static bool random_ready, random_forked;

/* A forked child must not draw the numbers its parent draws (the same
 * CIDs, the same tokens): it seeds a generator of its own. */
static void
random_atfork_child(void)
{
	random_forked = true;
}

void
random_bytes(uint8_t *buf, size_t len)
{
	if (random_forked && random_ready) {
		wc_FreeRng(&random_rng);
		random_ready = false;
	}
	random_forked = false;
	if (!random_ready) {
		static bool atfork;

		if (!atfork && pthread_atfork(NULL, NULL, random_atfork_child) != 0)
			fatalx("pthread_atfork failed");
		atfork = true;
		if (wc_InitRng(&random_rng) != 0)
			fatalx("cannot initialise the random number generator");
		random_ready = true;
	}
	if (wc_RNG_GenerateBlock(&random_rng, buf, (word32)len) != 0)
		fatalx("random number generator failed");
}
