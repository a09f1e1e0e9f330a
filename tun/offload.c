/* TUN offloads without I/O: segmentation of TSO/USO super-packets and
 * GRO-style coalescing, over byte buffers (see offload.h). */
#include <netinet/in.h>
#include <sys/socket.h>

#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"
#include "base/xmalloc.h"
#include "offload.h"
#include "wire/ippkt.h"

#define TCP_FIN 0x01
#define TCP_SYN 0x02
#define TCP_RST 0x04
#define TCP_PSH 0x08
#define TCP_ACK 0x10
#define TCP_URG 0x20
#define TCP_ECE 0x40
#define TCP_CWR 0x80

#define TCP_CSUM_OFF 16
#define UDP_CSUM_OFF 6

/* The TCP/UDP pseudo-header of the IP header at `ip`, for `l4len` bytes. */
static uint64_t
pseudo(const uint8_t *ip, int family, uint8_t proto, size_t l4len)
{
	uint64_t sum;

	if (family == AF_INET)
		sum = ippkt_csum_add(0, ip + 12, 8);
	else
		sum = ippkt_csum_add(0, ip + 8, 32);
	return sum + proto + (uint32_t)l4len;
}

static uint16_t
ipv4_hdr_csum(const uint8_t *ip, size_t iphlen)
{
	return (uint16_t)~ippkt_csum_fold(ippkt_csum_add(0, ip, iphlen));
}

/* What the IP and transport headers of a packet say about it. */
struct l34 {
	int family;
	size_t iphlen;
	size_t totlen;   /* from the IP header */
	uint8_t proto;   /* 0 for a fragment or an unparsed IPv6 next header */
	size_t l4hlen;   /* 0 when there is no whole TCP/UDP header */
	bool frag;
};

static int
parse_l34(const uint8_t *p, size_t len, struct l34 *l)
{
	memset(l, 0, sizeof *l);
	if (len < 1)
		return -1;
	switch (p[0] >> 4) {
	case 4:
		if (len < 20)
			return -1;
		l->family = AF_INET;
		l->iphlen = (size_t)(p[0] & 0x0f) * 4;
		l->totlen = be16_get(p + 2);
		if (l->iphlen < 20 || l->totlen < l->iphlen || l->totlen > len)
			return -1;
		l->frag = (be16_get(p + 6) & 0x3fff) != 0;
		l->proto = l->frag ? 0 : p[9];
		break;
	case 6:
		if (len < 40)
			return -1;
		l->family = AF_INET6;
		l->iphlen = 40;
		l->totlen = 40 + (size_t)be16_get(p + 4);
		if (l->totlen > len)
			return -1;
		/* Extension headers are not walked: nothing we coalesce or
		 * split carries them, and the kernel's GRO refuses them too. */
		l->proto = p[6];
		break;
	default:
		return -1;
	}
	if (l->proto == IPPROTO_TCP && l->totlen >= l->iphlen + 20) {
		size_t doff = (size_t)(p[l->iphlen + 12] >> 4) * 4;

		if (doff >= 20 && l->iphlen + doff <= l->totlen)
			l->l4hlen = doff;
	} else if (l->proto == IPPROTO_UDP && l->totlen >= l->iphlen + 8)
		l->l4hlen = 8;
	return 0;
}

/* The full checksum of the transport segment of the packet at `ip`. */
static uint16_t
l4_csum(const uint8_t *ip, const struct l34 *l)
{
	size_t l4len = l->totlen - l->iphlen;

	return (uint16_t)~ippkt_csum_fold(pseudo(ip, l->family, l->proto, l4len) +
	    ippkt_csum_add(0, ip + l->iphlen, l4len));
}

/* Complete a partial checksum: the field holds the pseudo-header sum and
 * the data from csum_start on completes it (the kernel's
 * skb_checksum_help, including its 0 -> 0xffff for UDP's sake). */
