#!/usr/bin/env bash
# test-auth.sh over TLS on TCP: Transport = tcp, roved's ListenTCP.
# e2e: light
ROVE_TRANSPORT=tcp exec bash "$(dirname "$0")/test-auth.sh" "$@"
