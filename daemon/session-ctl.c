/* A session's control stream (stream 0, docs/PROTOCOL.md): the client's
 * hello answered with SERVER_CONFIG, and its remote forwards (-R), whose
 * listeners the session holds, opened and closed at its request or when a
 * reload narrows AllowRemoteForward. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/xmalloc.h"
#include "egress.h"
#include "server-int.h"
#include "transport/quic.h"
#include "tunnel/recovery.h"
#include "wire/proto-fwd.h"
#include "wire/proto.h"

/* A client has no reason to ask for more remote forwards than it may hold,
 * give or take a few retries; past this its control stream is abuse. */
#define CTL_MAX_REQUESTS (4 * CFG_MAX_REMOTE_FORWARDS)
/* Control replies the client has not acknowledged: a client that stops
 * reading its control stream is closed before they pile up. */
#define CTL_MAX_UNACKED 16384
/* The longest control message, with its type and length. */
#define SESSION_CTL_MAX (PROTO_MAX_MSG + 16)

_Static_assert(CFG_MAX_DNS <= PROTO_MAX_DNS &&
    CFG_MAX_DNS_SEARCH <= PROTO_MAX_DNS_SEARCH,
    "the config may list more DNS entries than a SERVER_CONFIG carries");

int
session_ctl_send_config(struct session *sess)
{
	struct server *srv = sess->srv;
	struct peer *peer = sess->peer;
	struct proto_server_config sc;
	uint8_t buf[PROTO_MAX_MSG];
	size_t n;

	memset(&sc, 0, sizeof sc);
	sc.version = PROTO_VERSION;
	for (size_t i = 0; i < peer->naddrs; i++) {
		sc.addrs[sc.naddrs] = peer->addrs[i];
		sc.addrs[sc.naddrs].len = peer->subnet_len[i];
		sc.naddrs++;
	}
	/* The tunnel subnets; the client adds its own Routes on top. */
	for (size_t i = 0; i < srv->cfg->naddrs && sc.nroutes < PROTO_MAX_ROUTES; i++) {
		sc.routes[sc.nroutes] = srv->cfg->addrs[i];
		addr_prefix_mask(&sc.routes[sc.nroutes]);
		sc.nroutes++;
	}
	sc.mtu = srv->cfg->mtu;
	sc.keepalive = srv->cfg->keepalive;
	/* DNS and DNSSearch: the config parser bounds both lists by the
	 * protocol's limits and validates every name. */
	sc.ndns = srv->cfg->ndns_servers;
	memcpy(sc.dns, srv->cfg->dns_servers, sc.ndns * sizeof sc.dns[0]);
	for (size_t i = 0; i < srv->cfg->ndns_search; i++)
		snprintf(sc.dns_search[sc.ndns_search++], sizeof sc.dns_search[0],
		    "%s", srv->cfg->dns_search[i]);
	sc.features = sess->features;
	n = proto_encode_server_config(buf, sizeof buf, &sc);
	if (n == 0)
		return -1;
	sess->configured = true;
	return quic_conn_stream_send(sess->qc, 0, buf, n, false);
}

/* The peer's packets come from a new address: tell it how long it had
 * been quiet, so that it can tell a NAT that forgot it from its own move
 * and shorten its keepalive (PROTO_MSG_PATH_NOTICE). A notice per move,
 * and moves cost the peer a path validation each: no bound needed beyond
 * the unacknowledged-bytes one. */
/* A notice the peer takes only with `feature`, and can do without: it is
 * skipped, not queued, while the control stream has CTL_MAX_UNACKED bytes
 * unacknowledged (a peer that does not read). */
static bool
ctl_notice_wanted(const struct session *sess, uint64_t feature)
{
	return sess->configured && (sess->features & feature) &&
	    quic_conn_stream_unacked(sess->qc, 0) <= CTL_MAX_UNACKED;
}

void
session_ctl_path_notice(struct session *sess, uint64_t quiet_ms)
{
	struct proto_path_notice pn = { .quiet_ms = quiet_ms };
	uint8_t buf[32];
	size_t n;

	if (ctl_notice_wanted(sess, PROTO_FEATURE_PATH_NOTICE) &&
	    (n = proto_encode_path_notice(buf, sizeof buf, &pn)) > 0)
		(void)quic_conn_stream_send(sess->qc, 0, buf, n, false);
}

