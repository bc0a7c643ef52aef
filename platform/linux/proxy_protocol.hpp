// The allow-list proxy's parsers, with no I/O: bytes a client (or an origin) sent in, a verdict
// out. The proxy (proxy.cpp) feeds them what it read; the unit tests and the fuzzers in
// test/fuzz feed them anything. HTTP heads are parsed by Boost.Beast, inside proxy_protocol.cpp
// only: this header uses standard types, so its users compile without Boost.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "../../lib/host_pattern.hpp"

namespace dsh::proxy {

// How a message's body ends.
enum class BodyFraming {
    None,        // no body
    Length,      // Content-Length bytes
    Chunked,     // chunked transfer coding (relayed decoded and chunked again)
    UntilClose,  // a response that ends when the origin closes
};

enum class RequestForm {
    Connect,      // CONNECT host:port: a tunnel
    AbsoluteUri,  // GET http://host[:port]/path: forwarded to the origin in origin-form
};

struct HttpRequest {
    RequestForm form = RequestForm::Connect;
    RequestedHost host;
    std::uint16_t port = 0;
    // AbsoluteUri: the head to send the origin: the target in origin-form (`/path?query`), the
    // hop-by-hop fields removed (Connection and what it names, Keep-Alive, Proxy-Connection,
    // Proxy-Authorization, TE, Trailer, Transfer-Encoding, Upgrade), Host set from the target,
    // and the body's framing written again. Empty for Connect.
    std::string upstreamHead;
    BodyFraming body = BodyFraming::None;  // None, Length or Chunked
    std::uint64_t contentLength = 0;       // Length: the body's size
    bool keepAlive = false;                // the client keeps the connection for another request
    bool headMethod = false;               // HEAD: the response has no body, whatever it says
};

struct HeadInspection {
    enum class Outcome {
        NeedMore,  // no complete head yet (and the bytes are within the header limit)
        Refused,   // answer `status` with `reason`, then close
        Request,   // a request the proxy can serve, once its host is allowed
    };
    Outcome outcome = Outcome::NeedMore;
    unsigned status = 0;  // Refused: 400, or 431 for a head over the header limit
    std::string reason;   // Refused: one line, for the client
    HttpRequest request;
    std::size_t headBytes = 0;  // Request: the bytes the head took (a body may follow)
};

// Where a head ends, looked for as its bytes arrive: in the first `headerLimit` bytes of `held`
// (what a connection holds so far), the end of the first empty line ("\r\n\r\n"). `searched`
// is how many of those bytes an earlier look at the same head already searched (0 for the
// first): the search goes on from there, less the three bytes that may begin a blank line split
// between two reads, so each byte is searched once however the head arrives.
struct HeadEnd {
    enum class Outcome {
        Found,     // `bytes`: the head's size, its empty line included
        NeedMore,  // no empty line yet: read at most `bytes` more (up to the limit) and look again
        TooLong,   // no empty line within the first headerLimit bytes
    };
    Outcome outcome = Outcome::NeedMore;
    std::size_t bytes = 0;
};
HeadEnd find_head_end(std::string_view held, std::size_t searched, std::size_t headerLimit);

// A client's request head at the start of `bytes`. Only CONNECT host:port and absolute-URI
// (http://) requests pass, with a Host field, when present, naming the same host as the target
// (and the same port, when it names one); a body is framed by Content-Length or chunked, never
// both, and a CONNECT has none. The host is not checked against any allow-list here.
HeadInspection inspect_request_head(std::string_view bytes, std::size_t headerLimit);

struct HttpResponse {
    unsigned status = 0;
    // The head to send the client: the hop-by-hop fields removed, the framing written again, and
    // Connection saying whether the client's connection stays open (`keepAlive` below).
    std::string clientHead;
    BodyFraming body = BodyFraming::None;
    std::uint64_t contentLength = 0;
    bool upstreamKeepAlive = false;  // the origin's connection can take another request
    bool keepAlive = false;          // the client's connection stays open after this response
};

struct ResponseInspection {
    enum class Outcome { NeedMore, Bad, Response };
    Outcome outcome = Outcome::NeedMore;
    std::string reason;  // Bad
    HttpResponse response;
    std::size_t headBytes = 0;
};

// An origin's response head at the start of `bytes`, for a request that was HEAD or not and
// whose client wants to keep its connection or not. A 1xx response (but 101) has no body and
// is followed by another response.
ResponseInspection inspect_response_head(std::string_view bytes, std::size_t headerLimit, bool headRequest,
                                         bool clientKeepAlive);

// A complete response from the proxy itself: `status` with `text` as a plain-text body, and
// Connection: close.
std::string error_response(unsigned status, std::string_view text);

// The body of the 403 for a host the allow-list does not name: the host, the port, and the
// options that would allow it.
std::string refusal_text(const RequestedHost& host, std::uint16_t port);

// The answer to an allowed CONNECT, after which the connection is a tunnel.
std::string connect_established();

// SOCKS5 (RFC 1928): a greeting offering methods, then one request.
struct SocksGreeting {
    enum class Outcome {
        NeedMore,
        Malformed,           // not SOCKS5: close without an answer
        NoAcceptableMethod,  // answer socks_method_reply(false), then close
        Accepted,            // no authentication: answer socks_method_reply(true)
    };
    Outcome outcome = Outcome::NeedMore;
    std::size_t bytes = 0;  // Accepted, NoAcceptableMethod: the bytes the greeting took
};
SocksGreeting parse_socks_greeting(std::string_view bytes);
std::string socks_method_reply(bool accepted);

enum class SocksReply : std::uint8_t {
    Succeeded = 0,
    GeneralFailure = 1,
    NotAllowed = 2,  // "connection not allowed by ruleset": a host the allow-list does not name
    NetworkUnreachable = 3,
    HostUnreachable = 4,
    ConnectionRefused = 5,
    TtlExpired = 6,
    CommandNotSupported = 7,
    AddressTypeNotSupported = 8,
};

struct SocksRequest {
    enum class Outcome {
        NeedMore,
        Error,   // answer socks_reply(error), then close
        Target,  // CONNECT to host:port, once the host is allowed
    };
    Outcome outcome = Outcome::NeedMore;
    SocksReply error = SocksReply::GeneralFailure;
    RequestedHost host;  // a domain name as the client sent it, canonical; the proxy resolves it
    std::uint16_t port = 0;
    std::size_t bytes = 0;  // Target: the bytes the request took
};
SocksRequest parse_socks_request(std::string_view bytes);

// A reply; `bound` is the proxy's own address and port toward the target after a success
// (4 or 16 raw address bytes; empty for 0.0.0.0:0).
std::string socks_reply(SocksReply reply, std::string_view boundAddress = {}, std::uint16_t boundPort = 0);

}  // namespace dsh::proxy
