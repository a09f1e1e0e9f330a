/* QUIC over UDP through ngtcp2, one of the session's two transports
 * (quic.c holds what they share): ngtcp2's callbacks, the packet write
 * loop and its pacing, the expiry timer, 0-RTT, tokens and migration. */
#include <wolfssl/options.h>
#include <wolfssl/ssl.h>

#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <ngtcp2/ngtcp2_crypto_wolfssl.h>

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/random.h"
#include "base/xmalloc.h"
#include "dgramq.h"
#include "quic-crypto.h"
#include "quic-int.h"
#include "quic.h"
#include "wire/proto.h"

static const struct quic_transport quic_udp_transport;

static size_t dgram_max_for(struct quic_conn *, size_t udp);
static size_t path_udp_now(struct quic_conn *);


int
quic_tls_new_session(WOLFSSL *ssl, WOLFSSL_SESSION *session)
{
	ngtcp2_crypto_conn_ref *ref = wolfSSL_get_app_data(ssl);
	const ngtcp2_transport_params *rp;
	uint8_t params[512], *der = NULL, *p;
	struct quic_conn *qc;
	ngtcp2_ssize plen;
	int len;

	if (ref == NULL)
		return 0;
	qc = ref->user_data;
	if (qc->cbs->new_session == NULL ||
	    (rp = ngtcp2_conn_get_remote_transport_params(qc->conn)) == NULL)
		return 0;
	(void)rp;
	/* Only what 0-RTT needs to remember (RFC 9000, 7.4.1). */
	plen = ngtcp2_conn_encode_0rtt_transport_params(qc->conn, params,
	    sizeof params);
	len = wolfSSL_i2d_SSL_SESSION(session, NULL);
	log_debug("%s: session %d bytes, parameters %zd bytes", __func__, len,
	    (ssize_t)plen);
	if (plen < 0 || len <= 0)
		return 0;
	der = xmalloc((size_t)len);
	p = der;
	if (wolfSSL_i2d_SSL_SESSION(session, &p) == len)
		qc->cbs->new_session(qc, der, (size_t)len, params, (size_t)plen, qc->arg);
	free(der);
	return 0; /* we keep no reference to `session` */
}

static ngtcp2_conn *
get_conn(ngtcp2_crypto_conn_ref *ref)
{
	return ((struct quic_conn *)ref->user_data)->conn;
}

static void
rand_cb(uint8_t *dest, size_t len, const ngtcp2_rand_ctx *ctx)
{
	(void)ctx;
	random_bytes(dest, len);
}

static int
get_new_connection_id_cb(ngtcp2_conn *conn, ngtcp2_cid *cid, uint8_t *token,
    size_t cidlen, void *user_data)
{
	struct quic_conn *qc = user_data;

	(void)conn;
	if (qc->role == QUIC_ROLE_SERVER && cidlen == CID_LEN)
		cid_make(qc->server_id, cid->data);
	else
		random_bytes(cid->data, cidlen);
	cid->datalen = cidlen;
	if (ngtcp2_crypto_generate_stateless_reset_token(token, qc->reset_secret,
	    QUIC_RESET_SECRET_LEN, cid) != 0)
		return NGTCP2_ERR_CALLBACK_FAILURE;
	if (qc->cbs->cid_add != NULL)
		qc->cbs->cid_add(qc, cid, qc->arg);
	return 0;
}

static int
remove_connection_id_cb(ngtcp2_conn *conn, const ngtcp2_cid *cid, void *user_data)
{
	struct quic_conn *qc = user_data;

	(void)conn;
	if (qc->cbs->cid_remove != NULL)
		qc->cbs->cid_remove(qc, cid, qc->arg);
	return 0;
}

static int
stream_cmp_id(const void *a, const void *b)
{
	int64_t x = (*(struct quic_stream *const *)a)->id;
	int64_t y = (*(struct quic_stream *const *)b)->id;

	return x < y ? -1 : x > y;
}

/* The server rejected our 0-RTT: ngtcp2 forgot every stream opened in it
 * and will not send their bytes. Open them again, in the order of their
 * IDs, which gives each its old ID back (ngtcp2 counts from 0 again), and
 * queue all their bytes anew: the owners never notice. Nothing was
 * acknowledged, since the server could not read those packets. */
static int
reopen_early_streams(struct quic_conn *qc)
{
	struct quic_stream *s, **v;
	size_t n = 0, i = 0;
	int64_t id;
	int ret = -1;

	LIST_FOREACH(s, &qc->streams, entry) {
		if (ngtcp2_conn_is_local_stream(qc->conn, s->id))
			n++;
	}
	if (n == 0)
		return 0;
	v = xcalloc(n, sizeof *v);
	LIST_FOREACH(s, &qc->streams, entry) {
		if (ngtcp2_conn_is_local_stream(qc->conn, s->id))
			v[i++] = s;
	}
	qsort(v, n, sizeof *v, stream_cmp_id);
	for (i = 0; i < n; i++) {
		s = v[i];
		/* A stream already gone leaves a gap: fill it with one that
		 * ends at once, so the IDs after it stay the same. */
		do {
			if (ngtcp2_conn_open_bidi_stream(qc->conn, &id, NULL) != 0)
				goto out;
			if (id < s->id)
				(void)ngtcp2_conn_shutdown_stream(qc->conn, 0, id, 0);
		} while (id < s->id);
		if (id != s->id || s->acked != 0)
			goto out;
		s->send_off = 0;
		s->cur = s->head;
		s->fin_sent = false;
		s->blocked = false;
		if (s->reset)
			(void)ngtcp2_conn_shutdown_stream(qc->conn, 0, id, s->reset_code);
		quic_stream_set_pending(qc, s);
	}
	quic_mark_dirty(qc);
	ret = 0;
out:
	free(v);
	return ret;
}

static int
handshake_completed_cb(ngtcp2_conn *conn, void *user_data)
{
	struct quic_conn *qc = user_data;

	qc->state = QUIC_STATE_ESTABLISHED;
	qc->early_ready = false;
	qc->stats.kex_group = tls_group_name(qc->ssl);
	if (qc->stats.early_attempted) {
		qc->stats.early_accepted =
		    wolfSSL_get_early_data_status(qc->ssl) == SSL_EARLY_DATA_ACCEPTED;
		/* wolfSSL tells only now; ngtcp2 must drop what 0-RTT queued,
		 * and the streams opened in 0-RTT start again in 1-RTT. */
		if (!qc->stats.early_accepted) {
			(void)ngtcp2_conn_tls_early_data_rejected(conn);
			if (reopen_early_streams(qc) != 0) {
				log_warn("cannot reopen the streams of rejected 0-RTT");
				return NGTCP2_ERR_CALLBACK_FAILURE;
			}
		}
	} else if (qc->role == QUIC_ROLE_SERVER)
		qc->stats.early_accepted = qc->early_rx;
	if (qc->cbs->handshake_done != NULL)
		qc->cbs->handshake_done(qc, qc->arg);
	return 0;
}

static int
recv_datagram_cb(ngtcp2_conn *conn, uint32_t flags, const uint8_t *data,
    size_t len, void *user_data)
{
	struct quic_conn *qc = user_data;

	(void)conn;
	(void)flags;
	qc->stats.rx_dgrams++;
	qc->stats.rx_dgram_bytes += len;
	if (qc->cbs->datagram != NULL)
		qc->cbs->datagram(qc, data, len, qc->arg);
	return 0;
}

