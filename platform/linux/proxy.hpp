// The allow-list proxy: what a confined command in the `hosts` network state reaches the
// network through. It runs outside the sandbox, in a process of its own started for the call,
// and serves HTTP (CONNECT host:port, and absolute-URI requests) and SOCKS5 (CONNECT, names
// resolved here) on the same listening sockets, telling them apart by the first byte. It
// connects only to hosts the allow-list names, resolves each name once and connects only to
// what that resolution returned, and bounds what a client can make it hold (see ProxyOptions).
//
// What it does not do: TLS (a CONNECT tunnel carries the client's own TLS, unread), HTTP/2,
// websockets over absolute-URI requests (Upgrade is dropped; over CONNECT they work), SOCKS
// BIND and UDP ASSOCIATE, authentication of its clients (any process that can connect to a
// listening socket can use it: the caller decides who can), and filtering by address: a name
// the list allows is connected to wherever it resolves, loopback and private addresses
// included. Matching is on the host the client asked for (lib/host_pattern.hpp).
//
// Linux only; Boost.Asio and Boost.Beast stay inside proxy.cpp and proxy_protocol.cpp.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "../../lib/host_pattern.hpp"

namespace dsh::proxy {

struct ProxyRefusal {
    std::string host;  // canonical (lib/host_pattern.hpp), an IPv6 address without brackets
    std::uint16_t port = 0;
    std::string reason;  // one line
};

struct ProxyOptions {
    std::vector<HostPattern> allow;
    // Listening TCP sockets the caller made (under bubblewrap inside the sandbox's network
    // namespace, under Landlock on the host's loopback). The proxy accepts on them and closes
    // them when it ends.
    std::vector<int> listenFds;
    // The proxy ends, closing every connection, when any of these descriptors becomes readable
    // or hangs up (a pidfd, a pipe's read end whose writers are gone, a socket whose peer shut it
    // down). None: never (tests). Not closed.
    std::vector<int> lifetimeFds;
    // Called for each refused host, as it happens, on the proxy's thread.
    std::function<void(const ProxyRefusal&)> onRefused;

    // Names answered from this table instead of the resolver, as curl's --resolve does (lower
    // case, canonical): a name in it is never looked up. Values are address literals.
    std::map<std::string, std::vector<std::string>> fixedAddresses;

    // Bounds, so a client cannot make the proxy hold more than this.
    std::size_t headerLimit = std::size_t{64} * 1024;  // bytes in one request or response head (431 / 502 beyond)
    std::size_t maxConnections = 256;     // concurrent client connections; more are closed at once
    std::chrono::milliseconds headTimeout{30'000};     // to send a complete request head or SOCKS request
    std::chrono::milliseconds idleTimeout{300'000};    // with no byte moving either way, once relaying
    std::chrono::milliseconds connectTimeout{30'000};  // to resolve a name and connect to it
    // Bytes held in flight per direction of a connection (a pipe of this capacity for splice(2),
    // or a buffer of this size): with the head buffers, what one connection can hold.
    std::size_t relayBuffer = std::size_t{256} * 1024;
};

// Serves until the lifetime descriptor fires. Returns 0 then, or nonzero at once when it cannot
// start (no listening socket, a descriptor that is not one, the lifetime descriptor unusable, no
// thread for the resolver),
// with the reason in `error` when given. It changes its process: SIGPIPE is ignored from then on
// (splice(2) to a closed socket raises it), and the soft limit on open descriptors is raised
// toward the hard one when `maxConnections` needs more (six per connection, at most).
int run_proxy(const ProxyOptions& options, std::string* error = nullptr);

}  // namespace dsh::proxy