static void
complete_csum(uint8_t *pkt, size_t len, size_t start, size_t at)
{
	uint16_t c = (uint16_t)~ippkt_csum_fold(ippkt_csum_add(0, pkt + start, len - start));

	be16_put(pkt + at, c == 0 ? 0xffff : c);
}

int
offload_seg_init(struct offload_seg *s, const struct virtio_net_hdr *vh,
    uint8_t *pkt, size_t len, size_t max_pkt)
{
	struct virtio_net_hdr h;
	struct l34 l;
	uint8_t type;
	size_t start, coff, want;

	memset(s, 0, sizeof *s);
	s->pkt = pkt;
	s->len = len;
	memcpy(&h, vh, sizeof h);
	if (h.flags & ~(VIRTIO_NET_HDR_F_NEEDS_CSUM | VIRTIO_NET_HDR_F_DATA_VALID))
		return -1;
	type = h.gso_type & (uint8_t)~VIRTIO_NET_HDR_GSO_ECN;
	start = h.csum_start;
	coff = h.csum_offset;
	/* hdr_len is only a hint: the kernel reports its linear head there,
	 * which may hold payload too. It must still lie within the packet. */
	if (h.hdr_len > len)
		return -1;
	if (type == VIRTIO_NET_HDR_GSO_NONE) {
		if (h.gso_type & VIRTIO_NET_HDR_GSO_ECN)
			return -1;
		if (!(h.flags & VIRTIO_NET_HDR_F_NEEDS_CSUM))
			return 0;
		if (parse_l34(pkt, len, &l) != 0)
			return -1;
		/* TCP and UDP straight after the IP header are what the
		 * kernel asks us to finish; the checksum must be theirs. */
		if (l.proto == IPPROTO_TCP || l.proto == IPPROTO_UDP) {
			want = l.proto == IPPROTO_TCP ? TCP_CSUM_OFF : UDP_CSUM_OFF;
			if (l.l4hlen == 0 || start != l.iphlen || coff != want)
				return -1;
		} else if (start < l.iphlen) {
			return -1;
		}
		if (start + coff + 2 > l.totlen)
			return -1;
		complete_csum(pkt, l.totlen, start, start + coff);
		return 0;
	}

	if (!(h.flags & VIRTIO_NET_HDR_F_NEEDS_CSUM) || h.gso_size == 0)
		return -1;
	if (parse_l34(pkt, len, &l) != 0 || l.totlen != len || l.l4hlen == 0)
		return -1;
	switch (type) {
	case VIRTIO_NET_HDR_GSO_TCPV4:
	case VIRTIO_NET_HDR_GSO_TCPV6:
		if (l.proto != IPPROTO_TCP || l.family !=
		    (type == VIRTIO_NET_HDR_GSO_TCPV4 ? AF_INET : AF_INET6))
			return -1;
		want = TCP_CSUM_OFF;
		break;
	case VIRTIO_NET_HDR_GSO_UDP_L4:
		if (l.proto != IPPROTO_UDP || (h.gso_type & VIRTIO_NET_HDR_GSO_ECN))
			return -1;
		want = UDP_CSUM_OFF;
		break;
	default:
		return -1;
	}
	if (start != l.iphlen || coff != want)
		return -1;
	s->iphlen = l.iphlen;
	s->hlen = l.iphlen + l.l4hlen;
	if (s->hlen >= len)
		return -1;
	/* USO's length field must cover the whole super-packet. */
	if (l.proto == IPPROTO_UDP && be16_get(pkt + l.iphlen + 4) != len - l.iphlen)
		return -1;
	s->family = l.family;
	s->proto = l.proto;
	s->gso = true;
	s->mss = h.gso_size;
	if (l.proto == IPPROTO_TCP && max_pkt > s->hlen && max_pkt - s->hlen < s->mss)
		s->mss = max_pkt - s->hlen;
	s->off = s->hlen;
	memcpy(s->hdr, pkt, s->hlen);
	return 0;
}

