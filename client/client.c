/* rove: one QUIC connection to roved, the TUN device it configures, and
 * reconnection with exponential back-off and jitter. This file makes the
 * client and takes it down, and owns the session's life: connecting (over
 * QUIC, TLS over TCP, or both racing), the control stream, closing and
 * reconnecting; client-int.h says which file owns the rest. */

#include <event2/event.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/addr.h"
#include "base/clock.h"
#include "base/key.h"
#include "base/log.h"
#include "base/random.h"
#include "base/xmalloc.h"
#include "client-int.h"
#include "dns.h"
#include "forward.h"
#include "forward/streams.h"
#include "forward/udprelay.h"
#include "ops/control.h"
#include "ops/metrics.h"
#include "ops/notify.h"
#include "transport/quic.h"
#include "transport/state.h"
#include "transport/tls.h"
#include "transport/udp.h"
#include "tun/tun-monitor.h"
#include "tun/tun-netlink.h"
#include "tun/tun.h"
#include "tunnel/tunnel.h"
#include "wire/proto.h"

#define BACKOFF_MIN_MS 250
#define BACKOFF_MAX_MS 30000
/* Transport = auto. TLS over TCP joins the race when QUIC's handshake has
 * heard nothing for RACE_AFTER_MS, or when an established QUIC session's
 * packets have gone unacknowledged for STALL_MS (client-int.h). While on
 * TCP, a QUIC handshake probes UDP, PROBE_WAIT_MS each, PROBE_MIN_MS apart
 * at first, doubling to PROBE_MAX_MS. */
#define TRANSPORT_CHECK_MS 250
#define RACE_AFTER_MS 1000
#define ALT_WAIT_MS 500
#define PROBE_WAIT_MS 3000
#define PROBE_MIN_MS 2000
#define PROBE_MAX_MS 16000
/* With a Proxy, direct TCP to the server gets this long to connect
 * before the proxy is asked instead (Transport = auto). */
#define DIRECT_TCP_WAIT_MS 1500
/* The proxy refused us (a 407, a 403, SOCKS5 rules): that will not
 * change soon, so the next attempt waits the longest back-off. */
#define PROXY_REFUSED_FAILURES 16

/* Application close codes of the protocol (docs/PROTOCOL.md). */
#define APP_ERR_NOT_ALLOWED 3

/* "198.18.3.2:4433 (QUIC)", "[fd00:3::2]:443 (TLS over TCP)",
 * "198.18.3.2:443 (TLS over TCP through http://198.18.1.1:3128)": where
 * a session goes, for the log (`via`: through the proxy). */
#define EP_STRLEN (ADDR_STRLEN + PROXY_URL_STRLEN + 48)
static const char *
endpoint_str(const struct client *c, bool tcp, bool via, char *buf, size_t len)
{
	char a[ADDR_STRLEN];

	addr_sockaddr_str((const struct sockaddr *)(tcp ? &c->server_tcp :
	    &c->server), a);
	snprintf(buf, len, "%s (%s%s%s)", a, tcp ? "TLS over TCP" : "QUIC",
	    tcp && via ? " through " : "", tcp && via ? c->proxy_str : "");
	return buf;
}

static void schedule_probe(struct client *);
static void probe_drop(struct client *);

/* `next`, established, becomes the session in place of the current one,
 * which closes. Forwards cannot move with it: they are reset, as on a
 * reconnect, and new ones open on `next`. The TUN stays. */
static void
switch_session(struct client *c, struct quic_conn *next)
{
	struct quic_conn *old = c->qc;

	forward_detach(c->fwd, true);
	client_tun_session_gone(c);
	c->qc = next;
	c->configured = false;
	c->ctl_open = false;
	c->ctllen = 0;
	if (old != NULL)
		quic_conn_close(old, PROTO_CLOSE_MOVED,
		    "the session moved to another transport");
}

/* A session that completed its handshake: the one in use, or one of the
 * auto transport's candidates, which takes over. False: `qc` is not to
 * be used (it is closing). */
static bool
take_session(struct client *c, struct quic_conn *qc)
{
	/* A rate probe is never the session: it measures. */
	if (qc == c->probe && c->probe_rate) {
		evtimer_del(c->probe_ev);
		client_throttle_probe_up(c, clock_now_ms());
		return false;
	}
	if (qc == c->probe) {
		struct csock *ps = c->probe_sock;

		if (c->throttled)
			log_info("QUIC answers again: the session moves back to "
			    "it, %llu s after it looked throttled",
			    (unsigned long long)(clock_now_ms() -
			    c->throttle_moved_ms) / 1000);
		else
			log_info("UDP gets through again: the session moves back to QUIC");
		c->roam.quic_returns++;
		client_throttle_moved(c, false, clock_now_ms());
		c->probe = NULL;
		c->probe_sock = NULL;
		evtimer_del(c->probe_ev);
		switch_session(c, qc);
		client_path_sock_free(c->old_sock);
		c->old_sock = NULL;
		client_path_sock_free(c->sock);
		c->sock = ps;
		return true;
	}
	if (qc == c->alt) {
		/* Raced because QUIC looked policed: QUIC "works", and that
		 * is the trouble; TLS over TCP takes over for its trial. */
		bool quic_up = c->qc != NULL && !quic_conn_is_tcp(c->qc) &&
		    quic_conn_state(c->qc) == QUIC_STATE_ESTABLISHED &&
		    !c->alt_for_throttle;

		/* QUIC came through meanwhile, and works: it is preferred. */
		if (quic_up && (quic_conn_ack_silence_ms(c->qc) < STALL_MS ||
		    clock_now_ms() < c->quic_grace_until_ms)) {
			c->alt = NULL;
			c->alt_waited = false;
			quic_conn_close(qc, 0, "QUIC works");
			return false;
		}
		/* TCP gets through, so the path may just have come back after
		 * a silence: then QUIC answers a path validation within a
		 * round trip, sooner than its retransmission timer. It gets
		 * that chance (ALT_WAIT_MS) before a switch resets every
		 * forward; alt_wait_cb decides. */
		if (quic_up && !c->alt_waited && client_path_reprobe(c)) {
			struct timeval tv = { 0, ALT_WAIT_MS * 1000 };

			c->alt_waited = true;
			log_debug("TLS over TCP is up: QUIC gets %d ms to answer first",
			    ALT_WAIT_MS);
			evtimer_add(c->alt_wait_ev, &tv);
			return false;
		}
		c->alt = NULL;
		c->alt_waited = false;
		char ep[EP_STRLEN];

		log_info("the session moves to %s", endpoint_str(c, true,
		    quic_tcp_via_proxy(qc), ep, sizeof ep));
		c->roam.tcp_fallbacks++;
		c->alt_failures = 0;
		client_throttle_moved(c, true, clock_now_ms());
		switch_session(c, qc);
		c->probes = 0;
		schedule_probe(c);
		return true;
	}
	/* QUIC answered while TCP was still connecting: QUIC wins. */
	if (c->alt != NULL) {
		struct quic_conn *alt = c->alt;

		c->alt = NULL;
		quic_conn_close(alt, 0, "QUIC works");
	}
	return true;
}

