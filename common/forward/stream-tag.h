/* What a QUIC stream of a connection carries, named by the first member
 * of the stream's argument (quic_conn_stream_set_arg): a forwarded TCP
 * connection (fwd.c) or a UDP flow's set-up (udprelay.c). The stream
 * callbacks tell them apart by it at once, instead of searching each
 * owner's lists for every acknowledgement of a bulk forward. */
#ifndef ROVE_STREAM_TAG_H
#define ROVE_STREAM_TAG_H

enum stream_kind { STREAM_NONE, STREAM_FWD, STREAM_UDP_FLOW };

struct stream_tag {
	enum stream_kind kind;
};

/* The kind of a stream argument (NULL: none). */
static inline enum stream_kind
stream_kind_of(const void *stream_arg)
{
	return stream_arg == NULL ? STREAM_NONE :
	    ((const struct stream_tag *)stream_arg)->kind;
}

#endif