uint8_t *
offload_seg_next(struct offload_seg *s, size_t *lenp)
{
	uint8_t *p, *l4, flags;
	size_t n, l4len, csum_at;
	bool last;
	uint16_t c;

	if (!s->gso) {
		if (s->n++ > 0)
			return NULL;
		*lenp = s->len;
		return s->pkt;
	}
	if (s->off >= s->len)
		return NULL;
	n = s->len - s->off < s->mss ? s->len - s->off : s->mss;
	last = s->off + n == s->len;
	/* Headers go right before this segment's payload, over bytes of
	 * the previous segment, which the caller is done with. */
	p = s->pkt + s->off - s->hlen;
	memcpy(p, s->hdr, s->hlen);
	l4 = p + s->iphlen;
	l4len = s->hlen - s->iphlen + n;
	if (s->family == AF_INET) {
		be16_put(p + 2, (uint16_t)(s->hlen + n));
		/* Each segment is a datagram of its own: IDs increment, as
		 * the kernel's GSO does without SKB_GSO_TCP_FIXEDID. */
		be16_put(p + 4, (uint16_t)(be16_get(s->hdr + 4) + s->n));
		be16_put(p + 10, 0);
		be16_put(p + 10, ipv4_hdr_csum(p, s->iphlen));
	} else {
		be16_put(p + 4, (uint16_t)(s->hlen - 40 + n));
	}
	if (s->proto == IPPROTO_TCP) {
		be32_put(l4 + 4, be32_get(s->hdr + s->iphlen + 4) + (uint32_t)(s->off - s->hlen));
		flags = l4[13];
		/* CWR answers one congestion signal: the first segment
		 * carries it. FIN and PSH belong at the end of the data. */
		if (s->n > 0)
			flags &= (uint8_t)~TCP_CWR;
		if (!last)
			flags &= (uint8_t)~(TCP_FIN | TCP_PSH);
		l4[13] = flags;
		csum_at = TCP_CSUM_OFF;
	} else {
		be16_put(l4 + 4, (uint16_t)l4len);
		csum_at = UDP_CSUM_OFF;
	}
	be16_put(l4 + csum_at, 0);
	c = (uint16_t)~ippkt_csum_fold(pseudo(p, s->family, s->proto, l4len) +
	    ippkt_csum_add(0, l4, l4len));
	if (c == 0 && s->proto == IPPROTO_UDP)
		c = 0xffff;
	be16_put(l4 + csum_at, c);
	s->off += n;
	s->n++;
	*lenp = s->hlen + n;
	return p;
}

/* Coalescing. */

#define OFFLOAD_ARENA (256 * 1024)

enum coal_kind { K_PLAIN, K_TCP, K_UDP };

struct coal_pkt {
	size_t off, len;      /* in the arena */
	void *tag;
	uint8_t kind;         /* enum coal_kind: may join a chain */
	bool has_flow;        /* addresses and ports parsed (any TCP/UDP) */
	bool member;          /* part of an earlier packet's chain */
	uint8_t proto;
	int family;
	size_t iphlen, hlen, plen;
	int next;             /* next segment of the chain, or -1 */
	/* For a chain's head: */
	int last;
	size_t nseg, total, mss;
	uint32_t next_seq;
};

struct offload_coal {
	unsigned flags;
	offload_write_fn fn;
	void *arg;
	uint8_t *arena;
	size_t used;
	struct coal_pkt pkts[OFFLOAD_BATCH];
	size_t npkts;
	int open[OFFLOAD_CHAINS];   /* heads of chains that may grow */
	size_t nopen;
	uint8_t hbuf[OFFLOAD_MAX_HDR];
};

struct offload_coal *
offload_coal_create(unsigned flags, offload_write_fn fn, void *arg)
{
	struct offload_coal *c = xcalloc(1, sizeof *c);

	c->flags = flags;
	c->fn = fn;
	c->arg = arg;
	c->arena = xmalloc(OFFLOAD_ARENA);
	return c;
}

