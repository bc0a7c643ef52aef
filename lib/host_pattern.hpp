// Host patterns: which hosts a confined command may reach through the proxy (`--allow-host`,
// `[network] allow_hosts`). A pattern names one host, every subdomain of a name, or one address,
// with an optional port; this file parses patterns, writes them back in canonical form, and
// matches what a client asked the proxy for against them. Matching is on the text the client
// asked for, never on what a name resolves to: an IPv4 pattern does not allow a name that
// resolves to that address, and a name pattern does not allow its addresses given as literals.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "error.hpp"

namespace dsh {

enum class HostKind {
    Name,      // example.org
    Wildcard,  // *.example.org: every name below it, not the name itself (patterns only)
    IPv4,      // 192.0.2.1
    IPv6,      // 2001:db8::1
};

struct HostPattern {
    HostKind kind = HostKind::Name;
    // Canonical: a name lower-case without a trailing dot; for a wildcard the name after "*.";
    // an IPv4 address in dotted decimal; an IPv6 address in RFC 5952 form, without brackets.
    std::string host;
    std::optional<std::uint16_t> port;  // nullopt: any port

    bool operator==(const HostPattern&) const = default;
};

// Accepted forms, each with an optional `:PORT` (1 to 65535; without one, any port):
//   example.org    a host name, matched case-insensitively, a trailing dot ignored
//   *.example.org  every name below example.org (a.example.org, a.b.example.org), not the name
//                  itself; at least two labels after "*."
//   192.0.2.1      an IPv4 address, four decimal numbers without leading zeros
//   [2001:db8::1]  an IPv6 address; without a port the brackets may be left out (2001:db8::1)
// A name is ASCII letters, digits and hyphens in dot-separated labels of 1 to 63 characters
// (no label begins or ends with a hyphen), at most 253 characters, and its last label begins
// with a letter (so it can never be read as an address). An internationalized name is given in
// its ASCII (punycode, "xn--") form. With no public-suffix list at hand, `*.co.uk` is accepted
// like `*.example.org`: it allows every name under co.uk.
// The failure's reason names the pattern and the rule it breaks, on one line.
Expected<HostPattern> parse_host_pattern(std::string_view text);

// The canonical text: what `parse_host_pattern` reads back as the same pattern. An IPv6 address
// is bracketed when it has a port (`[::1]:443`) and bare otherwise (`::1`).
std::string to_string(const HostPattern& pattern);

// A host a client asked for: a name or an address literal (never a wildcard), canonical as in
// HostPattern.
struct RequestedHost {
    HostKind kind = HostKind::Name;
    std::string host;

    bool operator==(const RequestedHost&) const = default;
};

// A requested host in canonical form, or why it is no host name or address: a name, an IPv4
// address, or an IPv6 address bare or in brackets (any textual form: `0:0::1` is `::1`). The
// same rules as for patterns; no port.
Expected<RequestedHost> canonical_host(std::string_view text);

// An authority as a URL, an HTTP CONNECT target or a Host field writes it: a host, then
// optionally ":PORT" (1 to 65535); an IPv6 address in brackets. The reason says what is wrong.
struct Authority {
    RequestedHost host;
    std::optional<std::uint16_t> port;
};
Expected<Authority> parse_authority(std::string_view text);

// "example.org:443", "192.0.2.1:80", "[::1]:8080".
std::string host_port_text(const RequestedHost& host, std::uint16_t port);

bool matches(const HostPattern& pattern, const RequestedHost& host, std::uint16_t port);

// Whether any pattern allows `host` (as a client gave it; canonicalized here) on `port`. A host
// that is no valid name or address, and port 0, are never allowed.
bool allows(const std::vector<HostPattern>& patterns, std::string_view host, std::uint16_t port);
bool allows(const std::vector<HostPattern>& patterns, const RequestedHost& host, std::uint16_t port);

// How the proxy words a refusal: the start of the line it writes on the call's stderr for each
// host it refuses, and of its 403 page's body: `dsh-confine: network: refused HOST:PORT, ...`.
inline constexpr std::string_view kRefusedHostPrefix = "dsh-confine: network: refused ";

// On the socket the proxy reports its refusals on to `run` (one `HOST:PORT\n` per refusal), the
// last record when some could not be sent at once: this prefix and how many, `dropped 12\n`.
inline constexpr std::string_view kUndeliveredRefusals = "dropped ";

// The host a refusal line names, as host_port_text writes it ("example.org:443"), or nullopt
// when the line holds no refusal with a valid HOST:PORT after kRefusedHostPrefix.
std::optional<std::string> refused_host(std::string_view line);

}  // namespace dsh