static int
recv_stream_data_cb(ngtcp2_conn *conn, uint32_t flags, int64_t stream_id,
    uint64_t offset, const uint8_t *data, size_t len, void *user_data,
    void *stream_user_data)
{
	struct quic_conn *qc = user_data;
	struct quic_stream *s = quic_stream_get(qc, stream_id);

	(void)conn;
	(void)offset;
	(void)stream_user_data;
	/* Credit is returned only when the owner has passed the bytes on
	 * (quic_conn_stream_consume): that is how backpressure reaches the
	 * sender. */
	if (qc->cbs->stream_data != NULL &&
	    qc->cbs->stream_data(qc, stream_id, data, len,
	    (flags & NGTCP2_STREAM_DATA_FLAG_FIN) != 0, s->arg, qc->arg) != 0)
		return NGTCP2_ERR_CALLBACK_FAILURE;
	return 0;
}

static int
lost_datagram_cb(ngtcp2_conn *conn, uint64_t dgram_id, void *user_data)
{
	struct quic_conn *qc = user_data;

	(void)conn;
	(void)dgram_id;
	qc->stats.dgram_lost++;
	return 0;
}

static int
acked_stream_data_offset_cb(ngtcp2_conn *conn, int64_t stream_id,
    uint64_t offset, uint64_t datalen, void *user_data, void *stream_user_data)
{
	struct quic_conn *qc = user_data;
	struct quic_stream *s;

	(void)conn;
	(void)stream_user_data;
	if ((s = quic_stream_find(qc, stream_id)) == NULL)
		return 0;
	/* ngtcp2 reports the acknowledged prefix growing in order. */
	quic_stream_acked_to(qc, s, offset + datalen);
	return 0;
}

static int
stream_close_cb(ngtcp2_conn *conn, uint32_t flags, int64_t stream_id,
    uint64_t app_error_code, void *user_data, void *stream_user_data)
{
	struct quic_conn *qc = user_data;
	struct quic_stream *s;

	(void)stream_user_data;
	/* The peer may open another in its place: ngtcp2 leaves the stream
	 * credit (MAX_STREAMS) to us, and without it a connection could only
	 * ever carry initial_max_streams_bidi streams from its peer. */
	if (!ngtcp2_conn_is_local_stream(conn, stream_id))
		ngtcp2_conn_extend_max_streams_bidi(conn, 1);
	if ((s = quic_stream_find(qc, stream_id)) == NULL)
		return 0;
	if (qc->cbs->stream_close != NULL)
		qc->cbs->stream_close(qc, stream_id,
		    (flags & NGTCP2_STREAM_CLOSE_FLAG_APP_ERROR_CODE_SET) ?
		    app_error_code : 0, s->arg, qc->arg);
	quic_stream_free(qc, s);
	return 0;
}

static int
extend_max_stream_data_cb(ngtcp2_conn *conn, int64_t stream_id,
    uint64_t max_data, void *user_data, void *stream_user_data)
{
	struct quic_conn *qc = user_data;
	struct quic_stream *s;

	(void)conn;
	(void)max_data;
	(void)stream_user_data;
	if ((s = quic_stream_find(qc, stream_id)) != NULL) {
		s->blocked = false;
		quic_stream_set_pending(qc, s);
		quic_mark_dirty(qc);
	}
	return 0;
}

static int
stream_reset_cb(ngtcp2_conn *conn, int64_t stream_id, uint64_t final_size,
    uint64_t app_error_code, void *user_data, void *stream_user_data)
{
	struct quic_conn *qc = user_data;
	struct quic_stream *s;

	(void)conn;
	(void)final_size;
	(void)stream_user_data;
	if ((s = quic_stream_find(qc, stream_id)) != NULL && qc->cbs->stream_reset != NULL)
		qc->cbs->stream_reset(qc, stream_id, app_error_code, s->arg, qc->arg);
	return 0;
}

static int
path_validation_cb(ngtcp2_conn *conn, uint32_t flags, const ngtcp2_path *path,
    const ngtcp2_path *fallback_path, ngtcp2_path_validation_result res,
    void *user_data)
{
	struct quic_conn *qc = user_data;
	enum quic_path_result r;

	(void)conn;
	(void)flags;
	/* A failed migration falls back to the path in use before it
	 * (fallback_path); batch_for picks the socket by path, so nothing
	 * here needs it. */
	(void)fallback_path;
	switch (res) {
	case NGTCP2_PATH_VALIDATION_RESULT_SUCCESS:
		r = QUIC_PATH_OK;
		qc->stats.path_validated++;
		break;
	case NGTCP2_PATH_VALIDATION_RESULT_ABORTED:
		r = QUIC_PATH_ABORTED;
		qc->stats.path_aborted++;
		break;
	default:
		r = QUIC_PATH_FAILED;
		qc->stats.path_failed++;
		break;
	}
	if (qc->cbs->path_validated != NULL)
		qc->cbs->path_validated(qc, r, (const struct sockaddr *)path->local.addr,
		    (const struct sockaddr *)path->remote.addr, qc->arg);
	return 0;
}

static int
recv_tx_key_cb(ngtcp2_conn *conn, ngtcp2_encryption_level level, void *user_data)
{
	struct quic_conn *qc = user_data;

	(void)conn;
	if (level == NGTCP2_ENCRYPTION_LEVEL_0RTT && qc->role == QUIC_ROLE_CLIENT)
		qc->early_ready = true;
	return 0;
}

static int
recv_rx_key_cb(ngtcp2_conn *conn, ngtcp2_encryption_level level, void *user_data)
{
	struct quic_conn *qc = user_data;

	(void)conn;
	if (level == NGTCP2_ENCRYPTION_LEVEL_0RTT && qc->role == QUIC_ROLE_SERVER)
		qc->early_rx = true;
	/* Handshake keys come with the ServerHello: the server has seen
	 * the ClientHello that carried the ticket. */
	if (level == NGTCP2_ENCRYPTION_LEVEL_HANDSHAKE && qc->ticket_offered) {
		qc->ticket_offered = false;
		if (qc->cbs->ticket_spent != NULL)
			qc->cbs->ticket_spent(qc, qc->arg);
	}
	return 0;
}

static int
recv_new_token_cb(ngtcp2_conn *conn, const uint8_t *token, size_t len,
    void *user_data)
{
	struct quic_conn *qc = user_data;

	(void)conn;
	if (qc->cbs->new_token != NULL)
		qc->cbs->new_token(qc, token, len, qc->arg);
	return 0;
}

static int
recv_stateless_reset_cb(ngtcp2_conn *conn, const ngtcp2_pkt_stateless_reset *sr,
    void *user_data)
{
	struct quic_conn *qc = user_data;

	(void)conn;
	(void)sr;
	qc->stateless_reset = true;
	return 0;
}

/* CRYPTO frames go to TLS, while there is a TLS object: a server frees
 * its own once the handshake is over (release_tls), and after that a
 * client has nothing more to say in TLS (TLS 1.3 in QUIC has no
 * post-handshake messages from the client), so any that comes is a
 * protocol error. */
static int
recv_crypto_data_cb(ngtcp2_conn *conn, ngtcp2_encryption_level level,
    uint64_t offset, const uint8_t *data, size_t datalen, void *user_data)
{
	struct quic_conn *qc = user_data;
	int rv;

	if (qc->ssl == NULL)
		return NGTCP2_ERR_CALLBACK_FAILURE;
	rv = ngtcp2_crypto_recv_crypto_data_cb(conn, level, offset, data,
	    datalen, user_data);
	/* A whole ClientHello read and no handshake keys: TLS asked the
	 * client again for a key share (HelloRetryRequest). wolfSSL 5.9
	 * has then installed the 0-RTT key of a resuming client all the
	 * same: ngtcp2 would read the 0-RTT packets behind that ClientHello
	 * before it knows the version (an assertion: the process gone), or
	 * abort when the second ClientHello installs a 0-RTT key again. The
	 * first one's key and early data go here (RFC 8446 4.2.10: a retry
	 * rejects them); what wolfSSL makes of the second ClientHello is
	 * then an ordinary handshake. */
	if (rv == 0 && qc->role == QUIC_ROLE_SERVER &&
	    level == NGTCP2_ENCRYPTION_LEVEL_INITIAL && !qc->early_refused &&
	    ngtcp2_conn_get_negotiated_version(conn) == 0 &&
	    wolfSSL_get_early_data_status(qc->ssl) == WOLFSSL_EARLY_DATA_ACCEPTED) {
		qc->early_refused = true;
		qc->early_rx = false;
		rv = ngtcp2_conn_tls_early_data_rejected(conn);
	}
	return rv;
}