static void handshake_done_cb(struct quic_conn *, void *);

/* TLS over TCP waited ALT_WAIT_MS for QUIC to answer: take_session
 * decides again, and this time does not wait. */
static void
alt_wait_cb(evutil_socket_t fd, short what, void *arg)
{
	struct client *c = arg;

	(void)fd;
	(void)what;
	if (c->alt != NULL && c->alt_waited &&
	    quic_conn_state(c->alt) == QUIC_STATE_ESTABLISHED)
		handshake_done_cb(c->alt, c);
}

static bool
pin_check(struct quic_conn *qc, const uint8_t *pub, void *arg)
{
	struct client *c = arg;

	(void)qc;
	memcpy(c->presented_key, pub, KEY_LEN);
	c->have_presented_key = true;
	return memcmp(pub, c->cfg->server_pubkey, KEY_LEN) == 0;
}

/* Streams may be opened now (0-RTT keys are in place, or the handshake
 * completed): forwards need not wait for the server's configuration.
 * The control stream must be stream 0, so it is opened first, even
 * though its CLIENT_HELLO waits for the handshake. */
static int
open_streams(struct client *c)
{
	if (!c->ctl_open) {
		if (quic_conn_open_stream(c->qc, NULL) != 0)
			return -1;
		c->ctl_open = true;
	}
	if (forward_set(c->fwd) == NULL)
		forward_attach(c->fwd, c->qc);
	return 0;
}

static void
handshake_done_cb(struct quic_conn *qc, void *arg)
{
	struct client *c = arg;
	struct proto_client_hello hello = { PROTO_VERSION, PROTO_FEATURES };
	struct quic_conn_stats st;
	uint8_t buf[64];
	size_t n;

	if (!take_session(c, qc))
		return;
	c->session_up = true;
	if (quic_conn_is_tcp(qc) && quic_tcp_via_proxy(qc) && !c->proxy_worked &&
	    c->cfg->transport == CFG_TRANSPORT_AUTO) {
		c->proxy_worked = true;
		log_info("through %s: TLS over TCP goes through it at once "
		    "while it works", c->proxy_str);
	}
	c->latest_handshake = clock_wall();
	/* Every session after the first is a reconnect, whichever way the
	 * last one went: lost, given up for TLS over TCP, or replaced by a
	 * transport switch. */
	if (c->handshakes++ > 0)
		c->roam.reconnects++;
	/* A NAT that forgot us before stays as forgetful. */
	if (c->keepalive_ms != 0)
		quic_conn_set_keepalive_ms(qc, c->keepalive_ms);
	quic_conn_get_stats(qc, &st);
	if (st.early_attempted) {
		c->roam.zero_rtt_attempted++;
		if (st.early_accepted)
			c->roam.zero_rtt_accepted++;
		else
			c->roam.zero_rtt_rejected++;
	}
	n = proto_encode_client_hello(buf, sizeof buf, &hello);
	if (open_streams(c) != 0 || n == 0 ||
	    quic_conn_stream_send(qc, 0, buf, n, false) != 0) {
		quic_conn_close(qc, 1, "cannot open the control stream");
		return;
	}
	fwd_set_handshake_done(forward_set(c->fwd), st.early_accepted);
	forward_resume(c->fwd);
}

/* The service manager learns we are up (READY, the first time) and over
 * which path; `what` says how far the session is. */
void
client_notify(struct client *c, const char *what)
{
	char local[ADDR_STRLEN], status[256];

	snprintf(status, sizeof status, "%s: %s:%u from %s%s%s", what,
	    c->cfg->server_host, (unsigned)c->cfg->server_port,
	    c->sock != NULL ? addr_sockaddr_str((const struct sockaddr *)
	    &c->sock->sock.local, local) : "-", c->tun_open ? ", tunnel on " : "",
	    c->tun_open ? c->tun.name : "");
	notify_ready(status);
}

/* Stream ends: a UDP flow's, else a forward's
 * (streams.h); the flows are the session's connection's alone. */
static void
stream_reset_cb(struct quic_conn *qc, int64_t sid, uint64_t code,
    void *stream_arg, void *arg)
{
	struct client *c = arg;

	streams_reset(qc == c->qc ? forward_udp(c->fwd) : NULL, qc, sid, code,
	    stream_arg);
}

static void
stream_close_cb(struct quic_conn *qc, int64_t sid, uint64_t code,
    void *stream_arg, void *arg)
{
	struct client *c = arg;

	streams_close(qc == c->qc ? forward_udp(c->fwd) : NULL, qc, sid, code,
	    stream_arg);
}

static int
stream_data_cb(struct quic_conn *qc, int64_t stream_id, const uint8_t *data,
    size_t len, bool fin, void *stream_arg, void *arg)
{
	struct client *c = arg;
	const uint8_t *body;
	uint64_t type;
	size_t bodylen;
	long used;

	/* A connection being given up (replaced by a transport switch) has
	 * nothing more to say: its forwards moved to the new one. */
	if (qc != c->qc) {
		quic_conn_stream_consume(qc, stream_id, len);
		return 0;
	}
	if (stream_id != 0 && udp_relay_stream_data(forward_udp(c->fwd),
	    stream_id, stream_arg, data, len, fin))
		return 0;
	if (stream_id != 0) {
		struct fwd_set *set = forward_set(c->fwd);

		if (set == NULL) {
			quic_conn_stream_consume(qc, stream_id, len);
			quic_conn_stream_reset(qc, stream_id, PROTO_FWD_ERR_UNREACHABLE);
			return 0;
		}
		return fwd_on_data(set, stream_id, stream_arg, data, len, fin);
	}
	if (len > sizeof c->ctl - c->ctllen)
		return -1;
	memcpy(c->ctl + c->ctllen, data, len);
	c->ctllen += len;
	quic_conn_stream_consume(qc, stream_id, len);
	while ((used = proto_msg_next(c->ctl, c->ctllen, &type, &body, &bodylen)) > 0) {
		if (type == PROTO_MSG_SERVER_CONFIG) {
			if (client_tun_apply_config(c, body, bodylen) != 0)
				return -1;
		} else if (type == PROTO_MSG_PATH_NOTICE) {
			client_path_notice(c, body, bodylen);
		} else if (type == PROTO_MSG_LOSS_REPORT) {
			client_throttle_report(c, body, bodylen);
		} else if (type == PROTO_MSG_REMOTE_FORWARD_REPLY) {
			if (forward_control(c->fwd, type, body, bodylen) != 0)
				return -1;
		} else if (type == PROTO_MSG_ERROR) {
			struct proto_error e;
			char text[4 * sizeof e.text];

			/* The text is the server's to choose: escaped, it
			 * can neither drive the terminal nor forge lines.
			 * The code goes first so a long text cannot cut
			 * it off the line. */
			if (proto_decode_error(body, bodylen, &e) == 0) {
				log_escape(text, sizeof text, e.text, strlen(e.text));
				log_error("server error %llu: %s",
				    (unsigned long long)e.code, text);
			}
		}
		memmove(c->ctl, c->ctl + used, c->ctllen - (size_t)used);
		c->ctllen -= (size_t)used;
	}
	return used < 0 ? -1 : 0;
}