/* Our packets to the peer are being lost: its auto transport weighs our
 * loss with its own when it looks for a policer (PROTO_MSG_LOSS_REPORT).
 * The transport calls this at most every QUIC_LOSS_NOTE_MS, and only
 * while packets are lost. */
void
session_ctl_loss_report(struct session *sess, uint64_t sent, uint64_t lost)
{
	struct proto_loss_report lr = { .sent = sent, .lost = lost };
	uint8_t buf[32];
	size_t n;

	if (ctl_notice_wanted(sess, PROTO_FEATURE_LOSS_REPORT) &&
	    (n = proto_encode_loss_report(buf, sizeof buf, &lr)) > 0)
		(void)quic_conn_stream_send(sess->qc, 0, buf, n, false);
}

/* A -R request refused, for status: once per bind address and port (the
 * newest reason), the oldest forgotten when there are more than it keeps;
 * one granted since is taken off. */
static void
session_note_refused(struct session *sess, const struct proto_remote_forward *rf)
{
	size_t n = sess->nrrefused, max = sizeof sess->rrefused /
	    sizeof sess->rrefused[0], i;

	for (i = 0; i < n && !proto_fwd_remote_same(&sess->rrefused[i], rf); i++)
		;
	/* Granted now: no longer refused. */
	if (rf->status == PROTO_FWD_OK) {
		if (i < n) {
			memmove(&sess->rrefused[i], &sess->rrefused[i + 1],
			    (n - i - 1) * sizeof sess->rrefused[0]);
			sess->nrrefused--;
		}
		return;
	}
	if (i == n && n == max) {
		memmove(&sess->rrefused[0], &sess->rrefused[1],
		    (max - 1) * sizeof sess->rrefused[0]);
		i = max - 1;
	} else if (i == n) {
		sess->nrrefused++;
	}
	sess->rrefused[i] = *rf;
}

/* -R: listen where the peer asks, if its AllowRemoteForward permits. The
 * reply carries the request's bind address back, so that the client can
 * tell which forward it answers. */
static int
remote_forward(struct session *sess, const uint8_t *body, size_t len)
{
	struct proto_remote_forward rf;
	uint8_t buf[64];
	size_t n;

	if (!sess->configured || proto_fwd_remote_decode(body, len, &rf) != 0)
		return -1;
	/* Bounded: every request costs a reply we keep until it is
	 * acknowledged. */
	if (++sess->ctl_requests > CTL_MAX_REQUESTS ||
	    quic_conn_stream_unacked(sess->qc, 0) > CTL_MAX_UNACKED) {
		quic_conn_close(sess->qc, 2, "control stream abuse");
		return 0;
	}
	rf.status = PROTO_FWD_OK;
	if (sess->nrlisteners == sizeof sess->rlisteners / sizeof sess->rlisteners[0])
		rf.status = PROTO_FWD_ERR_LIMIT;
	else {
		struct egress_listener *l = egress_listen(sess->srv->egress,
		    sess->peer->cfg, &sess->fwds, &sess->udp, &rf, &rf.status);
		if (l != NULL)
			sess->rlisteners[sess->nrlisteners++] = l;
	}
	session_note_refused(sess, &rf);
	n = proto_fwd_remote_encode(buf, sizeof buf, PROTO_MSG_REMOTE_FORWARD_REPLY, &rf);
	return n > 0 ? quic_conn_stream_send(sess->qc, 0, buf, n, false) : -1;
}

/* -R taken back (the client's configuration was reloaded): stop
 * listening there, the listener of the same bind address and port.
 * Connections accepted before carry on. Counted with the requests, so
 * asking and cancelling in a loop ends as abuse too. */
static int
remote_forward_cancel(struct session *sess, const uint8_t *body, size_t len)
{
	struct proto_remote_forward rf;
	size_t kept = 0;

	if (!sess->configured || proto_fwd_remote_decode(body, len, &rf) != 0)
		return -1;
	if (++sess->ctl_requests > CTL_MAX_REQUESTS) {
		quic_conn_close(sess->qc, 2, "control stream abuse");
		return 0;
	}
	for (size_t i = 0; i < sess->nrlisteners; i++) {
		struct egress_listener *l = sess->rlisteners[i];

		if (!proto_fwd_remote_same(egress_listener_request(l), &rf)) {
			sess->rlisteners[kept++] = l;
			continue;
		}
		log_info("peer %s: remote forward on %s%s closed at its "
		    "request", sess->peer->cfg->name, rf.udp ? "udp/" : "",
		    egress_listener_where(l));
		egress_listener_free(l);
	}
	sess->nrlisteners = kept;
	return 0;
}