void
offload_coal_free(struct offload_coal *c)
{
	if (c == NULL)
		return;
	free(c->arena);
	free(c);
}

void
offload_coal_set_flags(struct offload_coal *c, unsigned flags)
{
	/* Chains already open were built under the old flags. */
	c->nopen = 0;
	c->flags = flags;
}

size_t
offload_coal_pending(const struct offload_coal *c)
{
	return c->npkts;
}

static uint8_t *
pkt_data(struct offload_coal *c, const struct coal_pkt *p)
{
	return c->arena + p->off;
}

/* Classify a packet: may it join a chain, and does it name a flow? A
 * packet that may join has a verified checksum: the kernel trusts a
 * super-packet's NEEDS_CSUM, so a corrupt segment must stay out of one,
 * to be dropped by the kernel as it would be without coalescing. */
static void
classify(struct offload_coal *c, struct coal_pkt *p, const uint8_t *d)
{
	struct l34 l;
	const uint8_t *l4;
	uint8_t fl;

	p->kind = K_PLAIN;
	if (parse_l34(d, p->len, &l) != 0 || l.l4hlen == 0 || l.totlen != p->len)
		return;
	p->has_flow = true;
	p->family = l.family;
	p->proto = l.proto;
	p->iphlen = l.iphlen;
	p->hlen = l.iphlen + l.l4hlen;
	p->plen = p->len - p->hlen;
	l4 = d + l.iphlen;
	/* inet_gro_receive: no IPv4 options, no fragments, a valid header. */
	if (l.family == AF_INET && (d[0] != 0x45 || ipv4_hdr_csum(d, 20) != 0))
		return;
	if (p->plen == 0)
		return;
	if (l.proto == IPPROTO_TCP) {
		fl = l4[13];
		if (!(c->flags & OFFLOAD_F_TSO) || (fl & (TCP_SYN | TCP_RST | TCP_URG)))
			return;
		if (l4_csum(d, &l) != 0)
			return;
		p->kind = K_TCP;
	} else {
		if (!(c->flags & OFFLOAD_F_USO) || be16_get(l4 + 4) != p->len - l.iphlen)
			return;
		/* A zero (absent) IPv4 UDP checksum cannot be vouched for. */
		if (be16_get(l4 + 6) == 0 || l4_csum(d, &l) != 0)
			return;
		p->kind = K_UDP;
	}
}

static bool
same_flow(struct offload_coal *c, const struct coal_pkt *a, const struct coal_pkt *b)
{
	const uint8_t *da = pkt_data(c, a), *db = pkt_data(c, b);

	if (a->tag != b->tag || a->family != b->family || a->proto != b->proto)
		return false;
	if (a->family == AF_INET ? memcmp(da + 12, db + 12, 8) != 0 :
	    memcmp(da + 8, db + 8, 32) != 0)
		return false;
	return memcmp(da + a->iphlen, db + b->iphlen, 4) == 0;
}

/* May `q` follow the chain headed by `h`? tcp_gro_receive's and
 * inet/ipv6_gro_receive's rules. */