static void
reconnect_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	client_connect(arg);
}

/* Exponential back-off with jitter: 250 ms doubling to 30 s, each delay
 * drawn from [d/2, d] so that clients of a restarted server spread out. */
static void
schedule_reconnect(struct client *c)
{
	uint64_t d = BACKOFF_MIN_MS;
	uint32_t r;
	struct timeval tv;

	for (unsigned i = 0; i < c->failures && d < BACKOFF_MAX_MS; i++)
		d *= 2;
	if (d > BACKOFF_MAX_MS)
		d = BACKOFF_MAX_MS;
	random_bytes((uint8_t *)&r, sizeof r);
	d = d / 2 + r % (d / 2 + 1);
	c->failures++;
	tv.tv_sec = (time_t)(d / 1000);
	tv.tv_usec = (suseconds_t)(d % 1000) * 1000;
	log_info("reconnecting in %llu ms", (unsigned long long)d);
	notify_status("reconnecting to %s:%u (attempt %u)", c->cfg->server_host,
	    (unsigned)c->cfg->server_port, c->failures);
	evtimer_add(c->reconnect_ev, &tv);
}

/* What a newcomer should check after a connection that never came up,
 * from how it failed ("" when the reason says it all). */
/* A handshake that ended on the key exchange: the server's
 * handshake_failure, or our illegal_parameter to a server that asked for
 * a group we do not offer (tls_kex_alert). */
static bool
kex_alert(const struct quic_close_info *ci)
{
	return ci->transport && tls_kex_alert(ci->code) &&
	    ci->remote == (ci->code == 0x100 + 40);
}

static const char *
connect_hint(const struct quic_close_info *ci, bool tcp)
{
	if (ci->proxy)
		return "";
	if (kex_alert(ci))
		return tls_kex_hint((int)(ci->code - 0x100), false);
	if (tcp && strstr(ci->reason, "refused") != NULL)
		return ": nothing listens there; is ListenTCP set in roved.conf?";
	if (!tcp && strstr(ci->reason, "refused") != NULL)
		return ": nothing listens there; is roved running, on that port?";
	if (!tcp && !ci->remote)
		return ": no answer; is roved running and listening on that "
		    "address family and port, and UDP let through?";
	if (tcp && !ci->remote)
		return ": no answer; is ListenTCP set in roved.conf, and TCP let "
		    "through?";
	/* An alert from a TLS server that is not roved, most often a web
	 * server that a proxy sharing port 443 chose without our SNI. */
	if (tcp && ci->remote && ci->transport && ci->code >= 0x100 &&
	    ci->code < 0x200)
		return ": is it roved that answers there? A proxy that routes by "
		    "SNI may send rove to a website: see ServerName";
	return "";
}

/* A TLS alert (CRYPTO_ERROR 0x100 + alert) that says the server refused
 * our certificate, i.e. our key: retrying cannot help, so rove stops.
 * Any other alert (internal_error, or none at all) may be transient and
 * is retried like a lost connection. */
static bool
refusal_alert(uint64_t code)
{
	if (code < 0x100 || code >= 0x200)
		return false;
	switch (code - 0x100) {
	case 42:        /* bad_certificate */
	case 43:        /* unsupported_certificate */
	case 44:        /* certificate_revoked */
	case 45:        /* certificate_expired */
	case 46:        /* certificate_unknown */
	case 48:        /* unknown_ca: wolfSSL's answer to a refused pin */
	case 49:        /* access_denied */
	case 116:       /* certificate_required */
		return true;
	}
	return false;
}

/* Our key refused, or (KeyExchange = pq-required) a server without a
 * post-quantum key exchange: retrying cannot help, on either transport. */
static bool
refused(const struct quic_close_info *ci)
{
	if (kex_alert(ci) && tls_kex() == TLS_KEX_PQ_REQUIRED)
		return true;
	return ci->remote && ((ci->transport && refusal_alert(ci->code)) ||
	    (!ci->transport && ci->code == APP_ERR_NOT_ALLOWED));
}

/* A connection that is not the session ended: a candidate of the auto
 * transport that failed, or the session one replaced. Returns true when
 * that is all (false: a refusal, handled as for the session). */
