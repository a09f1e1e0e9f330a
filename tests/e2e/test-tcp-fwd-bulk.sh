#!/usr/bin/env bash
# test-fwd-bulk.sh over TLS on TCP: Transport = tcp, roved's ListenTCP.
ROVE_TRANSPORT=tcp exec bash "$(dirname "$0")/test-fwd-bulk.sh" "$@"