static bool
can_append(struct offload_coal *c, const struct coal_pkt *h, const struct coal_pkt *q)
{
	const uint8_t *dh = pkt_data(c, h), *dq = pkt_data(c, q);
	const uint8_t *th = dh + h->iphlen, *tq = dq + q->iphlen;
	const uint8_t mask = (uint8_t)~(TCP_CWR | TCP_FIN | TCP_PSH);

	if (q->kind != h->kind || q->hlen != h->hlen || q->plen > h->mss ||
	    h->nseg >= OFFLOAD_MAX_SEGS || h->total + q->plen > 65535)
		return false;
	if (h->family == AF_INET) {
		/* TOS, TTL, DF; IDs increment by one per segment. */
		if (dh[1] != dq[1] || dh[8] != dq[8] || be16_get(dh + 6) != be16_get(dq + 6) ||
		    be16_get(dq + 4) != (uint16_t)(be16_get(dh + 4) + h->nseg))
			return false;
	} else {
		/* Traffic class, flow label, hop limit. */
		if (memcmp(dh, dq, 4) != 0 || dh[7] != dq[7])
			return false;
	}
	if (h->kind == K_UDP)
		return true;
	if (be32_get(tq + 4) != h->next_seq || be32_get(tq + 8) != be32_get(th + 8) ||
	    be16_get(tq + 14) != be16_get(th + 14) || (tq[13] & TCP_CWR) ||
	    (tq[13] & mask) != (th[13] & mask))
		return false;
	/* Options byte for byte, timestamps included, as tcp_gro_receive
	 * compares them. The super-packet carries the head's TSval only;
	 * a later segment's newer TSval would be lost to the receiver's RTT
	 * and PAWS bookkeeping. With a 1 ms timestamp clock, the segments
	 * of one receive batch nearly always share it anyway. */
	return memcmp(th + 20, tq + 20, h->hlen - h->iphlen - 20) == 0;
}

static bool
ends_chain(const struct coal_pkt *h, const struct coal_pkt *q, const uint8_t *dq)
{
	/* A short segment is the last (its successor would leave a gap in
	 * the gso_size grid); FIN and PSH go only on the last segment. */
	if (q->plen < h->mss || h->nseg >= OFFLOAD_MAX_SEGS)
		return true;
	return q->kind == K_TCP && (dq[q->iphlen + 13] & (TCP_FIN | TCP_PSH));
}

static void
close_open(struct offload_coal *c, size_t i)
{
	memmove(&c->open[i], &c->open[i + 1], (c->nopen - i - 1) * sizeof c->open[0]);
	c->nopen--;
}

void
offload_coal_add(struct offload_coal *c, const uint8_t *pkt, size_t len, void *tag)
{
	struct coal_pkt *p, *h;
	size_t i, found = SIZE_MAX;
	int idx;

	if (c->npkts == OFFLOAD_BATCH || c->used + len > OFFLOAD_ARENA)
		offload_coal_flush(c);
	if (len > OFFLOAD_ARENA)
		return; /* cannot happen: a DATAGRAM is far smaller */
	idx = (int)c->npkts++;
	p = &c->pkts[idx];
	memset(p, 0, sizeof *p);
	p->off = c->used;
	p->len = len;
	p->tag = tag;
	p->next = -1;
	p->last = idx;
	p->nseg = 1;
	p->total = len;
	memcpy(c->arena + c->used, pkt, len);
	c->used += len;
	classify(c, p, pkt_data(c, p));
	if (!p->has_flow)
		return;
	for (i = 0; i < c->nopen; i++) {
		if (same_flow(c, &c->pkts[c->open[i]], p)) {
			found = i;
			break;
		}
	}
	if (found != SIZE_MAX) {
		h = &c->pkts[c->open[found]];
		if (p->kind != K_PLAIN && can_append(c, h, p)) {
			c->pkts[h->last].next = idx;
			h->last = idx;
			h->nseg++;
			h->total += p->plen;
			h->next_seq += (uint32_t)p->plen;
			p->member = true;
			if (ends_chain(h, p, pkt_data(c, p)))
				close_open(c, found);
			return;
		}
		/* Out of order or different: that chain is complete. */
		close_open(c, found);
	}
	if (p->kind == K_PLAIN)
		return;
	p->mss = p->plen;
	if (p->kind == K_TCP) {
		const uint8_t *t = pkt_data(c, p) + p->iphlen;

		p->next_seq = be32_get(t + 4) + (uint32_t)p->plen;
		if (t[13] & (TCP_FIN | TCP_PSH))
			return;
	}
	if (c->nopen == OFFLOAD_CHAINS)
		close_open(c, 0);  /* the oldest flow stops growing */
	c->open[c->nopen++] = idx;
}