static bool
other_closed(struct client *c, struct quic_conn *qc,
    const struct quic_close_info *ci)
{
	bool alt = qc == c->alt, probe = qc == c->probe;
	bool rate = probe && c->probe_rate;
	bool tcp = quic_conn_is_tcp(qc);
	bool proxied = tcp && quic_tcp_via_proxy(qc);
	bool reached = proxied && quic_tcp_proxy_reached(qc);
	/* A proxy's own failure names it in the reason. */
	bool via = proxied && !ci->proxy;

	if (alt)
		c->alt = NULL;
	if (probe) {
		c->probe = NULL;   /* freed below */
		probe_drop(c);
		if (rate && !c->stopping)
			client_throttle_probe_lost(c);
	}
	quic_conn_free(qc);
	if (!alt && !probe) {
		/* A QUIC session left behind: its UDP socket goes too. */
		if (!tcp && c->qc != NULL && quic_conn_is_tcp(c->qc)) {
			client_path_sock_free(c->old_sock);
			c->old_sock = NULL;
			client_path_sock_free(c->sock);
			c->sock = NULL;
		}
		return true;
	}
	if (c->stopping) {
		if (c->qc == NULL && c->alt == NULL)
			event_base_loopexit(c->base, NULL);
		return true;
	}
	if (ci->pin_mismatch || refused(ci))
		return false;
	/* No way to the proxy: another network, perhaps, where TCP goes out
	 * directly. A proxy that answered is there, even if the server was
	 * not (a 503 while roved restarts): it stays the way. Direct TCP
	 * failed: the proxy's turn. */
	if (alt && c->proxy.kind != PROXY_NONE) {
		if (proxied && !reached)
			c->proxy_worked = false;
		c->proxy_next = !proxied;
	}
	if (probe) {
		log_info("QUIC %sprobe failed: %s", rate ? "rate " : "",
		    ci->reason[0] ? ci->reason : "unknown reason");
	} else {
		char ep[EP_STRLEN];

		if (ci->proxy_refused)
			log_error("cannot connect to %s: %s", endpoint_str(c,
			    true, via, ep, sizeof ep), ci->reason);
		else
			log_warn("cannot connect to %s: %s%s", endpoint_str(c,
			    true, via, ep, sizeof ep), ci->reason[0] ?
			    ci->reason : "unknown reason", connect_hint(ci, true));
	}
	/* A server without ListenTCP refuses at once: do not ask again
	 * every TRANSPORT_CHECK_MS, but after 2 s, doubling to a minute. */
	if (alt) {
		uint64_t d = 2000;

		if (ci->proxy_refused && c->alt_failures < PROXY_REFUSED_FAILURES)
			c->alt_failures = PROXY_REFUSED_FAILURES;
		for (unsigned i = 0; i < c->alt_failures && d < 60000; i++)
			d *= 2;
		c->alt_failures++;
		c->alt_not_before = clock_now_ms() + (d < 60000 ? d : 60000);
	}
	if (c->qc == NULL)
		schedule_reconnect(c);   /* QUIC had given up already */
	else if (quic_conn_is_tcp(c->qc) && !evtimer_pending(c->probe_ev, NULL))
		schedule_probe(c);
	return true;
}

/* The QUIC probe in flight while on TCP, if any, its socket and its
 * timers, go. */
static void
probe_drop(struct client *c)
{
	quic_conn_free(c->probe);
	c->probe = NULL;
	client_path_sock_free(c->probe_sock);
	c->probe_sock = NULL;
	evtimer_del(c->probe_ev);
	if (c->rate_ev != NULL)
		event_del(c->rate_ev);
	c->probe_rate = false;
}

static void
closed_cb(struct quic_conn *qc, const struct quic_close_info *info, void *arg)
{
	struct client *c = arg;
	char want[KEY_B64_LEN + 1], got[KEY_B64_LEN + 1];
	struct quic_close_info copy = *info; /* it lives in the connection */
	const struct quic_close_info *ci = &copy;
	bool was_up = c->session_up, was_tcp = quic_conn_is_tcp(qc);
	bool was_via = was_tcp && quic_tcp_via_proxy(qc) && !info->proxy;
	char ep[EP_STRLEN];

	if (qc != c->qc) {
		if (other_closed(c, qc, ci))
			return;
	} else {
		/* The next connection paces its first flight by this path's
		 * RTT. */
		struct quic_conn_stats st;

		quic_conn_get_stats(qc, &st);
		if (st.rtt_ms > 0 && !st.tcp)
			c->qs.initial_rtt_ns = (uint64_t)(st.rtt_ms * 1e6);
		/* Forwarded connections wait for the next session, unless
		 * there will be none. */
		forward_detach(c->fwd, !c->stopping);
		client_tun_session_gone(c);
		quic_conn_free(c->qc);
		c->qc = NULL;
		c->session_up = false;
		c->configured = false;
		c->ctl_open = false;
		c->ctllen = 0;
		/* A probe belongs to the session over TCP. */
		probe_drop(c);
	}
	if (c->stopping) {
		if (c->alt == NULL)
			event_base_loopexit(c->base, NULL);
		return;
	}
	/* Our own TLS refused the server's answer (an alert we sent before
	 * the session was up): resuming, wolfSSL >= 5.9 names only the
	 * group of the ticket's session, and a server that now wants
	 * another one (KeyExchange changed) answers with what we cannot
	 * take, again and again. The next attempt goes without the ticket. */
	if (!was_up && ci->transport && !ci->remote && ci->code >= 0x100 &&
	    ci->code < 0x200 && c->cfg->state_dir != NULL)
		state_client_forget(c->cfg->state_dir, c->session_id);
	if (ci->pin_mismatch) {
		key_encode(c->cfg->server_pubkey, want);
		key_encode(c->presented_key, got);
		log_error("server public key mismatch: expected %s, the server "
		    "presented %s; refusing to connect", want,
		    c->have_presented_key ? got : "none");
		c->exit_status = 1;
		event_base_loopexit(c->base, NULL);
		return;
	}
	if (refused(ci) && kex_alert(ci)) {
		log_error("cannot connect to %s: %s%s; refusing to connect",
		    endpoint_str(c, was_tcp, was_via, ep, sizeof ep), ci->reason,
		    tls_kex_hint((int)(ci->code - 0x100), false));
		c->exit_status = 1;
		event_base_loopexit(c->base, NULL);
		return;
	}
	if (refused(ci)) {
		log_error("rejected by the server (%s %llu): is this client's "
		    "public key configured there?", ci->transport ? "TLS alert" :
		    "error", (unsigned long long)(ci->transport ? ci->code - 0x100 :
		    ci->code));
		c->exit_status = 1;
		event_base_loopexit(c->base, NULL);
		return;
	}
	/* TLS over TCP is still trying: it decides what comes next. */
	if (c->alt != NULL) {
		log_info("QUIC gave up (%s); waiting for TLS over TCP",
		    ci->reason[0] ? ci->reason : "unknown reason");
		return;
	}
	if (!was_up && ci->proxy_refused) {
		log_error("cannot connect to %s: %s", endpoint_str(c, was_tcp,
		    was_via, ep, sizeof ep), ci->reason);
		if (c->failures < PROXY_REFUSED_FAILURES)
			c->failures = PROXY_REFUSED_FAILURES;
	} else if (!was_up)
		log_warn("cannot connect to %s: %s%s", endpoint_str(c, was_tcp,
		    was_via, ep, sizeof ep), ci->reason[0] ? ci->reason :
		    "unknown reason", connect_hint(ci, was_tcp));
	else
		log_warn("connection to %s lost: %s%s", endpoint_str(c, was_tcp,
		    was_via, ep, sizeof ep), ci->remote ?
		    "closed by the server: " : "", ci->reason[0] ? ci->reason :
		    "unknown reason");
	if (ci->stateless_reset) {
		/* The server restarted and told us so: come back at once
		 * (with 0-RTT); back off only if it is not there yet. */
		c->roam.stateless_resets++;
		c->failures = 0;
		client_connect(c);
		return;
	}
	schedule_reconnect(c);
}

