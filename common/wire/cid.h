/* Connection IDs a server chooses, in the QUIC-LB layout
 * (draft-ietf-quic-load-balancers, plaintext server IDs), so that a load
 * balancer in front of a group of roved instances can send every packet
 * of a connection to the instance that owns it: the first octet carries
 * a config rotation codepoint and the CID's length, the next octets the
 * server ID, the rest is random. Pure functions, no state. */
#ifndef ROVE_CID_H
#define ROVE_CID_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Every CID rove issues has this length (QUIC allows up to 20). */
#define CID_LEN 16
/* Server IDs are 1 to 3 octets (16 million servers in a group), which
 * leaves 12 random octets at least; a ticket names its issuer in a
 * field of that size (transport/state-ticket.c). */
#define CID_SERVER_ID_MAX 3
/* QUIC-LB's config rotation codepoint: bits 7-5 of the first octet, 0 to
 * 6 for a configuration (ServerIDConfig); 7 marks a CID no balancer can
 * route (one of a server without a ServerID). */
#define CID_CONFIG_MAX 6
#define CID_CONFIG_UNROUTABLE 7

/* At most this many worker processes share a server's port (Workers). */
#define CID_WORKERS_MAX 32

/* A server's identity within its group; len 0: no group, random CIDs.
 * `config`: the QUIC-LB config rotation codepoint its CIDs carry, 0 to 6
 * (4 also makes them Katran's "CID version 2": docs/SCALING.md). With
 * `workers` > 1, the octet after the server ID names the worker process
 * that owns the connection (0 .. workers - 1), which the kernel reads to
 * steer each datagram to it (udp.c). */
struct cid_server_id {
	uint8_t id[CID_SERVER_ID_MAX];
	uint8_t len;
	uint8_t config;
	uint8_t worker, workers;
};

/* Fill `cid` (CID_LEN octets): first octet, server ID, worker, random
 * nonce. */
void cid_make(const struct cid_server_id *, uint8_t cid[static CID_LEN]);

/* Whether `cid` (len octets) has `layout`'s form (its config and server
 * ID length), and then its server ID in *out. */
bool cid_server_id(const uint8_t *cid, size_t len,
    const struct cid_server_id *layout, struct cid_server_id *out);

/* "0a1b2c" (hex, an optional 0x, 1 to CID_SERVER_ID_MAX octets): 0, or
 * -1 if it is not one. */
int cid_server_id_parse(const char *, struct cid_server_id *);
/* Its hex text; `buf` must hold 2 * CID_SERVER_ID_MAX + 1. */
const char *cid_server_id_str(const struct cid_server_id *, char *buf);
bool cid_server_id_equal(const struct cid_server_id *,
    const struct cid_server_id *);

/* What a steering program compares and reads: the first octet every CID
 * of `sid`'s server has once it has workers (or a ServerID), and the
 * offset of the worker octet in the CID. */
uint8_t cid_first_octet(const struct cid_server_id *);
size_t cid_worker_offset(const struct cid_server_id *);

#endif