/* The server's TLS object has done its work once the handshake is over:
 * the keys are ngtcp2's (key updates derive the next ones from them),
 * the session ticket was sent with the handshake's last flight, and the
 * peer's key was pinned. wolfSSL keeps its handshake state, record keys,
 * a copy of the peer's certificate and buffers in it until it is freed,
 * about 10 KB per connection that an idle peer need not cost. */
static void
release_tls(struct quic_conn *qc)
{
	ngtcp2_conn_set_tls_native_handle(qc->conn, NULL);
	wolfSSL_free(qc->ssl);
	qc->ssl = NULL;
}

static void
ngtcp2_log_cb(void *user_data, const char *fmt, ...)
{
	va_list ap;

	(void)user_data;
	va_start(ap, fmt);
	log_vmsg(LOG_LEVEL_DEBUG, fmt, ap);
	va_end(ap);
}

static void
fill_callbacks(ngtcp2_callbacks *cb, enum quic_role role)
{
	memset(cb, 0, sizeof *cb);
	if (role == QUIC_ROLE_CLIENT) {
		cb->client_initial = ngtcp2_crypto_client_initial_cb;
		cb->recv_retry = ngtcp2_crypto_recv_retry_cb;
	} else
		cb->recv_client_initial = ngtcp2_crypto_recv_client_initial_cb;
	cb->recv_crypto_data = recv_crypto_data_cb;
	cb->encrypt = quic_crypto_encrypt;
	cb->decrypt = quic_crypto_decrypt;
	cb->hp_mask = quic_crypto_hp_mask;
	cb->update_key = ngtcp2_crypto_update_key_cb;
	cb->delete_crypto_aead_ctx = ngtcp2_crypto_delete_crypto_aead_ctx_cb;
	cb->delete_crypto_cipher_ctx = ngtcp2_crypto_delete_crypto_cipher_ctx_cb;
	cb->get_path_challenge_data = ngtcp2_crypto_get_path_challenge_data_cb;
	cb->version_negotiation = ngtcp2_crypto_version_negotiation_cb;
	cb->rand = rand_cb;
	cb->get_new_connection_id = get_new_connection_id_cb;
	cb->remove_connection_id = remove_connection_id_cb;
	cb->handshake_completed = handshake_completed_cb;
	cb->recv_datagram = recv_datagram_cb;
	cb->lost_datagram = lost_datagram_cb;
	cb->recv_stream_data = recv_stream_data_cb;
	cb->acked_stream_data_offset = acked_stream_data_offset_cb;
	cb->stream_close = stream_close_cb;
	cb->extend_max_stream_data = extend_max_stream_data_cb;
	cb->stream_reset = stream_reset_cb;
	/* No stream_stop_sending: in ngtcp2 0.12 it reports our own
	 * STOP_SENDING, not the peer's. The peer's ends our sending side,
	 * which write_one learns as NGTCP2_ERR_STREAM_SHUT_WR. */
	cb->recv_stateless_reset = recv_stateless_reset_cb;
	if (role == QUIC_ROLE_CLIENT)
		cb->recv_new_token = recv_new_token_cb;
	cb->path_validation = path_validation_cb;
	cb->recv_tx_key = recv_tx_key_cb;
	cb->recv_rx_key = recv_rx_key_cb;
}

/* UDP payloads to probe below the configured one, largest first: probing
 * stops at the first that gets through. A probe above what the peer takes
 * (its max_udp_payload_size, unknown until the handshake) is skipped at no
 * cost, so the usual peer limits are listed too: Ethernet over IPv4 and
 * IPv6, a 1280-byte IPv6 path; then PPPoE, fibre services, tunnels and
 * IPv6's minimum MTU, with IPv6 headers. */
static const uint16_t common_mtus[] = { 1500 - 28, 1500 - 48, 1492 - 48,
    1454 - 48, 1390 - 48, 1280, 1280 - 48 };

/* `probes` holds 1 + nitems(common_mtus) entries and must live as long
 * as the call that creates the connection (ngtcp2 copies it). */
/* ngtcp2 hands over qlog text as it goes (JSON-SEQ); written as is, up to
 * QUIC_QLOG_MAX_BYTES per connection so a long one cannot fill the disk. */
static void
qlog_write_cb(void *user_data, uint32_t flags, const void *data,
    size_t datalen)
{
	struct quic_conn *qc = user_data;
	ssize_t n;

	if (qc->qlog_fd == -1)
		return;
	if (qc->qlog_bytes + datalen > QUIC_QLOG_MAX_BYTES) {
		log_warn("qlog: a connection's file reached %d bytes; no more "
		    "of it is written", QUIC_QLOG_MAX_BYTES);
		flags |= NGTCP2_QLOG_WRITE_FLAG_FIN;
	} else if (datalen > 0) {
		n = write(qc->qlog_fd, data, datalen);
		if (n != (ssize_t)datalen) {
			log_warn("qlog: write: %s", n < 0 ? strerror(errno) :
			    "short write");
			flags |= NGTCP2_QLOG_WRITE_FLAG_FIN;
		} else
			qc->qlog_bytes += datalen;
	}
	if (flags & NGTCP2_QLOG_WRITE_FLAG_FIN) {
		close(qc->qlog_fd);
		qc->qlog_fd = -1;
	}
}

/* The connection's ID (qc->id), and QlogDir/ROLE-ID.sqlog, new (never
 * through a link), mode 0600: it names the connection IDs and timing of
 * the peer's traffic. */
static void
qlog_open(struct quic_conn *qc, const struct quic_settings *qs,
    const ngtcp2_cid *scid)
{
	char path[4096];

	for (size_t i = 0; i < scid->datalen; i++)
		snprintf(qc->id + 2 * i, 3, "%02x", scid->data[i]);
	qc->id[2 * scid->datalen] = '\0';
	if (qs->qlog_dir == NULL)
		return;
	snprintf(path, sizeof path, "%s/%s-%s.sqlog", qs->qlog_dir,
	    qs->role == QUIC_ROLE_SERVER ? "server" : "client", qc->id);
	qc->qlog_fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
	    O_CLOEXEC, 0600);
	if (qc->qlog_fd == -1)
		log_warn("qlog: %s: %s", path, strerror(errno));
}

