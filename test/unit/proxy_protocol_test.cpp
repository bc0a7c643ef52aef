// The proxy's parsers, without I/O: which request heads pass and what goes to the origin, which
// are refused and why, how an origin's response head is framed, and SOCKS5's greeting and
// request.
#include "platform/linux/proxy_protocol.hpp"

#include <algorithm>
#include <string>
#include <string_view>

#include <gtest/gtest.h>

namespace dsh::proxy {
namespace {

constexpr std::size_t kLimit = 64 * 1024;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

HttpRequest accepted(const std::string& head) {
    const HeadInspection inspection = inspect_request_head(head, kLimit);
    EXPECT_EQ(inspection.outcome, HeadInspection::Outcome::Request) << head << "\n" << inspection.reason;
    return inspection.request;
}

std::string refusal(const std::string& head, unsigned status = 400) {
    const HeadInspection inspection = inspect_request_head(head, kLimit);
    EXPECT_EQ(inspection.outcome, HeadInspection::Outcome::Refused) << head;
    EXPECT_EQ(inspection.status, status) << head;
    EXPECT_EQ(inspection.reason.find('\n'), std::string::npos) << inspection.reason;
    return inspection.reason;
}

TEST(InspectRequestHead, ConnectNamesHostAndPort) {
    const HttpRequest r = accepted("CONNECT Example.ORG:443 HTTP/1.1\r\nHost: example.org:443\r\n\r\n");
    EXPECT_EQ(r.form, RequestForm::Connect);
    EXPECT_EQ(r.host, (RequestedHost{HostKind::Name, "example.org"}));
    EXPECT_EQ(r.port, 443);
    EXPECT_TRUE(r.upstreamHead.empty());
    EXPECT_EQ(r.body, BodyFraming::None);
    const HttpRequest v6 = accepted("CONNECT [0:0::1]:8443 HTTP/1.1\r\n\r\n");
    EXPECT_EQ(v6.host, (RequestedHost{HostKind::IPv6, "::1"}));
    EXPECT_EQ(v6.port, 8443);
    // A Host field without a port names the same host.
    EXPECT_EQ(accepted("CONNECT example.org:443 HTTP/1.1\r\nHost: example.org\r\n\r\n").port, 443);
}

// The scheme is matched without regard to case, and a target that is the scheme alone, in any
// case, is refused, not read past (Boost 1.74's beast::iequals read one byte past such a target:
// .ci/fuzz's proxy_head, whose corpus keeps the input; ASan sees it in the sanitizer build).
TEST(InspectRequestHead, ASchemeOnlyTargetInAnyCaseIsRefused) {
    for (const std::string target : {"htTp://", "HTTP://", "http://"})
        refusal("GET " + target + " HTTP/1.1\r\nHost: example.org\r\n\r\n");
    EXPECT_EQ(accepted("GET hTTp://example.org/ HTTP/1.1\r\nHost: example.org\r\n\r\n").host.host, "example.org");
}

TEST(InspectRequestHead, ConnectRefusals) {
    EXPECT_TRUE(contains(refusal("CONNECT example.org HTTP/1.1\r\n\r\n"), "with the port"));
    EXPECT_TRUE(contains(refusal("CONNECT example.org:0 HTTP/1.1\r\n\r\n"), "a port is a number from 1 to 65535"));
    EXPECT_TRUE(contains(refusal("CONNECT http://example.org/ HTTP/1.1\r\n\r\n"), "CONNECT needs host:port"));
    EXPECT_TRUE(contains(refusal("CONNECT example.org:443 HTTP/1.1\r\nContent-Length: 3\r\n\r\n"), "no body"));
    EXPECT_TRUE(contains(refusal("CONNECT example.org:443 HTTP/1.1\r\nHost: evil.example:443\r\n\r\n"),
                         "the Host field names another host"));
    EXPECT_TRUE(contains(refusal("CONNECT example.org:443 HTTP/1.1\r\nHost: example.org:80\r\n\r\n"),
                         "the Host field names another host"));
    refusal("CONNECT ::1:443 HTTP/1.1\r\n\r\n");
}

TEST(InspectRequestHead, AbsoluteUriGoesToTheOriginInOriginForm) {
    const HttpRequest r = accepted(
        "GET http://Example.org:8080/a/b?c=d HTTP/1.1\r\n"
        "Host: example.org:8080\r\n"
        "User-Agent: t\r\n"
        "Proxy-Connection: keep-alive\r\n"
        "Proxy-Authorization: Basic eA==\r\n"
        "Connection: keep-alive, X-Private\r\n"
        "X-Private: 1\r\n"
        "Keep-Alive: timeout=5\r\n"
        "TE: trailers\r\n"
        "Upgrade: websocket\r\n"
        "\r\n");
    EXPECT_EQ(r.form, RequestForm::AbsoluteUri);
    EXPECT_EQ(r.host, (RequestedHost{HostKind::Name, "example.org"}));
    EXPECT_EQ(r.port, 8080);
    EXPECT_TRUE(r.keepAlive);
    EXPECT_TRUE(r.upstreamHead.starts_with("GET /a/b?c=d HTTP/1.1\r\n")) << r.upstreamHead;
    EXPECT_TRUE(r.upstreamHead.ends_with("\r\n\r\n"));
    EXPECT_TRUE(contains(r.upstreamHead, "Host: example.org:8080\r\n")) << r.upstreamHead;
    EXPECT_TRUE(contains(r.upstreamHead, "User-Agent: t\r\n"));
    for (const char* gone : {"Proxy-", "Connection", "X-Private", "Keep-Alive", "TE:", "Upgrade"})
        EXPECT_FALSE(contains(r.upstreamHead, gone)) << gone << " in\n" << r.upstreamHead;
}

TEST(InspectRequestHead, AbsoluteUriDefaultsAndHostField) {
    HttpRequest r = accepted("GET http://example.org HTTP/1.1\r\n\r\n");
    EXPECT_EQ(r.port, 80);
    EXPECT_TRUE(r.upstreamHead.starts_with("GET / HTTP/1.1\r\n"));
    EXPECT_TRUE(contains(r.upstreamHead, "Host: example.org\r\n"));  // set from the target when missing
    r = accepted("GET http://example.org?x HTTP/1.1\r\nHost: EXAMPLE.org\r\n\r\n");
    EXPECT_TRUE(r.upstreamHead.starts_with("GET /?x HTTP/1.1\r\n")) << r.upstreamHead;
    r = accepted("HEAD http://[::1]:81/ HTTP/1.0\r\n\r\n");
    EXPECT_TRUE(r.headMethod);
    EXPECT_FALSE(r.keepAlive);
    EXPECT_EQ(r.host, (RequestedHost{HostKind::IPv6, "::1"}));
    EXPECT_TRUE(r.upstreamHead.starts_with("HEAD / HTTP/1.0\r\n")) << r.upstreamHead;
    EXPECT_TRUE(contains(r.upstreamHead, "Host: [::1]:81\r\n")) << r.upstreamHead;
    r = accepted("GET HTTP://[::1]/ HTTP/1.1\r\nHost: [::1]:80\r\n\r\n");
    EXPECT_TRUE(contains(r.upstreamHead, "Host: [::1]\r\n")) << r.upstreamHead;
    EXPECT_TRUE(accepted("GET http://example.org/ HTTP/1.1\r\nConnection: close\r\n\r\n").keepAlive == false);
}

TEST(InspectRequestHead, Bodies) {
    HttpRequest r = accepted("POST http://example.org/ HTTP/1.1\r\nContent-Length: 12\r\n\r\nbody follows");
    EXPECT_EQ(r.body, BodyFraming::Length);
    EXPECT_EQ(r.contentLength, 12u);
    EXPECT_TRUE(contains(r.upstreamHead, "Content-Length: 12\r\n"));
    r = accepted("POST http://example.org/ HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n");
    EXPECT_EQ(r.body, BodyFraming::Chunked);
    EXPECT_TRUE(contains(r.upstreamHead, "Transfer-Encoding: chunked\r\n")) << r.upstreamHead;
    r = accepted("POST http://example.org/ HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
    EXPECT_EQ(r.body, BodyFraming::None);
    // Connection cannot take the framing away.
    r = accepted("POST http://example.org/ HTTP/1.1\r\nConnection: content-length\r\nContent-Length: 5\r\n\r\n");
    EXPECT_TRUE(contains(r.upstreamHead, "Content-Length: 5\r\n")) << r.upstreamHead;

    refusal("POST http://example.org/ HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n");
    refusal("POST http://example.org/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n");
    refusal("POST http://example.org/ HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n");
    refusal("POST http://example.org/ HTTP/1.1\r\nContent-Length: x\r\n\r\n");
    EXPECT_TRUE(contains(refusal("POST http://example.org/ HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n"), "chunked"));
    refusal("POST http://example.org/ HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n");
    refusal("POST http://example.org/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n");
}

TEST(InspectRequestHead, OnlyConnectAndAbsoluteUris) {
    EXPECT_TRUE(contains(refusal("GET / HTTP/1.1\r\nHost: example.org\r\n\r\n"), "this is a proxy"));
    refusal("OPTIONS * HTTP/1.1\r\nHost: example.org\r\n\r\n");
    EXPECT_TRUE(contains(refusal("GET https://example.org/ HTTP/1.1\r\n\r\n"), "with CONNECT"));
    refusal("GET ftp://example.org/ HTTP/1.1\r\n\r\n");
    refusal("GET http:/example.org/ HTTP/1.1\r\n\r\n");
    EXPECT_TRUE(contains(refusal("GET http://user@example.org/ HTTP/1.1\r\n\r\n"), "user information"));
    refusal("GET http://example.org/#x HTTP/1.1\r\n\r\n");
    refusal("GET http:/// HTTP/1.1\r\n\r\n");
    refusal("GET http://exa_mple.org/ HTTP/1.1\r\n\r\n");
    refusal("GET http://127.1/ HTTP/1.1\r\n\r\n");
    refusal("GET http://example.org:99999/ HTTP/1.1\r\n\r\n");
    refusal("GET http://::1/ HTTP/1.1\r\n\r\n");
    refusal("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
    refusal("GET http://example.org/ HTTP/1.2\r\n\r\n");
    refusal("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n");
    refusal("GET http://example.org/ HTTP/1.1\nHost: example.org\n\n\r\n\r\n");
}

TEST(InspectRequestHead, HostFieldMustNameTheTarget) {
    EXPECT_TRUE(contains(refusal("GET http://example.org/ HTTP/1.1\r\nHost: evil.example\r\n\r\n"),
                         "the Host field names another host"));
    refusal("GET http://example.org/ HTTP/1.1\r\nHost: example.org:8080\r\n\r\n");
    refusal("GET http://example.org:8080/ HTTP/1.1\r\nHost: example.org:80\r\n\r\n");
    EXPECT_TRUE(contains(refusal("GET http://example.org/ HTTP/1.1\r\nHost: example.org\r\nHost: evil.example\r\n\r\n"),
                         "more than one Host field"));
    refusal("GET http://example.org/ HTTP/1.1\r\nHost: example.org\r\nHost: example.org\r\n\r\n");
    refusal("GET http://example.org/ HTTP/1.1\r\nHost: example.org/x\r\n\r\n");
    refusal("GET http://example.org/ HTTP/1.1\r\nHost:\r\n\r\n");
    refusal("GET http://[::1]/ HTTP/1.1\r\nHost: [::2]\r\n\r\n");
    // Another textual form of the same host is the same host.
    accepted("GET http://[::1]/ HTTP/1.1\r\nHost: [0:0::1]\r\n\r\n");
    accepted("GET http://example.org/ HTTP/1.1\r\nHost: Example.Org.:80\r\n\r\n");
}

TEST(InspectRequestHead, NeedMoreAndTheHeaderLimit) {
    EXPECT_EQ(inspect_request_head("", kLimit).outcome, HeadInspection::Outcome::NeedMore);
    EXPECT_EQ(inspect_request_head("GET http://example.org/ HTTP/1.1\r\nHost: ex", kLimit).outcome,
              HeadInspection::Outcome::NeedMore);
    const std::string big = "GET http://example.org/ HTTP/1.1\r\nX-Big: " + std::string(2000, 'a') + "\r\n\r\n";
    EXPECT_EQ(inspect_request_head(big, 4096).outcome, HeadInspection::Outcome::Request);
    const HeadInspection over = inspect_request_head(big, 1024);
    EXPECT_EQ(over.outcome, HeadInspection::Outcome::Refused);
    EXPECT_EQ(over.status, 431u);
    EXPECT_EQ(inspect_request_head(big.substr(0, 1500), 1024).status, 431u);  // incomplete, and already too long
    // The head's size is reported, whatever follows it.
    const std::string head = "GET http://example.org/ HTTP/1.1\r\n\r\n";
    const HeadInspection two = inspect_request_head(head + "GET http://x.example/ HTTP/1.1\r\n\r\n", kLimit);
    EXPECT_EQ(two.headBytes, head.size());
    EXPECT_EQ(two.request.host.host, "example.org");
}

// The head's end found as a connection reads it, `piece` bytes at a time, each look going on
// from where the last one stopped (as the proxy's read_head does).
HeadEnd end_in_pieces(const std::string& bytes, std::size_t piece, std::size_t limit) {
    std::size_t held = 0, searched = 0;
    for (;;) {
        const HeadEnd end = find_head_end(std::string_view(bytes).substr(0, held), searched, limit);
        if (end.outcome != HeadEnd::Outcome::NeedMore || held == bytes.size()) return end;
        EXPECT_EQ(end.bytes, limit - held);
        searched = held;
        held = std::min({bytes.size(), held + piece, held + end.bytes});
    }
}

TEST(FindHeadEnd, WhereverTheReadsSplitTheHead) {
    const std::string head = "GET http://example.org/ HTTP/1.1\r\nHost: example.org\r\n\r\n";
    const std::string body = "body\r\n\r\nmore";
    for (std::size_t piece = 1; piece <= 9; ++piece) {
        const HeadEnd end = end_in_pieces(head + body, piece, kLimit);
        EXPECT_EQ(end.outcome, HeadEnd::Outcome::Found) << piece;
        EXPECT_EQ(end.bytes, head.size()) << piece;
    }
    // The empty line's four bytes split every way between two reads.
    for (std::size_t split = head.size() - 4; split <= head.size(); ++split) {
        const std::size_t first = split;
        EXPECT_EQ(find_head_end(std::string_view(head).substr(0, first), 0, kLimit).outcome,
                  split == head.size() ? HeadEnd::Outcome::Found : HeadEnd::Outcome::NeedMore);
        if (split < head.size()) {
            EXPECT_EQ(find_head_end(head, first, kLimit).bytes, head.size()) << split;
        }
    }
    // Only the first empty line ends the head, and a lone "\n\n" or "\r\r" does not.
    EXPECT_EQ(find_head_end("a\n\nb\r\r\n\r\n", 0, kLimit).bytes, 9u);
    EXPECT_EQ(find_head_end("no end\r\n", 0, kLimit).outcome, HeadEnd::Outcome::NeedMore);
}

TEST(FindHeadEnd, TheLimitHoldsTheEmptyLine) {
    const std::string head = "GET http://example.org/ HTTP/1.1\r\nX: " + std::string(100, 'a') + "\r\n\r\n";
    for (std::size_t piece : {std::size_t{1}, std::size_t{3}, std::size_t{64}}) {
        const HeadEnd exact = end_in_pieces(head + "body", piece, head.size());
        EXPECT_EQ(exact.outcome, HeadEnd::Outcome::Found) << piece;
        EXPECT_EQ(exact.bytes, head.size()) << piece;
        // One byte less, and the empty line no longer fits: too long, however the bytes came.
        EXPECT_EQ(end_in_pieces(head + "body", piece, head.size() - 1).outcome, HeadEnd::Outcome::TooLong) << piece;
    }
    // Bytes beyond the limit are not searched, even when they were read with the head.
    EXPECT_EQ(find_head_end(std::string(10, 'a') + "\r\n\r\n", 0, 10).outcome, HeadEnd::Outcome::TooLong);
}

ResponseInspection response(const std::string& head, bool headRequest = false, bool keepAlive = true) {
    return inspect_response_head(head, kLimit, headRequest, keepAlive);
}

TEST(InspectResponseHead, Framing) {
    ResponseInspection r = response("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello");
    ASSERT_EQ(r.outcome, ResponseInspection::Outcome::Response);
    EXPECT_EQ(r.response.status, 200u);
    EXPECT_EQ(r.response.body, BodyFraming::Length);
    EXPECT_EQ(r.response.contentLength, 5u);
    EXPECT_TRUE(r.response.keepAlive);
    EXPECT_TRUE(r.response.upstreamKeepAlive);
    EXPECT_EQ(r.headBytes, r.response.clientHead.size());
    EXPECT_TRUE(contains(r.response.clientHead, "Content-Length: 5\r\n"));

    r = response("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: X-A\r\nX-A: 1\r\n\r\n");
    EXPECT_EQ(r.response.body, BodyFraming::Chunked);
    EXPECT_TRUE(contains(r.response.clientHead, "Transfer-Encoding: chunked\r\n"));
    EXPECT_FALSE(contains(r.response.clientHead, "X-A"));

    r = response("HTTP/1.1 200 OK\r\n\r\n");
    EXPECT_EQ(r.response.body, BodyFraming::UntilClose);
    EXPECT_FALSE(r.response.keepAlive);
    EXPECT_TRUE(contains(r.response.clientHead, "Connection: close\r\n")) << r.response.clientHead;

    r = response("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", true);
    EXPECT_EQ(r.response.body, BodyFraming::None);
    EXPECT_TRUE(contains(r.response.clientHead, "Content-Length: 5\r\n"));
    for (const char* bodiless : {"HTTP/1.1 204 No Content\r\n\r\n", "HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n",
                                 "HTTP/1.1 100 Continue\r\n\r\n"})
        EXPECT_EQ(response(bodiless).response.body, BodyFraming::None) << bodiless;

    r = response("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", false, false);
    EXPECT_FALSE(r.response.keepAlive);
    EXPECT_TRUE(r.response.upstreamKeepAlive);
    EXPECT_TRUE(contains(r.response.clientHead, "Connection: close\r\n"));

    r = response("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\n");
    EXPECT_FALSE(r.response.upstreamKeepAlive);
    EXPECT_TRUE(r.response.keepAlive);  // the client's connection does not depend on the origin's
    EXPECT_FALSE(contains(r.response.clientHead, "Connection"));
}

TEST(InspectResponseHead, Bad) {
    EXPECT_EQ(response("HTTP/1.1 200 OK\r\nContent-").outcome, ResponseInspection::Outcome::NeedMore);
    for (const char* bad : {"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n",
                            "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
                            "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
                            "HTTP/2.0 200 OK\r\n\r\n", "SSH-2.0-OpenSSH\r\n\r\n"})
        EXPECT_EQ(response(bad).outcome, ResponseInspection::Outcome::Bad) << bad;
}

TEST(ProxyAnswers, ErrorsRefusalsAndConnect) {
    const std::string e = error_response(403, "no\n");
    EXPECT_TRUE(e.starts_with("HTTP/1.1 403 Forbidden\r\n")) << e;
    EXPECT_TRUE(contains(e, "Content-Length: 3\r\n"));
    EXPECT_TRUE(contains(e, "Connection: close\r\n"));
    EXPECT_TRUE(e.ends_with("\r\n\r\nno\n"));
    const std::string text = refusal_text({HostKind::Name, "example.org"}, 443);
    EXPECT_TRUE(contains(text, "refused example.org:443, not in allow_hosts")) << text;
    EXPECT_TRUE(contains(text, "--allow-host example.org:443"));
    EXPECT_TRUE(contains(text, "--allow-host example.org "));
    EXPECT_TRUE(contains(text, "[network] allow_hosts"));
    EXPECT_TRUE(contains(refusal_text({HostKind::IPv6, "::1"}, 80), "--allow-host [::1]:80"));
    EXPECT_EQ(connect_established(), "HTTP/1.1 200 Connection established\r\n\r\n");
}

std::string bytes(std::initializer_list<int> values) {
    std::string out;
    for (int v : values) out += static_cast<char>(v);
    return out;
}

TEST(Socks5, Greeting) {
    EXPECT_EQ(parse_socks_greeting("").outcome, SocksGreeting::Outcome::NeedMore);
    EXPECT_EQ(parse_socks_greeting(bytes({5})).outcome, SocksGreeting::Outcome::NeedMore);
    EXPECT_EQ(parse_socks_greeting(bytes({5, 2, 2})).outcome, SocksGreeting::Outcome::NeedMore);
    SocksGreeting g = parse_socks_greeting(bytes({5, 2, 2, 0, 9}));
    EXPECT_EQ(g.outcome, SocksGreeting::Outcome::Accepted);
    EXPECT_EQ(g.bytes, 4u);
    g = parse_socks_greeting(bytes({5, 1, 2}));
    EXPECT_EQ(g.outcome, SocksGreeting::Outcome::NoAcceptableMethod);
    EXPECT_EQ(parse_socks_greeting(bytes({5, 0})).outcome, SocksGreeting::Outcome::NoAcceptableMethod);
    EXPECT_EQ(parse_socks_greeting(bytes({4, 1, 0})).outcome, SocksGreeting::Outcome::Malformed);
    EXPECT_EQ(socks_method_reply(true), bytes({5, 0}));
    EXPECT_EQ(socks_method_reply(false), bytes({5, 0xff}));
}

TEST(Socks5, Requests) {
    SocksRequest r = parse_socks_request(bytes({5, 1, 0, 3, 11}) + "Example.ORG" + bytes({1, 187, 'x'}));
    ASSERT_EQ(r.outcome, SocksRequest::Outcome::Target);
    EXPECT_EQ(r.host, (RequestedHost{HostKind::Name, "example.org"}));
    EXPECT_EQ(r.port, 443);
    EXPECT_EQ(r.bytes, 18u);
    r = parse_socks_request(bytes({5, 1, 0, 1, 127, 0, 0, 1, 0, 80}));
    EXPECT_EQ(r.host, (RequestedHost{HostKind::IPv4, "127.0.0.1"}));
    EXPECT_EQ(r.port, 80);
    r = parse_socks_request(bytes({5, 1, 0, 4, 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0x1f, 0x90}));
    EXPECT_EQ(r.host, (RequestedHost{HostKind::IPv6, "2001:db8::1"}));
    EXPECT_EQ(r.port, 8080);
    r = parse_socks_request(bytes({5, 1, 0, 3, 9}) + "127.0.0.1" + bytes({0, 80}));
    EXPECT_EQ(r.host, (RequestedHost{HostKind::IPv4, "127.0.0.1"}));  // a literal sent as a name is a literal

    for (std::size_t cut = 0; cut < 18; ++cut)
        EXPECT_EQ(parse_socks_request((bytes({5, 1, 0, 3, 11}) + "example.org" + bytes({1, 187})).substr(0, cut)).outcome,
                  SocksRequest::Outcome::NeedMore)
            << cut;

    auto error = [](const std::string& request) {
        const SocksRequest out = parse_socks_request(request);
        EXPECT_EQ(out.outcome, SocksRequest::Outcome::Error);
        return out.error;
    };
    EXPECT_EQ(error(bytes({5, 2, 0, 1, 127, 0, 0, 1, 0, 80})), SocksReply::CommandNotSupported);  // BIND
    EXPECT_EQ(error(bytes({5, 3, 0, 1, 127, 0, 0, 1, 0, 80})), SocksReply::CommandNotSupported);  // UDP ASSOCIATE
    EXPECT_EQ(error(bytes({5, 1, 0, 5, 0})), SocksReply::AddressTypeNotSupported);
    EXPECT_EQ(error(bytes({4, 1, 0, 1, 127, 0, 0, 1, 0, 80})), SocksReply::GeneralFailure);
    EXPECT_EQ(error(bytes({5, 1, 1, 1, 127, 0, 0, 1, 0, 80})), SocksReply::GeneralFailure);
    EXPECT_EQ(error(bytes({5, 1, 0, 1, 127, 0, 0, 1, 0, 0})), SocksReply::GeneralFailure);  // port 0
    EXPECT_EQ(error(bytes({5, 1, 0, 3, 0, 0, 80})), SocksReply::GeneralFailure);
    EXPECT_EQ(error(bytes({5, 1, 0, 3, 8}) + "bad host" + bytes({0, 80})), SocksReply::GeneralFailure);
    EXPECT_EQ(error(bytes({5, 1, 0, 3, 13}) + "*.example.org" + bytes({0, 80})), SocksReply::GeneralFailure);
}

TEST(Socks5, Replies) {
    EXPECT_EQ(socks_reply(SocksReply::NotAllowed), bytes({5, 2, 0, 1, 0, 0, 0, 0, 0, 0}));
    EXPECT_EQ(socks_reply(SocksReply::Succeeded, bytes({127, 0, 0, 1}), 0x1234), bytes({5, 0, 0, 1, 127, 0, 0, 1, 0x12, 0x34}));
    const std::string v6(16, '\x01');
    EXPECT_EQ(socks_reply(SocksReply::Succeeded, v6, 1), bytes({5, 0, 0, 4}) + v6 + bytes({0, 1}));
}

}  // namespace
}  // namespace dsh::proxy