static void new_session_cb(struct quic_conn *, const uint8_t *, size_t,
    const uint8_t *, size_t, void *);
static void ticket_spent_cb(struct quic_conn *, void *);

static void
new_token_cb(struct quic_conn *qc, const uint8_t *token, size_t len, void *arg)
{
	struct client *c = arg;

	(void)qc;
	if (len == 0 || len > sizeof c->token)
		return;
	memcpy(c->token, token, len);
	c->tokenlen = len;
	c->qs.token = c->token;
	c->qs.tokenlen = c->tokenlen;
}

/* A burst over TCP brought packets: out to the TUN, coalesced. */
static void
input_done_cb(struct quic_conn *qc, void *arg)
{
	struct client *c = arg;

	(void)qc;
	if (c->tun_open)
		tunnel_flush(&c->tun_out);
}

static const struct quic_conn_cbs client_cbs = {
	.handshake_done = handshake_done_cb,
	.datagram = client_tun_datagram_cb,
	.stream_data = stream_data_cb,
	.stream_reset = stream_reset_cb,
	.stream_acked = streams_acked,
	.stream_close = stream_close_cb,
	.closed = closed_cb,
	.path_validated = client_path_validated,
	.new_session = new_session_cb,
	.ticket_spent = ticket_spent_cb,
	.new_token = new_token_cb,
	.batch_for = client_path_batch_for,
	.input_done = input_done_cb,
};

static void
new_session_cb(struct quic_conn *qc, const uint8_t *der, size_t derlen,
    const uint8_t *params, size_t paramslen, void *arg)
{
	struct client *c = arg;

	/* A rate probe's ticket is for its own ALPN, not the session's. */
	if (qc == c->probe && c->probe_rate)
		return;
	if (c->cfg->state_dir == NULL ||
	    state_client_save(c->cfg->state_dir, c->session_id, der, derlen, params,
	    paramslen) != 0)
		log_debug("cannot remember the session ticket in %s",
		    c->cfg->state_dir != NULL ? c->cfg->state_dir : "(none)");
}

static void
ticket_spent_cb(struct quic_conn *qc, void *arg)
{
	struct client *c = arg;

	(void)qc;
	if (c->cfg->state_dir != NULL)
		state_client_forget(c->cfg->state_dir, c->session_id);
}

/* The firewall mark of this TUN's own packets, and the number of its
 * policy routing table (tun_netlink_policy): from the device's name, so
 * that two clients with two TUNs keep apart, and in a range ("r" in the
 * top byte) that other tools seldom use. */
static uint32_t
tunnel_fwmark(const char *tun)
{
	uint32_t h = 2166136261u;       /* FNV-1a */

	for (const char *p = tun; *p != '\0'; p++)
		h = (h ^ (uint8_t)*p) * 16777619u;
	return 0x72000000u | (h & 0x00ffffffu);
}

/* How TLS over TCP goes this time: Transport = tcp always through the
 * proxy. Auto tries direct TCP first, unless the proxy carried the last
 * session, for then direct TCP is known to be blocked here and each
 * attempt would wait for it in vain; or unless the last attempt went
 * direct and failed after all (connected, then cut, as by a firewall
 * that inspects TLS), for it would fail the same way again. */
static enum quic_tcp_route
tcp_route(const struct client *c)
{
	if (c->proxy.kind == PROXY_NONE)
		return QUIC_TCP_DIRECT;
	if (c->cfg->transport == CFG_TRANSPORT_TCP || c->proxy_worked ||
	    c->proxy_next)
		return QUIC_TCP_PROXY;
	return QUIC_TCP_DIRECT_THEN_PROXY;
}

/* A TLS-over-TCP connection to the server, by `route`. */
static struct quic_conn *
tcp_connect(struct client *c, enum quic_tcp_route route, char **cause)
{
	struct quic_tcp_proxy px = {
		.url = &c->proxy,
		.addr = (struct sockaddr *)&c->proxy_addr,
		.target_host = c->cfg->server_tcp_host,
		.target_port = c->cfg->server_tcp_port,
		.direct_wait_ns = DIRECT_TCP_WAIT_MS * 1000000ull,
	};

	if (route != QUIC_TCP_DIRECT && !client_proxy_resolved(c)) {
		if (route == QUIC_TCP_PROXY) {
			xasprintf(cause, "proxy %s: its name does not resolve",
			    c->proxy.host);
			return NULL;
		}
		route = QUIC_TCP_DIRECT;
	}
	px.addrlen = c->proxy_addrlen;
	return quic_tcp_client_create(c->base, &c->qs, &client_cbs, c,
	    c->tls_tcp, (struct sockaddr *)&c->server_tcp, c->server_tcplen,
	    route, &px, cause);
}

/* Transport = auto: TLS over TCP next to QUIC. */
void
client_start_alt(struct client *c, const char *why)
{
	char *cause = NULL, ep[EP_STRLEN];
	enum quic_tcp_route route = tcp_route(c);

	if (c->alt != NULL || c->stopping || clock_now_ms() < c->alt_not_before)
		return;
	log_info("%s: trying %s too%s", why, endpoint_str(c, true,
	    route == QUIC_TCP_PROXY, ep, sizeof ep), route ==
	    QUIC_TCP_DIRECT_THEN_PROXY ? " (then through the proxy)" : "");
	c->alt_waited = false;
	c->alt_for_throttle = false;
	c->proxy_next = false;
	c->alt_started_ms = clock_now_ms();
	c->alt = tcp_connect(c, route, &cause);
	if (c->alt == NULL) {
		log_warn("TLS over TCP: %s", cause);
		free(cause);
		return;
	}
	quic_conn_set_send_limit(c->alt, c->cfg->forward_memory);
}

void
client_alt_drop(struct client *c)
{
	struct quic_conn *alt = c->alt;

	/* A trial of TCP against a policed QUIC races a QUIC that answers,
	 * on purpose. */
	if (alt == NULL || c->alt_for_throttle ||
	    quic_conn_state(alt) == QUIC_STATE_ESTABLISHED)
		return;
	c->alt = NULL;
	c->alt_waited = false;
	log_info("QUIC answers again: the TLS over TCP attempt is dropped");
	quic_conn_close(alt, 0, "QUIC works");
}