static void
fill_settings(ngtcp2_settings *s, const struct quic_settings *qs,
    uint16_t *probes)
{
	ngtcp2_settings_default(s);
	s->initial_ts = clock_now();
	/* A reconnect knows the path: pace its first flight by the RTT seen
	 * last time, not the 333 ms default. */
	if (qs->initial_rtt_ns != 0)
		s->initial_rtt = qs->initial_rtt_ns;
	s->cc_algo = qs->cc;
	/* Packets start at QUIC's 1200 bytes and grow by DPLPMTUD (RFC 8899)
	 * up to the configured outer size, which is probed first (most paths
	 * take it at once), then the common smaller ones. */
	s->max_tx_udp_payload_size = qs->max_udp_payload;
	s->no_pmtud = 0;
	s->pmtud_probes = probes;
	s->pmtud_probeslen = 0;
	if (qs->max_udp_payload > NGTCP2_MAX_UDP_PAYLOAD_SIZE)
		probes[s->pmtud_probeslen++] = (uint16_t)qs->max_udp_payload;
	for (size_t i = 0; i < sizeof common_mtus / sizeof common_mtus[0]; i++) {
		if (common_mtus[i] < qs->max_udp_payload &&
		    common_mtus[i] > NGTCP2_MAX_UDP_PAYLOAD_SIZE)
			probes[s->pmtud_probeslen++] = common_mtus[i];
	}
	s->max_window = 64 * 1024 * 1024;
	/* A stream's window is also the bound on what a forward buffers
	 * toward a slow reader, so it does not auto-grow beyond it. */
	s->max_stream_window = qs->stream_window;
	if (qs->verbose)
		s->log_printf = ngtcp2_log_cb;
	if (qs->qlog_dir != NULL)
		s->qlog_write = qlog_write_cb;
	/* A client facing a dead server gives up and backs off instead of
	 * retrying its Initial for a whole idle timeout; a server drops a
	 * handshake that does not finish soon (admit.c caps how many run). */
	if (qs->role == QUIC_ROLE_CLIENT)
		s->handshake_timeout = 10 * NGTCP2_SECONDS;
	else
		s->handshake_timeout = QUIC_SERVER_HANDSHAKE_TIMEOUT;
	if (qs->tokenlen > 0) {
		s->token = qs->token;
		s->tokenlen = qs->tokenlen;
		if (qs->role == QUIC_ROLE_SERVER)
			s->token_type = qs->token_retry ? NGTCP2_TOKEN_TYPE_RETRY :
			    NGTCP2_TOKEN_TYPE_NEW_TOKEN;
	}
}

static void
fill_params(ngtcp2_transport_params *p, const struct quic_settings *qs)
{
	ngtcp2_transport_params_default(p);
	p->initial_max_data = 16 * 1024 * 1024;
	p->initial_max_stream_data_bidi_local = qs->stream_window;
	p->initial_max_stream_data_bidi_remote = qs->stream_window;
	p->initial_max_stream_data_uni = 0;
	p->initial_max_streams_bidi = 256;
	p->initial_max_streams_uni = 0;
	p->max_idle_timeout = (uint64_t)qs->idle_timeout_s * NGTCP2_SECONDS;
	p->active_connection_id_limit = 8;
	p->max_datagram_frame_size = 65535;
	p->max_udp_payload_size = qs->max_udp_payload;
	/* RFC 9287: either end may then send the fixed "QUIC bit" as 0 at
	 * random (ngtcp2 does so when the peer said it takes it), so that
	 * middleboxes cannot come to rely on it. */
	p->grease_quic_bit = 1;
}

static void timer_cb(evutil_socket_t, short, void *);

static struct quic_conn *
conn_alloc(struct event_base *base, const struct quic_settings *qs,
    const struct quic_conn_cbs *cbs, void *arg, struct udp_batch *batch,
    const struct sockaddr *remote, socklen_t remotelen)
{
	struct quic_conn *qc = quic_conn_alloc(base, qs, cbs, arg, remote,
	    remotelen, &quic_udp_transport);

	qc->conn_ref.get_conn = get_conn;
	qc->batch = batch;
	memcpy(&qc->local, &batch->sock->local, batch->sock->locallen);
	qc->path.local.addrlen = batch->sock->locallen;
	dgramq_init(&qc->dq, QUIC_DGRAM_QUEUE, qs->max_udp_payload);
	qc->timer = evtimer_new(base, timer_cb, qc);
	return qc;
}

/* Offer the remembered session; with early data, 0-RTT keys follow and
 * the server's remembered transport parameters bound what we may send. */
static void
resume_session(struct quic_conn *qc, const struct quic_resume *r)
{
	const unsigned char *p = r->session;
	WOLFSSL_SESSION *sess;

	sess = wolfSSL_d2i_SSL_SESSION(NULL, &p, (long)r->sessionlen);
	if (sess == NULL)
		return;
	if (wolfSSL_set_session(qc->ssl, sess) == WOLFSSL_SUCCESS && r->early_data &&
	    wolfSSL_SESSION_get_max_early_data(sess) == UINT32_MAX &&
	    ngtcp2_conn_decode_and_set_0rtt_transport_params(qc->conn,
	    r->params, r->paramslen) == 0) {
		wolfSSL_set_quic_early_data_enabled(qc->ssl, 1);
		qc->stats.early_attempted = true;
	}
	wolfSSL_SESSION_free(sess);
}

struct quic_conn *
quic_conn_client_create(struct event_base *base, const struct quic_settings *qs,
    const struct quic_conn_cbs *cbs, void *arg, WOLFSSL_CTX *ctx,
    struct udp_batch *batch, const struct sockaddr *remote, socklen_t remotelen,
    const struct quic_resume *resume, char **cause)
{
	struct quic_conn *qc = conn_alloc(base, qs, cbs, arg, batch, remote, remotelen);
	ngtcp2_callbacks cb;
	ngtcp2_settings settings;
	ngtcp2_transport_params params;
	uint16_t probes[1 + sizeof common_mtus / sizeof common_mtus[0]];
	ngtcp2_cid dcid, scid;
	int rv;

	fill_callbacks(&cb, QUIC_ROLE_CLIENT);
	fill_settings(&settings, qs, probes);
	fill_params(&params, qs);
	dcid.datalen = QUIC_SCID_LEN;
	random_bytes(dcid.data, dcid.datalen);
	scid.datalen = QUIC_SCID_LEN;
	random_bytes(scid.data, scid.datalen);
	qlog_open(qc, qs, &scid);
	rv = ngtcp2_conn_client_new(&qc->conn, &dcid, &scid, &qc->path,
	    NGTCP2_PROTO_VER_V1, &cb, &settings, &params, NULL, qc);
	if (rv != 0) {
		xasprintf(cause, "ngtcp2_conn_client_new: %s", ngtcp2_strerror(rv));
		quic_conn_free(qc);
		return NULL;
	}
	qc->ssl = tls_session_create(ctx, TLS_ROLE_CLIENT, &qc->conn_ref,
	    qs->probe ? PROTO_ALPN_PROBE : PROTO_ALPN);
	ngtcp2_conn_set_tls_native_handle(qc->conn, qc->ssl);
	/* Spent at the server's first answer, even if wolfSSL could not
	 * use it (expired): the owner then drops it all the same. */
	if (resume != NULL) {
		qc->ticket_offered = true;
		resume_session(qc, resume);
	}
	if (qs->keepalive_s > 0)
		ngtcp2_conn_set_keep_alive_timeout(qc->conn,
		    (uint64_t)qs->keepalive_s * NGTCP2_SECONDS);
	return qc;
}

