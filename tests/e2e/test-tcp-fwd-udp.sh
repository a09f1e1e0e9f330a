#!/usr/bin/env bash
# e2e: light
# test-fwd-udp.sh over TLS on TCP: Transport = tcp, roved's ListenTCP; the
# flows' datagrams ride the fallback's DATAGRAM frames.
ROVE_TRANSPORT=tcp exec bash "$(dirname "$0")/test-fwd-udp.sh" "$@"