/* Transport = auto, every TRANSPORT_CHECK_MS: is QUIC getting through? */
static void
transport_check(evutil_socket_t fd, short what, void *arg)
{
	struct client *c = arg;
	uint64_t now = clock_now_ms(), last = c->transport_checked_ms;

	(void)fd;
	(void)what;
	c->transport_checked_ms = now;
	/* A late check means the process or the host was asleep (SIGSTOP,
	 * suspend): the silence measured across it says nothing about the
	 * path. QUIC gets STALL_MS from the wake-up to show it still works,
	 * as it does from a path that has just answered a validation. */
	if (last != 0 && now - last > 4 * TRANSPORT_CHECK_MS) {
		log_debug("%llu ms since the last transport check: woke up",
		    (unsigned long long)(now - last));
		c->quic_grace_until_ms = now + STALL_MS;
	}
	client_throttle_check(c, now);
	if (c->qc == NULL || quic_conn_is_tcp(c->qc))
		return;
	/* An acknowledgement since the attempt began (the silence is
	 * shorter than the attempt): the old path answers again, or a new
	 * one (client_path_validated drops the attempt at once then). */
	if (c->alt != NULL && quic_conn_state(c->qc) == QUIC_STATE_ESTABLISHED &&
	    quic_conn_ack_silence_ms(c->qc) < now - c->alt_started_ms)
		client_alt_drop(c);
	if (c->alt != NULL || now < c->quic_grace_until_ms)
		return;
	/* Happy eyeballs: no packet back yet, so TCP races QUIC. */
	if (quic_conn_state(c->qc) == QUIC_STATE_HANDSHAKING &&
	    quic_conn_rx_idle_ms(c->qc) >= RACE_AFTER_MS)
		client_start_alt(c, "no answer over UDP");
	/* UDP dropped mid-session: our packets go unacknowledged. */
	else if (quic_conn_state(c->qc) == QUIC_STATE_ESTABLISHED &&
	    quic_conn_ack_silence_ms(c->qc) >= STALL_MS)
		client_start_alt(c, "QUIC packets go unacknowledged");
}

/* While on TCP: a QUIC handshake on a socket of its own tells whether
 * UDP works again; one that gets no answer in PROBE_WAIT_MS is dropped
 * (it sent a few Initials), and the next waits twice as long. */
static void
probe_cb(evutil_socket_t fd, short what, void *arg)
{
	struct timeval tv = { PROBE_WAIT_MS / 1000, (PROBE_WAIT_MS % 1000) * 1000 };
	struct client *c = arg;
	struct quic_settings qs = c->qs;
	char *cause = NULL;

	(void)fd;
	(void)what;
	if (c->probe != NULL) {
		bool rate = c->probe_rate;

		probe_drop(c);
		if (rate)
			client_throttle_probe_lost(c);
		schedule_probe(c);
		return;
	}
	if (c->qc == NULL || !quic_conn_is_tcp(c->qc) || c->stopping)
		return;
	if ((c->probe_sock = client_path_sock_open(c, &cause)) == NULL) {
		log_debug("QUIC probe: %s", cause);
		free(cause);
		schedule_probe(c);
		return;
	}
	qs.probe = client_throttle_rate_probe(c);
	c->probe = quic_conn_client_create(c->base, &qs, &client_cbs, c, c->tls,
	    &c->probe_sock->batch, (struct sockaddr *)&c->server, c->serverlen,
	    NULL, &cause);
	if (c->probe == NULL) {
		log_debug("QUIC probe: %s", cause);
		free(cause);
		client_path_sock_free(c->probe_sock);
		c->probe_sock = NULL;
		schedule_probe(c);
		return;
	}
	c->probe_rate = qs.probe;
	log_debug("probing QUIC%s (attempt %u)", qs.probe ? "'s rate" : "",
	    c->probes);
	quic_conn_set_send_limit(c->probe, c->cfg->forward_memory);
	quic_conn_write(c->probe);
	udp_batch_flush(&c->probe_sock->batch);
	evtimer_add(c->probe_ev, &tv);
}

static void
schedule_probe(struct client *c)
{
	uint64_t d = PROBE_MIN_MS, now = clock_now_ms();
	uint64_t at = client_throttle_probe_at(c);
	struct timeval tv;

	if (c->cfg->transport != CFG_TRANSPORT_AUTO || c->stopping)
		return;
	for (unsigned i = 0; i < c->probes && d < PROBE_MAX_MS; i++)
		d *= 2;
	if (d > PROBE_MAX_MS)
		d = PROBE_MAX_MS;
	/* On TCP because QUIC looked policed: not before the hold ends. */
	if (at > now + d)
		d = at - now;
	c->probes++;
	tv.tv_sec = (time_t)(d / 1000);
	tv.tv_usec = (suseconds_t)(d % 1000) * 1000;
	evtimer_add(c->probe_ev, &tv);
}

void
client_probe_end(struct client *c, bool now)
{
	if (c->probe != NULL)
		quic_conn_close(c->probe, 0, "rate probe over");
	probe_drop(c);
	c->probes = 0;
	if (now)
		probe_cb(-1, 0, c);
	else
		schedule_probe(c);
}

/* A route or link changed while the session is on TCP: UDP may work
 * again, or the TCP path may have gone with a link. Probe QUIC now, from
 * a fresh socket on today's route, rather than at the next step of the
 * back-off; at most once a second, however noisy the network. */
void
client_probe_now(struct client *c)
{
	uint64_t now = clock_now_ms();

	if (c->qc == NULL || !quic_conn_is_tcp(c->qc) || c->stopping ||
	    c->cfg->transport != CFG_TRANSPORT_AUTO ||
	    now < c->probe_now_ms + 1000)
		return;
	c->probe_now_ms = now;
	probe_drop(c);
	c->probes = 0;
	log_debug("the network changed: probing QUIC now");
	probe_cb(-1, 0, c);
}

/* One line per attempt; repeats are numbered (the back-off between
 * them is logged where it is chosen). */
static void
log_connecting(const struct client *c, bool tcp)
{
	char ep[EP_STRLEN];
	bool via = tcp && tcp_route(c) == QUIC_TCP_PROXY;

	if (c->failures == 0)
		log_info("connecting to %s", endpoint_str(c, tcp, via, ep,
		    sizeof ep));
	else
		log_info("connecting to %s, attempt %u", endpoint_str(c, tcp,
		    via, ep, sizeof ep), c->failures + 1);
}

/* Transport = tcp: the session over TLS on TCP. */
static void
connect_tcp(struct client *c)
{
	char *cause = NULL;

	client_path_sock_free(c->old_sock);
	c->old_sock = NULL;
	client_path_sock_free(c->sock);
	c->sock = NULL;
	log_connecting(c, true);
	c->qc = tcp_connect(c, tcp_route(c), &cause);
	if (c->qc == NULL) {
		log_warn("cannot reach the server over TCP: %s", cause);
		free(cause);
		schedule_reconnect(c);
		return;
	}
	quic_conn_set_send_limit(c->qc, c->cfg->forward_memory);
}