struct quic_conn *
quic_conn_server_create(struct event_base *base, const struct quic_settings *qs,
    const struct quic_conn_cbs *cbs, void *arg, WOLFSSL_CTX *ctx,
    struct udp_batch *batch, const ngtcp2_pkt_hd *hd,
    const struct sockaddr *remote, socklen_t remotelen, char **cause)
{
	struct quic_conn *qc = conn_alloc(base, qs, cbs, arg, batch, remote, remotelen);
	ngtcp2_callbacks cb;
	ngtcp2_settings settings;
	ngtcp2_transport_params params;
	uint16_t probes[1 + sizeof common_mtus / sizeof common_mtus[0]];
	ngtcp2_cid scid;
	int rv;

	fill_callbacks(&cb, QUIC_ROLE_SERVER);
	fill_settings(&settings, qs, probes);
	fill_params(&params, qs);
	params.original_dcid = hd->dcid;
	params.original_dcid_present = 1;
	/* After a Retry the client's first DCID is the original one, and
	 * the one it now uses is the Retry's source CID (RFC 9000, 7.3). */
	if (qs->token_retry && qs->odcid != NULL) {
		params.original_dcid = *qs->odcid;
		params.retry_scid = hd->dcid;
		params.retry_scid_present = 1;
	}
	scid.datalen = QUIC_SCID_LEN;
	cid_make(qs->server_id, scid.data);
	if (ngtcp2_crypto_generate_stateless_reset_token(
	    params.stateless_reset_token, qs->reset_secret,
	    QUIC_RESET_SECRET_LEN, &scid) != 0) {
		*cause = xstrdup("cannot generate stateless reset token");
		quic_conn_free(qc);
		return NULL;
	}
	params.stateless_reset_token_present = 1;
	qlog_open(qc, qs, &scid);
	rv = ngtcp2_conn_server_new(&qc->conn, &hd->scid, &scid, &qc->path,
	    hd->version, &cb, &settings, &params, NULL, qc);
	if (rv != 0) {
		xasprintf(cause, "ngtcp2_conn_server_new: %s", ngtcp2_strerror(rv));
		quic_conn_free(qc);
		return NULL;
	}
	qc->ssl = tls_session_create(ctx, TLS_ROLE_SERVER, &qc->conn_ref,
	    PROTO_ALPN "," PROTO_ALPN_PROBE);
	ngtcp2_conn_set_tls_native_handle(qc->conn, qc->ssl);
	if (qs->early_data)
		wolfSSL_set_quic_early_data_enabled(qc->ssl, 1);
	if (qs->keepalive_s > 0)
		ngtcp2_conn_set_keep_alive_timeout(qc->conn,
		    (uint64_t)qs->keepalive_s * NGTCP2_SECONDS);
	/* The owner must route the client's chosen DCID and ours to us. */
	if (cbs->cid_add != NULL) {
		cbs->cid_add(qc, &hd->dcid, arg);
		cbs->cid_add(qc, &scid, arg);
	}
	return qc;
}

static void
send_close(struct quic_conn *qc, const ngtcp2_ccerr *ccerr)
{
	ngtcp2_path_storage ps;
	ngtcp2_pkt_info pi;
	uint8_t *dst;
	ngtcp2_ssize n;

	if (ngtcp2_conn_in_closing_period(qc->conn) ||
	    ngtcp2_conn_in_draining_period(qc->conn))
		return;
	ngtcp2_path_storage_zero(&ps);
	dst = udp_batch_slot(qc->batch);
	n = ngtcp2_conn_write_connection_close(qc->conn, &ps.path, &pi, dst,
	    UDP_MAX_PAYLOAD, ccerr, clock_now());
	if (n > 0) {
		udp_batch_commit(qc->batch, (size_t)n,
		    (const struct sockaddr *)ps.path.remote.addr, ps.path.remote.addrlen,
		    pi.ecn);
		/* Out now: the owner may be about to close the socket. */
		udp_batch_flush(qc->batch);
	}
}

/* A fatal library error: tell the peer why and end the connection. */
static void
fail(struct quic_conn *qc, int liberr)
{
	ngtcp2_ccerr ccerr;

	ngtcp2_ccerr_default(&ccerr);
	if (liberr == NGTCP2_ERR_CRYPTO)
		ngtcp2_ccerr_set_tls_alert(&ccerr,
		    ngtcp2_conn_get_tls_alert(qc->conn), NULL, 0);
	else
		ngtcp2_ccerr_set_liberr(&ccerr,
		    liberr, NULL, 0);
	qc->close_info.transport = true;
	qc->close_info.code = ccerr.error_code;
	if (liberr == NGTCP2_ERR_CRYPTO)
		snprintf(qc->close_info.reason, sizeof qc->close_info.reason,
		    "%s (TLS alert %u sent)", ngtcp2_strerror(liberr),
		    (unsigned)ngtcp2_conn_get_tls_alert(qc->conn));
	else
		snprintf(qc->close_info.reason, sizeof qc->close_info.reason,
		    "%s", ngtcp2_strerror(liberr));
	send_close(qc, &ccerr);
	quic_finish(qc);
}

static uint64_t
bytes_in_flight(struct quic_conn *qc)
{
	ngtcp2_conn_info ci;

	ngtcp2_conn_get_conn_info(qc->conn, &ci);
	return ci.bytes_in_flight;
}

void
quic_conn_read(struct quic_conn *qc, const struct udp_socket *sock,
    const struct sockaddr *remote, socklen_t remotelen, const uint8_t *pkt,
    size_t len, uint8_t ecn)
{
	ngtcp2_path path = qc->path;
	ngtcp2_pkt_info pi = { .ecn = ecn };
	ngtcp2_ccerr ccerr;
	uint64_t inflight, prev_rx;
	int rv;

	if (qc->state == QUIC_STATE_CLOSED || qc->tcp != NULL)
		return;
	path.remote.addr = (ngtcp2_sockaddr *)(uintptr_t)remote;
	path.remote.addrlen = remotelen;
	/* The socket it came in on names our end of the path (a migrating
	 * client reads two). */
	path.local.addr = (ngtcp2_sockaddr *)(uintptr_t)&sock->local;
	path.local.addrlen = sock->locallen;
	prev_rx = qc->last_rx;
	qc->last_rx = clock_now();
	if (ecn == NGTCP2_ECN_CE)
		qc->stats.rx_ecn_ce++;
	else if (ecn != NGTCP2_ECN_NOT_ECT)
		qc->stats.rx_ecn_ect++;
	rv = ngtcp2_conn_read_pkt(qc->conn, &path, &pi, pkt, len, qc->last_rx);
	if (rv == 0) {
		/* Fewer bytes in flight than after our last read or write:
		 * the packet acknowledged some (or showed some lost). */
		inflight = bytes_in_flight(qc);
		if (inflight < qc->inflight)
			qc->last_ack = qc->last_rx;
		qc->inflight = inflight;
		if (inflight == 0)
			qc->all_acked = true;
		/* Follow the peer to a new address once ngtcp2 accepted it. */
		const ngtcp2_path *cur = ngtcp2_conn_get_path(qc->conn);
		if (cur->remote.addrlen <= sizeof qc->remote &&
		    (cur->remote.addrlen != qc->path.remote.addrlen ||
		    memcmp(cur->remote.addr, &qc->remote, cur->remote.addrlen) != 0)) {
			memcpy(&qc->remote, cur->remote.addr, cur->remote.addrlen);
			qc->path.remote.addrlen = cur->remote.addrlen;
			qc->stats.rebind_quiet_ms = (qc->last_rx - prev_rx) / 1000000u;
			/* A new path's size is discovered anew. */
			qc->path_udp_best = 0;
		}
		/* Not from inside ngtcp2_conn_read_pkt: the packet that
		 * completed the handshake may hold more CRYPTO frames. */
		if (qc->role == QUIC_ROLE_SERVER && qc->ssl != NULL &&
		    qc->state == QUIC_STATE_ESTABLISHED)
			release_tls(qc);
		quic_mark_dirty(qc);
		return;
	}
	switch (rv) {
	case NGTCP2_ERR_DRAINING:
		ccerr = *ngtcp2_conn_get_ccerr(qc->conn);
		qc->close_info.remote = !qc->stateless_reset;
		qc->close_info.transport =
		    ccerr.type == NGTCP2_CCERR_TYPE_TRANSPORT;
		qc->close_info.code = ccerr.error_code;
		log_escape(qc->close_info.reason, sizeof qc->close_info.reason,
		    ccerr.reason, ccerr.reasonlen);
		/* CRYPTO_ERROR (0x100 + alert) comes without a phrase: name
		 * the alert, as TLS over TCP does. */
		if (qc->close_info.reason[0] == '\0' && qc->close_info.transport &&
		    ccerr.error_code >= 0x100 && ccerr.error_code < 0x200)
			snprintf(qc->close_info.reason, sizeof qc->close_info.reason,
			    "TLS alert %u", (unsigned)(ccerr.error_code - 0x100));
		if (qc->stateless_reset) {
			qc->close_info.stateless_reset = true;
			snprintf(qc->close_info.reason, sizeof qc->close_info.reason,
			    "stateless reset");
		}
		quic_finish(qc);
		break;
	case NGTCP2_ERR_DROP_CONN:
		snprintf(qc->close_info.reason, sizeof qc->close_info.reason,
		    "dropped");
		quic_finish(qc);
		break;
	case NGTCP2_ERR_DISCARD_PKT:
		break;
	default:
		log_debug("%s: %s", __func__, ngtcp2_strerror(rv));
		fail(qc, rv);
		break;
	}
}