static int
control_message(struct session *sess, uint64_t type, const uint8_t *body, size_t len)
{
	struct proto_client_hello hello;

	if (type == PROTO_MSG_REMOTE_FORWARD)
		return remote_forward(sess, body, len);
	/* Only from a client that announced it, as docs/PROTOCOL.md has it. */
	if (type == PROTO_MSG_REMOTE_FORWARD_CANCEL &&
	    (sess->features & PROTO_FEATURE_CANCEL_REMOTE))
		return remote_forward_cancel(sess, body, len);
	if (type != PROTO_MSG_CLIENT_HELLO || sess->configured)
		return -1;
	if (proto_decode_client_hello(body, len, &hello) != 0)
		return -1;
	if (hello.version != PROTO_VERSION) {
		quic_conn_close(sess->qc, 4, "unsupported protocol version");
		return 0;
	}
	sess->features = hello.features & PROTO_FEATURES;
	/* The -R connections opened from now on can be resumed, and those
	 * that waited for this connection ask the client to carry on: its
	 * hello says this is the connection it uses now. */
	if (sess->fwd_peer != NULL &&
	    (sess->features & PROTO_FEATURE_FWD_RESUME) != 0) {
		sess->fwds.resumable = true;
		fwd_set_resume(&sess->fwd_peer->parked, &sess->fwds);
	}
	/* A client that decodes repairs gets them if our configuration
	 * allows; it may send us its own either way. */
	if ((sess->features & PROTO_FEATURE_LOSS_RECOVERY) && sess->rec == NULL) {
		sess->rec = recovery_create(sess->srv->base, sess->qc);
		recovery_set_sending(sess->rec,
		    sess->srv->cfg->loss_recovery == CFG_AUTO);
	}
	return session_ctl_send_config(sess);
}

int
session_ctl_data(struct session *sess, struct quic_conn *qc,
    const uint8_t *data, size_t len)
{
	const uint8_t *body;
	uint64_t type;
	size_t bodylen;
	long used;

	if (sess->ctl == NULL)
		sess->ctl = xmalloc(SESSION_CTL_MAX);
	if (len > SESSION_CTL_MAX - sess->ctllen)
		return -1;
	memcpy(sess->ctl + sess->ctllen, data, len);
	sess->ctllen += len;
	quic_conn_stream_consume(qc, 0, len);
	while ((used = proto_msg_next(sess->ctl, sess->ctllen, &type, &body,
	    &bodylen)) > 0) {
		if (control_message(sess, type, body, bodylen) != 0)
			return -1;
		if (quic_conn_state(qc) == QUIC_STATE_CLOSED)
			return 0;
		memmove(sess->ctl, sess->ctl + used, sess->ctllen - (size_t)used);
		sess->ctllen -= (size_t)used;
	}
	/* Kept only while a message is incomplete: the control stream is
	 * quiet after the hello, so an idle session holds no buffer. */
	if (sess->ctllen == 0) {
		free(sess->ctl);
		sess->ctl = NULL;
	}
	return used < 0 ? -1 : 0;
}

/* Connections already accepted on a listener closed here carry on. */
void
session_ctl_close_remote(struct session *sess, const struct cfg_peer *cp)
{
	size_t kept = 0;

	for (size_t i = 0; i < sess->nrlisteners; i++) {
		struct egress_listener *l = sess->rlisteners[i];
		struct proto_remote_forward rf = *egress_listener_request(l);
		uint8_t buf[64];
		size_t n;

		if (cfg_remote_allowed(cp, &rf)) {
			sess->rlisteners[kept++] = l;
			continue;
		}
		log_info("reload: peer %s: remote forward on %s%s closed: "
		    "no longer in AllowRemoteForward", cp->name,
		    rf.udp ? "udp/" : "", egress_listener_where(l));
		egress_listener_free(l);
		rf.status = PROTO_FWD_ERR_DENIED;
		session_note_refused(sess, &rf);
		n = proto_fwd_remote_encode(buf, sizeof buf,
		    PROTO_MSG_REMOTE_FORWARD_REPLY, &rf);
		if (n > 0)
			(void)quic_conn_stream_send(sess->qc, 0, buf, n, false);
	}
	sess->nrlisteners = kept;
}