void
client_connect_failed(struct client *c)
{
	schedule_reconnect(c);
}

void
client_connect(struct client *c)
{
	struct quic_resume resume = { .early_data = c->cfg->zero_rtt };
	uint8_t *session = NULL, *params = NULL;
	char *cause = NULL;

	if (client_resolve_again(c))
		return;
	if (c->cfg->transport == CFG_TRANSPORT_TCP) {
		connect_tcp(c);
		return;
	}
	client_path_sock_free(c->old_sock);
	c->old_sock = NULL;
	client_path_sock_free(c->sock);
	/* A fresh socket (and port) per attempt: a NAT that lost our old
	 * mapping treats us as new anyway. */
	if ((c->sock = client_path_sock_open(c, &cause)) == NULL) {
		log_warn("cannot reach the server: %s", cause);
		free(cause);
		schedule_reconnect(c);
		return;
	}
	if (c->cfg->state_dir != NULL &&
	    state_client_load(c->cfg->state_dir, c->session_id, &session,
	    &resume.sessionlen, &params, &resume.paramslen) == 0) {
		resume.session = session;
		resume.params = params;
	}
	c->qc = quic_conn_client_create(c->base, &c->qs, &client_cbs, c, c->tls,
	    &c->sock->batch, (struct sockaddr *)&c->server, c->serverlen,
	    resume.session != NULL ? &resume : NULL, &cause);
	free(session);
	free(params);
	if (c->qc == NULL) {
		log_warn("%s", cause);
		free(cause);
		schedule_reconnect(c);
		return;
	}
	quic_conn_set_send_limit(c->qc, c->cfg->forward_memory);
	log_connecting(c, false);
	quic_conn_write(c->qc);
	/* Writing the ClientHello installed the 0-RTT keys, if the ticket
	 * allows early data: held connections go in the first flight. */
	if (quic_conn_early_ready(c->qc) && open_streams(c) == 0)
		quic_conn_write(c->qc);
	udp_batch_flush(&c->sock->batch);
}

/* Sessions are remembered per server address and key, and per our own
 * key: a ticket names the peer it was issued to, so another key (a new
 * one, or another config sharing the StateDir) must not resume it. */
static void
session_id(struct client *c, const uint8_t own[static KEY_LEN])
{
	uint8_t h[32];
	char *s;

	xasprintf(&s, "%s|%u|", c->cfg->server_host, c->cfg->server_port);
	{
		size_t n = strlen(s);
		uint8_t *buf = xmalloc(n + 2 * KEY_LEN);
		memcpy(buf, s, n);
		memcpy(buf + n, c->cfg->server_pubkey, KEY_LEN);
		memcpy(buf + n + KEY_LEN, own, KEY_LEN);
		wc_Sha256Hash(buf, (word32)(n + 2 * KEY_LEN), h);
		free(buf);
	}
	free(s);
	for (size_t i = 0; i < 8; i++)
		snprintf(c->session_id + 2 * i, 3, "%02x", h[i]);
}

/* The server name the TLS-over-TCP ClientHello carries (SNI), for a
 * proxy in front of roved that routes by it: ServerName, else ServerTCP's
 * host when it is a name. An address is never sent (RFC 6066 section 3
 * allows only host names), and roved itself ignores the name. */
static const char *
client_sni(const struct cfg *cfg)
{
	if (cfg->server_name != NULL)
		return cfg->server_name;
	if (cfg->server_tcp_host != NULL && addr_dns_name_valid(cfg->server_tcp_host))
		return cfg->server_tcp_host;
	return NULL;
}