static void
rearm_timer(struct quic_conn *qc)
{
	ngtcp2_tstamp expiry = ngtcp2_conn_get_expiry(qc->conn);
	ngtcp2_tstamp now = clock_now();
	struct timeval tv;
	uint64_t d;

	if (qc->state == QUIC_STATE_CLOSED)
		return;
	if (expiry == UINT64_MAX) {
		evtimer_del(qc->timer);
		return;
	}
	/* Round up to the timer's microseconds: ngtcp2 paces in nanoseconds,
	 * and a timer that fires before the expiry finds nothing to do and
	 * is re-armed for the same instant, spinning the loop. */
	d = expiry > now ? (expiry - now + 999) / 1000 : 0;
	tv.tv_sec = (time_t)(d / 1000000);
	tv.tv_usec = (suseconds_t)(d % 1000000);
	evtimer_add(qc->timer, &tv);
}

/* One packet's worth of the write loop. Returns the packet length, 0 when
 * nothing more can be sent now, or a negative ngtcp2 error. */
static ngtcp2_ssize
write_one(struct quic_conn *qc, uint8_t *dst, ngtcp2_path_storage *ps,
    ngtcp2_pkt_info *pi, ngtcp2_tstamp ts)
{
	ngtcp2_ssize n;
	struct quic_stream *s;
	const struct dgramq_item *d;

	/* DATAGRAMs share a packet while they fit (MORE): an inner TCP's
	 * acknowledgements, 40 to 80 bytes each, would otherwise cost a
	 * packet, an AEAD pass and a share of the peer's acknowledgements
	 * each. A packet left open when the queue runs dry is finished below,
	 * with stream data or by ngtcp2_conn_write_pkt. */
	while (qc->state == QUIC_STATE_ESTABLISHED || qc->early_ready) {
		ngtcp2_vec v;
		int accepted = 0;

		/* Larger than the path takes yet (discovery still running):
		 * waiting would hold up everything behind it. */
		while ((d = dgramq_peek(&qc->dq)) != NULL && d->len > qc->dgram_fit) {
			qc->stats.dgram_too_big++;
			dgramq_pop(&qc->dq);
		}
		if (d == NULL)
			break;
		v.base = (uint8_t *)(uintptr_t)d->data;
		v.len = d->len;
		n = ngtcp2_conn_writev_datagram(qc->conn, &ps->path, pi, dst,
		    UDP_MAX_PAYLOAD, &accepted, NGTCP2_WRITE_DATAGRAM_FLAG_MORE, 0,
		    &v, 1, ts);
		if (accepted) {
			qc->stats.tx_dgrams++;
			qc->stats.tx_dgram_bytes += d->len;
			dgramq_pop(&qc->dq);
		} else if (n == NGTCP2_ERR_INVALID_ARGUMENT) {
			/* ngtcp2 checks the size before it touches the packet,
			 * so one in progress stays valid. */
			qc->stats.dgram_too_big++;
			dgramq_pop(&qc->dq);
			continue;
		}
		if (n != NGTCP2_ERR_WRITE_MORE)
			return n;
	}
	while ((s = TAILQ_FIRST(&qc->pending_streams)) != NULL) {
		ngtcp2_vec v[8];
		size_t nv = 0;
		ngtcp2_ssize datalen = -1;
		uint32_t flags = 0;

		for (struct stream_chunk *c = s->cur; c != NULL && nv < 8; c = c->next) {
			size_t skip = (size_t)(s->send_off > c->off ? s->send_off - c->off : 0);
			v[nv].base = c->data + skip;
			v[nv].len = c->len - skip;
			nv++;
		}
		if (s->fin)
			flags |= NGTCP2_WRITE_STREAM_FLAG_FIN;
		n = ngtcp2_conn_writev_stream(qc->conn, &ps->path, pi, dst,
		    UDP_MAX_PAYLOAD, &datalen, flags, s->id, v, nv, ts);
		if (n == NGTCP2_ERR_STREAM_DATA_BLOCKED) {
			s->blocked = true;
			quic_stream_set_pending(qc, s);
			continue;
		}
		if (n == NGTCP2_ERR_STREAM_SHUT_WR || n == NGTCP2_ERR_STREAM_NOT_FOUND) {
			s->reset = true;
			quic_stream_set_pending(qc, s);
			continue;
		}
		if (datalen >= 0) {
			s->send_off += (uint64_t)datalen;
			/* At once: an acknowledgement may free what is behind. */
			while (s->cur != NULL &&
			    s->cur->off + s->cur->len <= s->send_off)
				s->cur = s->cur->next;
			if (s->fin && s->send_off == s->end)
				s->fin_sent = true;
		}
		/* Round robin: the next packet serves the next stream. */
		if (s->pending) {
			TAILQ_REMOVE(&qc->pending_streams, s, pending_entry);
			s->pending = false;
		}
		quic_stream_set_pending(qc, s);
		return n;
	}
	return ngtcp2_conn_write_pkt(qc->conn, &ps->path, pi, dst, UDP_MAX_PAYLOAD, ts);
}

/* A DATAGRAM that has waited a round trip for the congestion window is
 * worth less than the queueing delay it adds to everything behind it: the
 * inner sender would by then rather learn of a loss. "A round trip" is the
 * smoothed RTT plus four deviations, as for a retransmission timeout: on a
 * steady path that is about one RTT, and where the RTT jitters (a busy
 * host that runs us late, a radio link) a packet is not dropped for a
 * delay that was none of the queue's making. The floor keeps short paths
 * from dropping what a single pacing gap delays. */
static void
expire_datagrams(struct quic_conn *qc, ngtcp2_tstamp now)
{
	ngtcp2_conn_info ci;
	uint64_t max_age;

	if (dgramq_len(&qc->dq) == 0)
		return;
	ngtcp2_conn_get_conn_info(qc->conn, &ci);
	max_age = ci.smoothed_rtt + 4 * ci.rttvar;
	if (max_age < QUIC_DGRAM_MIN_AGE)
		max_age = QUIC_DGRAM_MIN_AGE;
	/* Spaced drops keep a standing queue short; only what has waited
	 * several round trips goes at once. */
	qc->stats.dgram_stale += dgramq_codel(&qc->dq, now, max_age);
	qc->stats.dgram_stale += dgramq_expire(&qc->dq, now,
	    QUIC_DGRAM_MAX_RTTS * max_age);
}

/* cbs->loss, before this loop's packets go out (what it sends goes with
 * them): only when something was lost, at most every QUIC_LOSS_NOTE_MS. */
static void
note_loss(struct quic_conn *qc, ngtcp2_tstamp now)
{
	ngtcp2_conn_info ci;

	if (qc->cbs->loss == NULL || now < qc->loss_next ||
	    qc->state != QUIC_STATE_ESTABLISHED)
		return;
	qc->loss_next = now + QUIC_LOSS_NOTE_MS * NGTCP2_MILLISECONDS;
	ngtcp2_conn_get_conn_info(qc->conn, &ci);
	if (ci.pkt_lost == qc->loss_told)
		return;
	qc->loss_told = ci.pkt_lost;
	qc->cbs->loss(qc, ci.pkt_sent, ci.pkt_lost, qc->arg);
}

