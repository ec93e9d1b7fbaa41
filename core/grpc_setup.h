// How dlaunch's processes use gRPC: host names resolved the way the system resolves them, and
// gRPC's own log kept off the console unless asked for. gRPC reads both settings once, at its
// init: call these before the process' first gRPC channel or server, before other threads start.
#pragma once

namespace dlaunch::core {

// GRPC_DNS_RESOLVER=native, unless the user chose a resolver. gRPC's default (c-ares) asks the
// DNS servers of resolv.conf itself and answers from /etc/hosts only after they time out: 75 s
// of node rendezvous on an air-gapped cluster whose names live in hosts files. The native
// resolver calls getaddrinfo, which follows nsswitch.conf like every other program on the
// machine. Names stay names (not addresses handed to gRPC), so TLS still checks them. Does not
// block.
void UseSystemResolver();

// gRPC's log lines (the raw "E1202 ... chttp2_server.cc" ones) go to dlaunch's stderr as one
// "dlaunch: grpc: ..." line each, and only when GRPC_VERBOSITY or GRPC_TRACE asks for them:
// dlaunch says what each failed call means itself ("cannot listen on ..."). Does not block.
void RouteGrpcLog();

}  // namespace dlaunch::core