struct client *
client_create(struct event_base *base, const struct cfg *cfg, int verbose,
    char **cause)
{
	struct client *c = xcalloc(1, sizeof *c);
	uint8_t priv[KEY_LEN], pub[KEY_LEN];
	const char *sni;

	c->base = base;
	c->cfg = cfg;
	c->tun_clone = -1;
	tunnel_out_init(&c->tun_out, &c->tun, &c->counters);
	random_bytes(c->reset_secret, sizeof c->reset_secret);
	c->qs = (struct quic_settings){
		.role = QUIC_ROLE_CLIENT,
		.cc = cfg->congestion == CFG_CC_BBR ? NGTCP2_CC_ALGO_BBR : NGTCP2_CC_ALGO_CUBIC,
		.idle_timeout_s = cfg->idle_timeout,
		.keepalive_s = cfg->keepalive,
		.reset_secret = c->reset_secret,
		.stream_window = cfg->forward_buffer,
		.verbose = verbose > 1,
		.qlog_dir = cfg->qlog_dir,
	};
	quic_set_pin_check(pin_check);
	c->reconnect_ev = evtimer_new(base, reconnect_cb, c);
	c->probe_ev = evtimer_new(base, probe_cb, c);
	c->alt_wait_ev = evtimer_new(base, alt_wait_cb, c);
	if (cfg->transport == CFG_TRANSPORT_AUTO) {
		struct timeval tv = { 0, TRANSPORT_CHECK_MS * 1000 };

		c->transport_ev = event_new(base, -1, EV_PERSIST, transport_check, c);
		event_add(c->transport_ev, &tv);
	}
	c->path_ev = evtimer_new(base, client_path_check, c);
	if (cfg->transport != CFG_TRANSPORT_TCP) {
		struct timeval tv = { 0, UPLINK_CHECK_MS * 1000 };

		c->uplink_ev = event_new(base, -1, EV_PERSIST, client_path_watch, c);
		event_add(c->uplink_ev, &tv);
		c->silent_ev = evtimer_new(base, client_path_watch, c);
	}
	/* The TUN device itself comes up with the server's configuration,
	 * but its clone device may be root's alone: open it now, before
	 * daemon_main drops root (attaching needs only CAP_NET_ADMIN). */
	if (cfg->tun != NULL && (c->tun_clone = tun_clone_open(cause)) == -1)
		goto fail;
	if (cfg->tun != NULL)
		c->qs.fwmark = c->fwmark = tunnel_fwmark(cfg->tun);
	if (key_load_private(cfg->private_key_file, priv, cause) != 0)
		goto fail;
	if (key_public(priv, pub) != 0) {
		explicit_bzero(priv, sizeof priv);
		xasprintf(cause, "%s: cannot derive the public key",
		    cfg->private_key_file);
		goto fail;
	}
	if (tls_set_kex(cfg->key_exchange == CFG_KEX_CLASSIC ? TLS_KEX_CLASSIC :
	    cfg->key_exchange == CFG_KEX_PQ_REQUIRED ? TLS_KEX_PQ_REQUIRED :
	    TLS_KEX_HYBRID, cause) != 0) {
		explicit_bzero(priv, sizeof priv);
		goto fail;
	}
	c->tls = tls_ctx_create(TLS_ROLE_CLIENT, priv, quic_tls_pin, cause);
	if (c->tls != NULL && cfg->transport != CFG_TRANSPORT_QUIC)
		c->tls_tcp = tls_ctx_create_tcp(TLS_ROLE_CLIENT, priv, quic_tls_pin,
		    cause);
	explicit_bzero(priv, sizeof priv);
	if (c->tls == NULL || (cfg->transport != CFG_TRANSPORT_QUIC &&
	    c->tls_tcp == NULL) || client_resolve_init(c, cause) != 0 ||
	    client_proxy_init(c, cause) != 0)
		goto fail;
	if (c->tls_tcp != NULL && (sni = client_sni(cfg)) != NULL &&
	    wolfSSL_CTX_UseSNI(c->tls_tcp, WOLFSSL_SNI_HOST_NAME, sni,
	    (unsigned short)strlen(sni)) != WOLFSSL_SUCCESS) {
		xasprintf(cause, "ServerName: cannot send %s as SNI", sni);
		goto fail;
	}
	tls_ctx_enable_resumption(c->tls, TLS_ROLE_CLIENT, cfg->zero_rtt);
	if (cfg->keylog_file != NULL &&
	    (tls_ctx_set_keylog(c->tls, cfg->keylog_file, cause) != 0 ||
	    (c->tls_tcp != NULL &&
	    tls_ctx_set_keylog(c->tls_tcp, cfg->keylog_file, cause) != 0)))
		goto fail;
	if (cfg->qlog_dir != NULL)
		log_info("QlogDir: a qlog file per connection goes to %s",
		    cfg->qlog_dir);
	if ((c->fwd = forward_create(base, cfg, cause)) == NULL)
		goto fail;
	session_id(c, pub);
	forward_set_key(c->fwd, pub);
	/* Roaming needs to hear about address, route and link changes; without
	 * a monitor the connection still works, it just cannot migrate. */
	if ((c->monitor = tun_monitor_create(base, client_path_monitor_cb, c, cause)) == NULL) {
		log_warn("no network monitor, no migration: %s", *cause);
		free(*cause);
		*cause = NULL;
	}
	/* A 1500-byte outer path less the IP and UDP headers. */
	c->qs.max_udp_payload = c->server.ss_family == AF_INET6 ? UDP_MAX_PAYLOAD6 :
	    UDP_MAX_PAYLOAD;
	c->control = control_create(base, cfg->control_socket, client_status_control_cb, c, cause);
	if (c->control == NULL)
		goto fail;
	if (cfg->metrics_listen_len != 0 && (c->metrics = metrics_create(base,
	    (const struct sockaddr *)&cfg->metrics_listen,
	    cfg->metrics_listen_len, cfg->metrics_connections,
	    client_status_scrape, c, cause)) == NULL)
		goto fail;
	/* Before root is dropped: it undoes a crashed run's resolver
	 * changes and may fork the helper that makes new ones. */
	if ((c->dns = dns_create(cfg, cause)) == NULL)
		goto fail;
	client_connect(c);
	return c;
fail:
	client_free(c);
	return NULL;
}

void
client_shutdown(struct client *c)
{
	c->stopping = true;
	evtimer_del(c->reconnect_ev);
	evtimer_del(c->probe_ev);
	if (c->rate_ev != NULL)
		event_del(c->rate_ev);
	if (c->transport_ev != NULL)
		event_del(c->transport_ev);
	if (c->probe != NULL) {
		quic_conn_free(c->probe);
		c->probe = NULL;
	}
	if (c->alt != NULL)
		quic_conn_close(c->alt, 0, "client shutting down");
	if (c->qc == NULL) {
		if (c->alt == NULL)
			event_base_loopexit(c->base, NULL);
		return;
	}
	quic_conn_close(c->qc, 0, "client shutting down");
	quic_write_dirty();
}

void
client_free(struct client *c)
{
	char *cause = NULL;

	if (c == NULL)
		return;
	explicit_bzero(&c->proxy, sizeof c->proxy);
	client_tun_session_gone(c);
	if (c->qc != NULL)
		quic_conn_free(c->qc);
	quic_conn_free(c->alt);
	quic_conn_free(c->probe);
	quic_tcp_linger_clear();
	client_path_sock_free(c->probe_sock);
	if (c->probe_ev != NULL)
		event_free(c->probe_ev);
	if (c->rate_ev != NULL)
		event_free(c->rate_ev);
	if (c->transport_ev != NULL)
		event_free(c->transport_ev);
	if (c->uplink_ev != NULL)
		event_free(c->uplink_ev);
	if (c->silent_ev != NULL)
		event_free(c->silent_ev);
	if (c->alt_wait_ev != NULL)
		event_free(c->alt_wait_ev);
	/* The routes in the policy table go with the device; the rules
	 * would outlive us. */
	if (c->policy_on &&
	    tun_netlink_policy(false, c->policy_family, c->fwmark, &cause) != 0) {
		log_warn("removing the tunnel's policy rules: %s", cause);
		free(cause);
	}
	if (c->tun_ev != NULL)
		event_free(c->tun_ev);
	client_resolve_free(c);
	/* While the device is there: resolved's link still has it. */
	dns_free(c->dns);
	/* Routes through the TUN vanish with the device. */
	if (c->tun_open) {
		tunnel_flush(&c->tun_out);
		tun_close(&c->tun);
	}
	tunnel_out_clear(&c->tun_out);
	if (c->tun_clone != -1)
		close(c->tun_clone);
	client_path_sock_free(c->sock);
	client_path_sock_free(c->old_sock);
	tun_monitor_free(c->monitor);
	if (c->path_ev != NULL)
		event_free(c->path_ev);
	if (c->reconnect_ev != NULL)
		event_free(c->reconnect_ev);
	control_free(c->control);
	metrics_free(c->metrics);
	forward_free(c->fwd);
	if (c->tls != NULL)
		wolfSSL_CTX_free(c->tls);
	if (c->tls_tcp != NULL)
		wolfSSL_CTX_free(c->tls_tcp);
	free(c);
}

int
client_reload(struct client *c, const struct cfg *next)
{
	if (next == NULL || forward_reload(c->fwd, next,
	    c->qc != NULL && c->configured ? c->qc : NULL) != 0) {
		c->reloads_refused++;
		return -1;
	}
	c->reloads++;
	if (c->qc != NULL)
		quic_write_dirty();
	return 0;
}

int
client_exit_status(const struct client *c)
{
	return c->exit_status;
}