static void
timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct quic_conn *qc = arg;
	int rv;

	(void)fd;
	(void)what;
	rv = ngtcp2_conn_handle_expiry(qc->conn, clock_now());
	if (rv == NGTCP2_ERR_IDLE_CLOSE || rv == NGTCP2_ERR_HANDSHAKE_TIMEOUT) {
		qc->close_info.idle = true;
		snprintf(qc->close_info.reason, sizeof qc->close_info.reason, "%s",
		    rv == NGTCP2_ERR_IDLE_CLOSE ? "idle timeout" : "handshake timeout");
		quic_finish(qc);
		return;
	}
	if (rv != 0) {
		fail(qc, rv);
		udp_batch_flush(qc->batch);
		return;
	}
	quic_conn_write(qc);
	udp_batch_flush(qc->batch);
}

/* The largest DATAGRAM payload a packet of `udp` bytes can carry. */
static size_t
dgram_max_for(struct quic_conn *qc, size_t udp)
{
	const ngtcp2_transport_params *rp;
	size_t overhead, max;

	rp = ngtcp2_conn_get_remote_transport_params(qc->conn);
	if (rp == NULL || rp->max_datagram_frame_size == 0)
		return 0;
	if (rp->max_udp_payload_size < udp)
		udp = (size_t)rp->max_udp_payload_size;
	/* Short header (flags, DCID, packet number of up to 4 bytes), the
	 * AEAD tag, and the DATAGRAM frame's type and 2-byte length. */
	overhead = 1 + ngtcp2_conn_get_dcid(qc->conn)->datalen + 4 +
	    QUIC_AEAD_TAG_LEN + 1 + 2;
	if (udp <= overhead)
		return 0;
	max = udp - overhead;
	if (max + 3 > rp->max_datagram_frame_size)
		max = (size_t)rp->max_datagram_frame_size - 3;
	return max;
}

/* The UDP payload size that packets on the current path may use now, as
 * ngtcp2's path MTU discovery has confirmed it. */
static size_t
path_udp_now(struct quic_conn *qc)
{
	size_t cur = ngtcp2_conn_get_path_max_tx_udp_payload_size(qc->conn);

	if (cur > qc->path_udp_best)
		qc->path_udp_best = cur;
	return cur;
}

void
quic_conn_submit_new_token(struct quic_conn *qc, const uint8_t *token,
    size_t len)
{
	if (qc->tcp != NULL)
		return; /* nothing to skip over TCP: no Retry */
	if (qc->state == QUIC_STATE_CLOSED || len == 0)
		return;
	if (ngtcp2_conn_submit_new_token(qc->conn, token, len) == 0)
		quic_mark_dirty(qc);
}

uint64_t
quic_conn_ack_silence_ms(struct quic_conn *qc)
{
	if (qc->tcp != NULL || qc->state != QUIC_STATE_ESTABLISHED ||
	    bytes_in_flight(qc) == 0)
		return 0;
	return (clock_now() - qc->last_ack) / 1000000u;
}

int
quic_conn_migrate(struct quic_conn *qc, struct udp_batch *batch, bool immediate)
{
	return quic_conn_migrate_to(qc, batch, NULL, 0, immediate);
}

int
quic_conn_migrate_to(struct quic_conn *qc, struct udp_batch *batch,
    const struct sockaddr *remote, socklen_t remotelen, bool immediate)
{
	ngtcp2_path path;
	int rv;

	if (qc->tcp != NULL)
		return -1;
	if (qc->state != QUIC_STATE_ESTABLISHED ||
	    (remote != NULL && remotelen > sizeof qc->remote))
		return -1;
	path.local.addr = (ngtcp2_sockaddr *)&batch->sock->local;
	path.local.addrlen = batch->sock->locallen;
	path.remote.addr = (ngtcp2_sockaddr *)(remote != NULL ?
	    (const void *)remote : (const void *)&qc->remote);
	path.remote.addrlen = remote != NULL ? remotelen : qc->path.remote.addrlen;
	path.user_data = NULL;
	rv = immediate ?
	    ngtcp2_conn_initiate_immediate_migration(qc->conn, &path, clock_now()) :
	    ngtcp2_conn_initiate_migration(qc->conn, &path, clock_now());
	if (rv != 0) {
		log_warn("migration: %s", ngtcp2_strerror(rv));
		return -1;
	}
	/* Reads on the new socket carry its local address from now on. */
	quic_conn_set_batch(qc, batch);
	qc->path_udp_best = 0;
	return 0;
}

const struct sockaddr *
quic_conn_path_local(const struct quic_conn *qc, socklen_t *len)
{
	const ngtcp2_path *p;

	if (qc->tcp != NULL || qc->conn == NULL)
		return NULL;
	p = ngtcp2_conn_get_path(qc->conn);
	*len = (socklen_t)p->local.addrlen;
	return (const struct sockaddr *)p->local.addr;
}

void
quic_conn_set_keepalive_ms(struct quic_conn *qc, uint64_t ms)
{
	if (qc->tcp != NULL || qc->conn == NULL)
		return;
	ngtcp2_conn_set_keep_alive_timeout(qc->conn, ms == 0 ? UINT64_MAX :
	    ms * NGTCP2_MILLISECONDS);
	quic_mark_dirty(qc);
}

void
quic_conn_set_batch(struct quic_conn *qc, struct udp_batch *batch)
{
	if (qc->tcp != NULL)
		return;
	memcpy(&qc->local, &batch->sock->local, batch->sock->locallen);
	qc->path.local.addrlen = batch->sock->locallen;
	qc->batch = batch;
	quic_mark_dirty(qc);
}

/* What only a UDP session holds: ngtcp2's connection. */
static void
quic_udp_free(struct quic_conn *qc)
{
	if (qc->conn != NULL)
		ngtcp2_conn_del(qc->conn);
}

static void
quic_udp_write(struct quic_conn *qc)
{
	ngtcp2_tstamp ts = clock_now();
	ngtcp2_path_storage ps;
	size_t max_pkts, npkts;
	struct udp_batch *other = NULL; /* a second socket's, while migrating */


	if (qc->state == QUIC_STATE_CLOSED)
		return;
	expire_datagrams(qc, ts);
	note_loss(qc, ts);
	/* Once per loop, not per packet: the path's size changes only when
	 * packets are read. Until DATAGRAMs may go, none is judged. */
	qc->dgram_fit = qc->state == QUIC_STATE_ESTABLISHED || qc->early_ready ?
	    dgram_max_for(qc, path_udp_now(qc)) : SIZE_MAX;
	ngtcp2_path_storage_zero(&ps);
	/* Pacing: send at most one send quantum now; ngtcp2's expiry then
	 * tells when the next may go. */
	max_pkts = ngtcp2_conn_get_send_quantum(qc->conn) / qc->max_udp_payload;
	if (max_pkts < 1)
		max_pkts = 1;
	if (max_pkts > UDP_BATCH_MAX)
		max_pkts = UDP_BATCH_MAX;
	for (npkts = 0; npkts < max_pkts; npkts++) {
		/* The packet lands in this batch's slot even if a callback
		 * inside write_one (a failed path validation) picks another
		 * default batch. */
		struct udp_batch *b = qc->batch;
		uint8_t *dst = udp_batch_slot(b);
		ngtcp2_pkt_info pi;
		ngtcp2_ssize n = write_one(qc, dst, &ps, &pi, ts);

		if (n < 0) {
			fail(qc, (int)n);
			return;
		}
		if (n == 0)
			break;
		/* During a migration a packet may belong to the other socket. */
		if (qc->cbs->batch_for != NULL) {
			struct udp_batch *sel = qc->cbs->batch_for(qc, &ps.path, qc->arg);
			if (sel != NULL && sel != b) {
				memcpy(udp_batch_slot(sel), dst, (size_t)n);
				b = other = sel;
			}
		}
		udp_batch_commit(b, (size_t)n,
		    (const struct sockaddr *)ps.path.remote.addr, ps.path.remote.addrlen,
		    pi.ecn);
	}
	if (npkts > 0)
		ngtcp2_conn_update_pkt_tx_time(qc->conn, ts);
	/* Nothing outstanding: nothing can be overdue either. And the first
	 * packet in flight after a quiet spell (the peer had acknowledged
	 * everything) starts the silence afresh: a quiet with nothing to
	 * acknowledge is no silence of the path, and counted in, its first
	 * round trip would read as seconds of one (a TCP race and a move
	 * for nothing). Not after a move to a new path, though: ngtcp2
	 * then counts nothing in flight, but the old path's packets are
	 * as unanswered as before. */
	qc->inflight = bytes_in_flight(qc);
	if (qc->inflight == 0 || qc->all_acked)
		qc->last_ack = ts;
	if (qc->inflight > 0)
		qc->all_acked = false;
	if (other != NULL)
		udp_batch_flush(other);
	/* More is waiting than the quantum allowed: the timer brings us back. */
	rearm_timer(qc);
}