/* Write the chain headed by `h`: as it came when alone, else as one
 * super-packet with a GSO virtio_net_hdr and a partial checksum. */
static void
write_chain(struct offload_coal *c, struct coal_pkt *h)
{
	struct iovec iov[2 + OFFLOAD_MAX_SEGS], segs[OFFLOAD_MAX_SEGS];
	struct virtio_net_hdr vh;
	struct offload_write w;
	struct coal_pkt *q;
	uint8_t *b = c->hbuf, *l4;
	size_t n = 0, l4len;
	int k;

	memset(&vh, 0, sizeof vh);
	memset(&w, 0, sizeof w);
	iov[0].iov_base = &vh;
	iov[0].iov_len = sizeof vh;
	for (k = (int)(h - c->pkts); k >= 0; k = c->pkts[k].next) {
		q = &c->pkts[k];
		segs[n].iov_base = pkt_data(c, q);
		segs[n].iov_len = q->len;
		w.seg_bytes += q->len;
		n++;
	}
	w.segs = segs;
	w.nsegs = n;
	w.tag = h->tag;
	if (n == 1) {
		iov[1] = segs[0];
		w.iov = iov;
		w.iovcnt = 2;
		w.len = h->len;
		c->fn(c->arg, &w);
		return;
	}
	memcpy(b, pkt_data(c, h), h->hlen);
	l4 = b + h->iphlen;
	l4len = h->total - h->iphlen;
	if (h->family == AF_INET) {
		be16_put(b + 2, (uint16_t)h->total);
		be16_put(b + 10, 0);
		be16_put(b + 10, ipv4_hdr_csum(b, h->iphlen));
	} else {
		be16_put(b + 4, (uint16_t)(h->total - 40));
	}
	vh.flags = VIRTIO_NET_HDR_F_NEEDS_CSUM;
	vh.gso_size = (uint16_t)h->mss;
	vh.hdr_len = (uint16_t)h->hlen;
	vh.csum_start = (uint16_t)h->iphlen;
	if (h->kind == K_TCP) {
		/* The last segment's FIN/PSH end the super-packet. */
		l4[13] |= pkt_data(c, &c->pkts[h->last])[h->iphlen + 13] &
		    (TCP_FIN | TCP_PSH);
		vh.gso_type = h->family == AF_INET ? VIRTIO_NET_HDR_GSO_TCPV4 :
		    VIRTIO_NET_HDR_GSO_TCPV6;
		if (l4[13] & TCP_CWR)
			vh.gso_type |= VIRTIO_NET_HDR_GSO_ECN;
		vh.csum_offset = TCP_CSUM_OFF;
	} else {
		be16_put(l4 + 4, (uint16_t)l4len);
		vh.gso_type = VIRTIO_NET_HDR_GSO_UDP_L4;
		vh.csum_offset = UDP_CSUM_OFF;
	}
	/* CHECKSUM_PARTIAL's convention: the field holds the folded (not
	 * complemented) pseudo-header sum over the whole super-packet. */
	be16_put(l4 + vh.csum_offset, ippkt_csum_fold(pseudo(b, h->family, h->proto, l4len)));
	iov[1].iov_base = b;
	iov[1].iov_len = h->hlen;
	for (size_t i = 0; i < n; i++) {
		iov[2 + i].iov_base = (uint8_t *)segs[i].iov_base + h->hlen;
		iov[2 + i].iov_len = segs[i].iov_len - h->hlen;
	}
	w.iov = iov;
	w.iovcnt = (int)(2 + n);
	w.len = h->total;
	c->fn(c->arg, &w);
}

void
offload_coal_flush(struct offload_coal *c)
{
	for (size_t i = 0; i < c->npkts; i++) {
		if (!c->pkts[i].member)
			write_chain(c, &c->pkts[i]);
	}
	c->npkts = 0;
	c->used = 0;
	c->nopen = 0;
}