static size_t
quic_udp_dgram_max(struct quic_conn *qc)
{
	size_t cur;

	cur = path_udp_now(qc);

	/* A path starts at QUIC's 1200 bytes and grows as discovery confirms
	 * larger packets: until then the configured size stands (what does
	 * not fit yet is dropped, not answered with "packet too big", which
	 * the inner hosts would remember for ten minutes). Only a path that
	 * shrank below what it had carried (ngtcp2 found a black hole) makes
	 * the inner MTU follow it. */
	if (cur < qc->path_udp_best && cur < qc->max_udp_payload)
		return dgram_max_for(qc, cur);
	return dgram_max_for(qc, qc->max_udp_payload);
}

static void
quic_udp_stream_consume(struct quic_conn *qc, int64_t id, size_t n)
{
	if (qc->state == QUIC_STATE_CLOSED || n == 0)
		return;
	ngtcp2_conn_extend_max_stream_offset(qc->conn, id, n);
	ngtcp2_conn_extend_max_offset(qc->conn, n);
	quic_mark_dirty(qc);
}

static void
quic_udp_stream_reset(struct quic_conn *qc, int64_t id, uint64_t code)
{
	struct quic_stream *s = quic_stream_find(qc, id);

	if (qc->state == QUIC_STATE_CLOSED)
		return;
	if (s != NULL) {
		s->reset = true;
		s->reset_code = code;
		quic_stream_set_pending(qc, s);
	}
	ngtcp2_conn_shutdown_stream(qc->conn, 0, id, code);
	quic_mark_dirty(qc);
}

static void
quic_udp_stream_stop_reading(struct quic_conn *qc, int64_t id, uint64_t code)
{
	if (qc->state == QUIC_STATE_CLOSED)
		return;
	ngtcp2_conn_shutdown_stream_read(qc->conn, 0, id, code);
	quic_mark_dirty(qc);
}

static int64_t
quic_udp_open_stream(struct quic_conn *qc, void *arg)
{
	int64_t id;

	/* A client may open streams in 0-RTT: the server's remembered
	 * transport parameters give their limits. */
	if ((qc->state != QUIC_STATE_ESTABLISHED && !quic_conn_early_ready(qc)) ||
	    ngtcp2_conn_open_bidi_stream(qc->conn, &id, NULL) != 0)
		return -1;
	quic_stream_get(qc, id)->arg = arg;
	return id;
}

static bool
quic_udp_stream_is_local(struct quic_conn *qc, int64_t id)
{
	return ngtcp2_conn_is_local_stream(qc->conn, id) != 0;
}

static uint64_t
quic_udp_streams_left(struct quic_conn *qc)
{
	return ngtcp2_conn_get_streams_bidi_left(qc->conn);
}

static void
quic_udp_close(struct quic_conn *qc, uint64_t app_error, const char *reason)
{
	ngtcp2_ccerr ccerr;

	if (qc->state == QUIC_STATE_CLOSED)
		return;
	ngtcp2_ccerr_default(&ccerr);
	ngtcp2_ccerr_set_application_error(&ccerr, app_error,
	    (const uint8_t *)reason, reason != NULL ? strlen(reason) : 0);
	qc->close_info.code = app_error;
	snprintf(qc->close_info.reason, sizeof qc->close_info.reason, "%s",
	    reason != NULL ? reason : "");
	/* Before the handshake completes, only a transport close can be sent. */
	if (qc->state == QUIC_STATE_HANDSHAKING)
		ngtcp2_ccerr_set_transport_error(&ccerr,
		    NGTCP2_APPLICATION_ERROR, (const uint8_t *)reason,
		    reason != NULL ? strlen(reason) : 0);
	send_close(qc, &ccerr);
	quic_finish(qc);
}

static bool
quic_udp_stalled(struct quic_conn *qc)
{
	uint64_t now = clock_now();

	/* A probe timeout's worth of silence about packets in flight is
	 * what makes ngtcp2 send probes. */
	return (bytes_in_flight(qc) > 0 &&
	    now - qc->last_ack > ngtcp2_conn_get_pto(qc->conn)) ||
	    quic_conn_rx_idle_ms(qc) > 1000;
}

static void
quic_udp_get_stats(struct quic_conn *qc, struct quic_conn_stats *st)
{
	ngtcp2_conn_info cs;

	*st = qc->stats;
	st->stream_unacked = qc->unacked;
	if (qc->conn == NULL)
		return;
	ngtcp2_conn_get_conn_info(qc->conn, &cs);
	st->rtt_ms = (double)cs.smoothed_rtt / (double)NGTCP2_MILLISECONDS;
	st->min_rtt_ms = cs.min_rtt == UINT64_MAX ? 0 :
	    (double)cs.min_rtt / (double)NGTCP2_MILLISECONDS;
	st->cwnd = cs.cwnd;
	st->bytes_in_flight = cs.bytes_in_flight;
	st->pkt_sent = cs.pkt_sent;
	st->pkt_lost = cs.pkt_lost;
}

static const struct sockaddr *
quic_udp_local(const struct quic_conn *qc, socklen_t *len)
{
	const ngtcp2_path *p;

	p = ngtcp2_conn_get_path(qc->conn);

	*len = p->local.addrlen;
	return (const struct sockaddr *)p->local.addr;
}

static const struct sockaddr *
quic_udp_remote(const struct quic_conn *qc, socklen_t *len)
{
	const ngtcp2_path *p;

	p = ngtcp2_conn_get_path(qc->conn);

	*len = p->remote.addrlen;
	return (const struct sockaddr *)p->remote.addr;
}

static const struct quic_transport quic_udp_transport = {
	.free = quic_udp_free,
	.write = quic_udp_write,
	.close = quic_udp_close,
	.dgram_max = quic_udp_dgram_max,
	.stream_consume = quic_udp_stream_consume,
	.stream_reset = quic_udp_stream_reset,
	.stream_stop_reading = quic_udp_stream_stop_reading,
	.open_stream = quic_udp_open_stream,
	.stream_is_local = quic_udp_stream_is_local,
	.streams_left = quic_udp_streams_left,
	.stalled = quic_udp_stalled,
	.get_stats = quic_udp_get_stats,
	.local = quic_udp_local,
	.remote = quic_udp_remote,
};
