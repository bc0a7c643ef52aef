// The proxy on loopback, judged from the origin's side: a refused host's origin never accepts a
// connection (counted after the proxy has ended, the backlog included), an allowed one sees the
// request the proxy forwarded. Names resolve through ProxyOptions::fixedAddresses to loopback,
// so no test sends anything anywhere else, nor asks a resolver.
#include "platform/linux/proxy.hpp"

#include <sys/syscall.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <utility>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "loopback.hpp"

namespace dsh::proxy {
namespace {

using namespace dsh::loopback;

// GTEST_SKIP unless DSH_MUST_WORK is set, in which case the test fails instead.
#define PROXY_REQUIRE(condition, reason)                                            \
    do {                                                                            \
        if (!(condition)) {                                                         \
            if (std::getenv("DSH_MUST_WORK")) FAIL() << "must work: " << (reason); \
            GTEST_SKIP() << (reason);                                               \
        }                                                                           \
    } while (0)

// Every name a test asks for, on the loopback address.
const std::map<std::string, std::vector<std::string>> kNames = {
    {"allowed.test", {"127.0.0.1"}}, {"other.test", {"127.0.0.1"}},    {"refused.test", {"127.0.0.1"}},
    {"a.example.org", {"127.0.0.1"}}, {"example.org", {"127.0.0.1"}}, {"badexample.org", {"127.0.0.1"}},
    {"six.test", {"::1"}},
};

ProxyOptions allowing(const std::vector<std::string>& patterns) {
    ProxyOptions options;
    for (const auto& text : patterns) {
        const auto pattern = parse_host_pattern(text);
        if (!pattern) throw std::runtime_error(pattern.reason());
        options.allow.push_back(*pattern);
    }
    options.fixedAddresses = kNames;
    return options;
}

// run_proxy on a thread, on a loopback listener of its own, ended by closing a pipe.
class RunningProxy {
public:
    explicit RunningProxy(ProxyOptions options, int lifetime = -1) : options_(std::move(options)) {
        listen_ = listen_on(AF_INET);
        port_ = port_of(listen_);
        if (lifetime < 0) {
            if (::pipe2(lifetime_, O_CLOEXEC) != 0) fail("pipe2");
            lifetime = lifetime_[0];
        }
        options_.lifetimeFds = {lifetime};
        options_.listenFds = {listen_};
        options_.onRefused = [this](const ProxyRefusal& refusal) {
            std::lock_guard lock(mutex_);
            refusals_.push_back(refusal);
        };
        thread_ = std::thread([this] { status_ = run_proxy(options_, &error_); });
    }
    RunningProxy(const RunningProxy&) = delete;
    RunningProxy& operator=(const RunningProxy&) = delete;
    ~RunningProxy() {
        stop();
        ::close(listen_);
    }

    // Ends the proxy (closing the pipe's write end) and returns run_proxy's status.
    int stop() {
        if (lifetime_[1] >= 0) {
            ::close(lifetime_[1]);
            lifetime_[1] = -1;
        }
        if (thread_.joinable()) thread_.join();
        if (lifetime_[0] >= 0) ::close(lifetime_[0]);
        lifetime_[0] = -1;
        return status_;
    }
    void join() { thread_.join(); }

    int client() const { return connect_to(AF_INET, port_); }
    std::uint16_t port() const { return port_; }
    std::vector<ProxyRefusal> refusals() {
        std::lock_guard lock(mutex_);
        return refusals_;
    }

private:
    ProxyOptions options_;
    int listen_ = -1;
    std::uint16_t port_ = 0;
    int lifetime_[2] = {-1, -1};
    std::thread thread_;
    int status_ = -1;
    std::string error_;
    std::mutex mutex_;
    std::vector<ProxyRefusal> refusals_;
};

std::string get(const std::string& url, const std::string& fields = "") {
    return "GET " + url + " HTTP/1.1\r\n" + fields + "\r\n";
}

std::string at(const std::string& host, std::uint16_t port) { return host + ":" + std::to_string(port); }

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::string socks_connect_name(const std::string& name, std::uint16_t port) {
    std::string out{'\x05', '\x01', '\x00', '\x03', static_cast<char>(name.size())};
    out += name;
    out += static_cast<char>(port >> 8);
    out += static_cast<char>(port & 0xff);
    return out;
}

// The SOCKS5 greeting offering no authentication, and the server's choice.
void socks_hello(int fd) {
    ASSERT_TRUE(send_all(fd, std::string("\x05\x01\x00", 3)));
    std::string reply;
    ASSERT_TRUE(fill(fd, reply, 2));
    ASSERT_EQ(reply, std::string("\x05\x00", 2));
}

// The reply code of a SOCKS5 request (its 10-byte IPv4-bound or 22-byte IPv6-bound reply).
int socks_reply_code(int fd, std::string& buffered) {
    if (!fill(fd, buffered, 5)) return -1;
    const std::size_t size = buffered[3] == '\x04' ? 22 : 10;
    if (!fill(fd, buffered, size)) return -1;
    const int code = static_cast<unsigned char>(buffered[1]);
    buffered.erase(0, size);
    return code;
}

// A CONNECT to allowed.test:`port` on `client`, and whether the proxy answered that the tunnel is
// open; what came after its answer stays in `buffered`.
bool tunnel_opened(int client, std::uint16_t port, std::string& buffered) {
    return send_all(client, "CONNECT " + at("allowed.test", port) + " HTTP/1.1\r\n\r\n") &&
           read_through(client, buffered, "\r\n\r\n") == "HTTP/1.1 200 Connection established\r\n\r\n";
}

// Bytes through an open tunnel come back from the echo origin.
void expect_echo(int fd, const std::string& data, std::string buffered = {}) {
    ASSERT_TRUE(send_all(fd, data));
    ASSERT_TRUE(fill(fd, buffered, data.size()));
    EXPECT_EQ(buffered, data);
}

TEST(Proxy, AbsoluteUriReachesAnAllowedHostInOriginForm) {
    Origin origin(AF_INET, serve_http);
    RunningProxy proxy(allowing({"allowed.test"}));
    const int client = proxy.client();
    const std::string authority = at("allowed.test", origin.port());
    std::string buffered;
    ASSERT_TRUE(send_all(client, get("http://" + authority + "/path?q=1",
                                     "Host: " + authority + "\r\nProxy-Connection: keep-alive\r\n"
                                     "Proxy-Authorization: Basic eDp5\r\nConnection: X-Secret\r\nX-Secret: 1\r\n")));
    const HttpReply reply = read_response(client, buffered);
    EXPECT_EQ(reply.status, 200u) << reply.head;
    EXPECT_EQ(reply.body, "origin saw: GET /path?q=1 HTTP/1.1");
    ::close(client);
    EXPECT_EQ(proxy.stop(), 0);
    origin.stop();
    EXPECT_EQ(origin.accepted(), 1);
    const auto heads = origin.requests();
    ASSERT_EQ(heads.size(), 1u);
    EXPECT_EQ(field(heads[0], "Host"), authority);
    for (const char* gone : {"Proxy-Connection", "Proxy-Authorization", "Connection", "X-Secret"})
        EXPECT_EQ(field(heads[0], gone), "") << gone << " reached the origin:\n" << heads[0];
    EXPECT_TRUE(proxy.refusals().empty());
}

TEST(Proxy, ConnectTunnelsToAnAllowedHost) {
    Origin origin(AF_INET, serve_echo);
    RunningProxy proxy(allowing({"allowed.test"}));
    const int client = proxy.client();
    const std::string authority = at("allowed.test", origin.port());
    ASSERT_TRUE(send_all(client, "CONNECT " + authority + " HTTP/1.1\r\nHost: " + authority + "\r\n\r\n"));
    std::string buffered;
    const std::string head = read_through(client, buffered, "\r\n\r\n");
    EXPECT_EQ(head, "HTTP/1.1 200 Connection established\r\n\r\n");
    expect_echo(client, std::string("\x16\x03\x01 any bytes \r\n\r\n\0", 19), buffered);
    expect_echo(client, std::string(300000, 'x'));
    ::close(client);
    EXPECT_EQ(proxy.stop(), 0);
    origin.stop();
    EXPECT_EQ(origin.accepted(), 1);
}

TEST(Proxy, BytesSentRightBehindConnectGoThroughTheTunnel) {
    Origin origin(AF_INET, serve_echo);
    RunningProxy proxy(allowing({"allowed.test"}));
    const int client = proxy.client();
    ASSERT_TRUE(send_all(client, "CONNECT " + at("allowed.test", origin.port()) + " HTTP/1.1\r\n\r\nearly"));
    std::string buffered;
    EXPECT_EQ(read_through(client, buffered, "\r\n\r\n"), "HTTP/1.1 200 Connection established\r\n\r\n");
    ASSERT_TRUE(fill(client, buffered, 5));
    EXPECT_EQ(buffered, "early");
    ::close(client);
}

TEST(Proxy, Socks5ReachesAnAllowedHostByNameAndByAddress) {
    Origin origin(AF_INET, serve_echo);
    RunningProxy proxy(allowing({"allowed.test", at("127.0.0.1", origin.port())}));
    {
        const int client = proxy.client();
        socks_hello(client);
        ASSERT_TRUE(send_all(client, socks_connect_name("Allowed.Test", origin.port())));
        std::string buffered;
        EXPECT_EQ(socks_reply_code(client, buffered), 0);
        expect_echo(client, "through socks by name", buffered);
        ::close(client);
    }
    {
        const int client = proxy.client();
        // Greeting and request in one write, as optimistic clients send them.
        std::string request("\x05\x01\x00\x05\x01\x00\x01\x7f\x00\x00\x01", 11);
        request += static_cast<char>(origin.port() >> 8);
        request += static_cast<char>(origin.port() & 0xff);
        ASSERT_TRUE(send_all(client, request));
        std::string buffered;
        ASSERT_TRUE(fill(client, buffered, 2));
        buffered.erase(0, 2);
        EXPECT_EQ(socks_reply_code(client, buffered), 0);
        expect_echo(client, "through socks by address", buffered);
        ::close(client);
    }
    EXPECT_EQ(proxy.stop(), 0);
    origin.stop();
    EXPECT_EQ(origin.accepted(), 2);
}

TEST(Proxy, RefusedHostIsNeverContactedOverHttp) {
    Origin origin(AF_INET, serve_http);
    RunningProxy proxy(allowing({"allowed.test"}));
    const std::string authority = at("refused.test", origin.port());
    {
        const int client = proxy.client();
        std::string buffered;
        ASSERT_TRUE(send_all(client, get("http://" + authority + "/", "Host: " + authority + "\r\n")));
        const HttpReply reply = read_response(client, buffered);
        EXPECT_EQ(reply.status, 403u);
        EXPECT_TRUE(contains(reply.body, "refused " + authority + ", not in allow_hosts")) << reply.body;
        EXPECT_TRUE(contains(reply.body, "--allow-host refused.test")) << reply.body;
        EXPECT_TRUE(contains(reply.body, "[network] allow_hosts")) << reply.body;
        EXPECT_EQ(read_to_end(client, buffered), "");  // and the connection is closed
        ::close(client);
    }
    {
        const int client = proxy.client();
        std::string buffered;
        ASSERT_TRUE(send_all(client, "CONNECT " + authority + " HTTP/1.1\r\n\r\n"));
        const HttpReply reply = read_response(client, buffered);
        EXPECT_EQ(reply.status, 403u);
        EXPECT_TRUE(contains(reply.body, "refused " + authority)) << reply.body;
        ::close(client);
    }
    {
        // A refused POST still gets its answer, its body unread.
        const int client = proxy.client();
        std::string buffered;
        ASSERT_TRUE(send_all(client, "POST http://" + authority + "/ HTTP/1.1\r\nContent-Length: 100000\r\n\r\n" +
                                         std::string(100000, 'p')));
        EXPECT_EQ(read_response(client, buffered).status, 403u);
        ::close(client);
    }
    EXPECT_EQ(proxy.stop(), 0);
    origin.stop();
    EXPECT_EQ(origin.accepted(), 0);
    const auto refusals = proxy.refusals();
    ASSERT_EQ(refusals.size(), 3u);
    for (const auto& refusal : refusals) {
        EXPECT_EQ(refusal.host, "refused.test");
        EXPECT_EQ(refusal.port, origin.port());
        EXPECT_FALSE(refusal.reason.empty());
    }
}

TEST(Proxy, RefusedHostIsNeverContactedOverSocks5) {
    Origin origin(AF_INET, serve_echo);
    RunningProxy proxy(allowing({"allowed.test"}));
    const int client = proxy.client();
    socks_hello(client);
    ASSERT_TRUE(send_all(client, socks_connect_name("refused.test", origin.port())));
    std::string buffered;
    EXPECT_EQ(socks_reply_code(client, buffered), 2);  // connection not allowed by ruleset
    EXPECT_EQ(read_to_end(client, buffered), "");
    ::close(client);
    EXPECT_EQ(proxy.stop(), 0);
    origin.stop();
    EXPECT_EQ(origin.accepted(), 0);
    const auto refusals = proxy.refusals();
    ASSERT_EQ(refusals.size(), 1u);
    EXPECT_EQ(refusals[0].host, "refused.test");
    EXPECT_EQ(refusals[0].port, origin.port());
}

TEST(Proxy, HostFieldNamingAnotherHostIsRefused) {
    Origin origin(AF_INET, serve_http);
    RunningProxy proxy(allowing({"allowed.test", "refused.test"}));
    const std::string allowed = at("allowed.test", origin.port());
    for (const std::string& request :
         {get("http://" + allowed + "/", "Host: " + at("other.test", origin.port()) + "\r\n"),
          "CONNECT " + allowed + " HTTP/1.1\r\nHost: other.test\r\n\r\n",
          get("http://" + allowed + "/", "Host: " + allowed + "\r\nHost: other.test\r\n")}) {
        const int client = proxy.client();
        std::string buffered;
        ASSERT_TRUE(send_all(client, request));
        const HttpReply reply = read_response(client, buffered);
        EXPECT_EQ(reply.status, 400u) << request;
        EXPECT_TRUE(contains(reply.body, "Host")) << reply.body;
        ::close(client);
    }
    EXPECT_EQ(proxy.stop(), 0);
    origin.stop();
    EXPECT_EQ(origin.accepted(), 0);
}

TEST(Proxy, EveryRequestOnAKeptConnectionIsChecked) {
    Origin origin(AF_INET, serve_http);
    RunningProxy proxy(allowing({"allowed.test"}));
    const int client = proxy.client();
    std::string buffered;
    ASSERT_TRUE(send_all(client, get("http://" + at("allowed.test", origin.port()) + "/first")));
    const HttpReply first = read_response(client, buffered);
    EXPECT_EQ(first.status, 200u);
    EXPECT_EQ(first.body, "origin saw: GET /first HTTP/1.1");
    ASSERT_TRUE(send_all(client, get("http://" + at("refused.test", origin.port()) + "/second")));
    EXPECT_EQ(read_response(client, buffered).status, 403u);
    ::close(client);
    EXPECT_EQ(proxy.stop(), 0);
    origin.stop();
    EXPECT_EQ(origin.accepted(), 1);
    EXPECT_EQ(origin.requests().size(), 1u);
    ASSERT_EQ(proxy.refusals().size(), 1u);
    EXPECT_EQ(proxy.refusals()[0].host, "refused.test");
}

TEST(Proxy, PipelinedRequestsAreEachChecked) {
    Origin origin(AF_INET, serve_http);
    RunningProxy proxy(allowing({"allowed.test"}));
    const int client = proxy.client();
    std::string buffered;
    ASSERT_TRUE(send_all(client, get("http://" + at("allowed.test", origin.port()) + "/one") +
                                     get("http://" + at("refused.test", origin.port()) + "/two")));
    EXPECT_EQ(read_response(client, buffered).status, 200u);
    EXPECT_EQ(read_response(client, buffered).status, 403u);
    ::close(client);
    EXPECT_EQ(proxy.stop(), 0);
    origin.stop();
    EXPECT_EQ(origin.requests().size(), 1u);
}

TEST(Proxy, KeptConnectionReusesItsUpstreamAndAnotherHostGetsItsOwn) {
    Origin first(AF_INET, serve_http);
    Origin second(AF_INET, serve_http);
    RunningProxy proxy(allowing({"allowed.test", "other.test"}));
    const int client = proxy.client();
    std::string buffered;
    for (const std::string& url : {"http://" + at("allowed.test", first.port()) + "/a",
                                   "http://" + at("allowed.test", first.port()) + "/b",
                                   "http://" + at("other.test", second.port()) + "/c"}) {
        ASSERT_TRUE(send_all(client, get(url)));
        EXPECT_EQ(read_response(client, buffered).status, 200u) << url;
    }
    ::close(client);
    EXPECT_EQ(proxy.stop(), 0);
    first.stop();
    second.stop();
    EXPECT_EQ(first.accepted(), 1);
    EXPECT_EQ(first.requests().size(), 2u);
    EXPECT_EQ(second.accepted(), 1);
    ASSERT_EQ(second.requests().size(), 1u);
    EXPECT_EQ(field(second.requests()[0], "Host"), at("other.test", second.port()));
}

TEST(Proxy, WildcardAllowsSubdomainsOnly) {
    Origin origin(AF_INET, serve_http);
    RunningProxy proxy(allowing({"*.example.org"}));
    auto status_of = [&](const std::string& host) {
        const int client = proxy.client();
        std::string buffered;
        send_all(client, get("http://" + at(host, origin.port()) + "/"));
        const unsigned status = read_response(client, buffered).status;
        ::close(client);
        return status;
    };
    EXPECT_EQ(status_of("a.example.org"), 200u);
    EXPECT_EQ(status_of("example.org"), 403u);
    EXPECT_EQ(status_of("badexample.org"), 403u);
    EXPECT_EQ(proxy.stop(), 0);
    origin.stop();
    EXPECT_EQ(origin.accepted(), 1);
    ASSERT_EQ(origin.requests().size(), 1u);
    EXPECT_EQ(field(origin.requests()[0], "Host"), at("a.example.org", origin.port()));
    ASSERT_EQ(proxy.refusals().size(), 2u);
    EXPECT_EQ(proxy.refusals()[0].host, "example.org");
    EXPECT_EQ(proxy.refusals()[1].host, "badexample.org");
}

TEST(Proxy, PortOfAPatternIsEnforced) {
    Origin origin(AF_INET, serve_http);
    RunningProxy proxy(allowing({at("allowed.test", origin.port())}));
    const std::uint16_t other = closed_port();
    const int client = proxy.client();
    std::string buffered;
    ASSERT_TRUE(send_all(client, get("http://" + at("allowed.test", other) + "/")));
    EXPECT_EQ(read_response(client, buffered).status, 403u);
    ::close(client);
    EXPECT_EQ(proxy.stop(), 0);
    ASSERT_EQ(proxy.refusals().size(), 1u);
    EXPECT_EQ(proxy.refusals()[0].port, other);
}

TEST(Proxy, IPv6LiteralsInAnyForm) {
    PROXY_REQUIRE(ipv6_loopback_works(), "no IPv6 loopback (::1) on this host");
    Origin web(AF_INET6, serve_http);
    Origin echo(AF_INET6, serve_echo);
    RunningProxy proxy(allowing({at("[::1]", web.port()), at("[0:0::1]", echo.port())}));
    {
        const int client = proxy.client();
        std::string buffered;
        ASSERT_TRUE(send_all(client, get("http://" + at("[0:0:0:0:0:0:0:1]", web.port()) + "/six")));
        const HttpReply reply = read_response(client, buffered);
        EXPECT_EQ(reply.status, 200u);
        EXPECT_EQ(reply.body, "origin saw: GET /six HTTP/1.1");
        ::close(client);
    }
    {
        const int client = proxy.client();
        std::string buffered;
        ASSERT_TRUE(send_all(client, "CONNECT " + at("[::1]", echo.port()) + " HTTP/1.1\r\n\r\n"));
        EXPECT_EQ(read_through(client, buffered, "\r\n\r\n"), "HTTP/1.1 200 Connection established\r\n\r\n");
        expect_echo(client, "six", buffered);
        ::close(client);
    }
    {
        const int client = proxy.client();
        socks_hello(client);
        std::string request("\x05\x01\x00\x04", 4);
        request += std::string(15, '\0') + '\x01';
        request += static_cast<char>(echo.port() >> 8);
        request += static_cast<char>(echo.port() & 0xff);
        ASSERT_TRUE(send_all(client, request));
        std::string buffered;
        EXPECT_EQ(socks_reply_code(client, buffered), 0);
        expect_echo(client, "six by socks", buffered);
        ::close(client);
    }
    {
        // The web origin's port is allowed for ::1 only, not for the same origin by name.
        const int client = proxy.client();
        std::string buffered;
        ASSERT_TRUE(send_all(client, get("http://" + at("six.test", echo.port()) + "/")));
        EXPECT_EQ(read_response(client, buffered).status, 403u);
        ::close(client);
    }
    EXPECT_EQ(proxy.stop(), 0);
    web.stop();
    echo.stop();
    EXPECT_EQ(web.accepted(), 1);
    EXPECT_EQ(echo.accepted(), 2);
}

TEST(Proxy, HeadOverTheLimitIsRefused) {
    Origin origin(AF_INET, serve_http);
    ProxyOptions options = allowing({"allowed.test"});
    options.headerLimit = 1024;
    RunningProxy proxy(std::move(options));
    const int client = proxy.client();
    std::string buffered;
    ASSERT_TRUE(send_all(client, get("http://" + at("allowed.test", origin.port()) + "/",
                                     "X-Big: " + std::string(4000, 'b') + "\r\n")));
    EXPECT_EQ(read_response(client, buffered).status, 431u);
    ::close(client);
    EXPECT_EQ(proxy.stop(), 0);
    origin.stop();
    EXPECT_EQ(origin.accepted(), 0);
}

// A head of exactly the limit, its end included, is served however its bytes arrive (its empty
// line split across reads too); one byte more is refused. Each piece is its own segment, so the
// proxy sees many short reads.
TEST(Proxy, AHeadEndsWhereverItsReadsSplitIt) {
    Origin origin(AF_INET, serve_http);
    ProxyOptions options = allowing({"allowed.test"});
    options.headerLimit = 1024;
    RunningProxy proxy(std::move(options));
    const std::string url = "http://" + at("allowed.test", origin.port()) + "/";
    const std::size_t bare = get(url, "X-Pad: \r\n").size();
    for (const std::size_t size : {std::size_t{1024}, std::size_t{1025}}) {
        const std::string head = get(url, "X-Pad: " + std::string(size - bare, 'p') + "\r\n");
        ASSERT_EQ(head.size(), size);
        const int client = proxy.client();
        const int on = 1;
        ASSERT_EQ(setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on), 0);
        const timeval patience{30, 0};  // a hang guard: a missed end would leave the proxy waiting
        ASSERT_EQ(setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &patience, sizeof patience), 0);
        // Pieces of 1 to 7 bytes near the end (every split of "\r\n\r\n"), larger before.
        std::size_t at_byte = 0;
        for (std::size_t piece = 0; at_byte < head.size(); ++piece) {
            const std::size_t left = head.size() - at_byte;
            const std::size_t take = left <= 16 ? 1 + piece % 3 : std::min<std::size_t>(left - 16, 1 + piece * 37 % 200);
            ASSERT_TRUE(send_all(client, head.substr(at_byte, std::min(take, left))));
            at_byte += std::min(take, left);
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        std::string buffered;
        EXPECT_EQ(read_response(client, buffered).status, size == 1024 ? 200u : 431u) << size;
        ::close(client);
    }
    EXPECT_EQ(proxy.stop(), 0);
}

TEST(Proxy, OnlyProxyFormsAreServed) {
    Origin origin(AF_INET, serve_http);
    RunningProxy proxy(allowing({"allowed.test"}));
    for (const std::string& request :
         {std::string("GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n"), get("https://allowed.test/"),
          std::string("GARBAGE\r\n\r\n")}) {
        const int client = proxy.client();
        std::string buffered;
        ASSERT_TRUE(send_all(client, request));
        EXPECT_EQ(read_response(client, buffered).status, 400u) << request;
        ::close(client);
    }
    EXPECT_EQ(proxy.stop(), 0);
    origin.stop();
    EXPECT_EQ(origin.accepted(), 0);
}

TEST(Proxy, BodiesAreRelayedWhateverTheirFraming) {
    Origin origin(AF_INET, serve_http);
    RunningProxy proxy(allowing({"allowed.test"}));
    const std::string base = "http://" + at("allowed.test", origin.port());
    const int client = proxy.client();
    std::string buffered;
    // A chunked request body reaches the origin chunked again.
    ASSERT_TRUE(send_all(client, "POST " + base + "/echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                                 "3;ext=1\r\nabc\r\n4\r\ndefg\r\n0\r\nX-Trailer: t\r\n\r\n"));
    HttpReply reply = read_response(client, buffered);
    EXPECT_EQ(reply.status, 200u);
    EXPECT_EQ(reply.body, "abcdefg");
    // A large body of known length, both ways.
    std::string large(3 << 20, '\0');
    for (std::size_t i = 0; i < large.size(); ++i) large[i] = static_cast<char>(i * 7 % 251);
    ASSERT_TRUE(send_all(client, "POST " + base + "/echo HTTP/1.1\r\nContent-Length: " + std::to_string(large.size()) +
                                     "\r\n\r\n" + large));
    reply = read_response(client, buffered);
    EXPECT_EQ(reply.status, 200u);
    EXPECT_TRUE(reply.body == large) << reply.body.size() << " bytes back";
    // A chunked response.
    ASSERT_TRUE(send_all(client, get(base + "/chunked")));
    reply = read_response(client, buffered);
    EXPECT_EQ(lower(field(reply.head, "Transfer-Encoding")), "chunked");
    EXPECT_EQ(reply.body, "hello, world");
    // HEAD: the length, no body.
    ASSERT_TRUE(send_all(client, "HEAD " + base + "/bytes/100 HTTP/1.1\r\n\r\n"));
    reply = read_response(client, buffered, true);
    EXPECT_EQ(reply.status, 200u);
    EXPECT_EQ(field(reply.head, "Content-Length"), "100");
    ASSERT_TRUE(send_all(client, get(base + "/bytes/5000000")));
    reply = read_response(client, buffered);
    EXPECT_EQ(reply.body.size(), 5000000u);
    // A response that ends with its connection ends the client's too.
    ASSERT_TRUE(send_all(client, get(base + "/close")));
    reply = read_response(client, buffered);
    EXPECT_EQ(reply.status, 200u);
    EXPECT_EQ(reply.body, "until the close");
    ::close(client);
    EXPECT_EQ(proxy.stop(), 0);
    origin.stop();
    const auto heads = origin.requests();
    ASSERT_EQ(heads.size(), 6u);
    EXPECT_EQ(lower(field(heads[0], "Transfer-Encoding")), "chunked");
    EXPECT_EQ(origin.accepted(), 1);
}

TEST(Proxy, UnreachableAllowedHostIsA502) {
    RunningProxy proxy(allowing({"allowed.test"}));
    const std::uint16_t port = closed_port();
    {
        const int client = proxy.client();
        std::string buffered;
        ASSERT_TRUE(send_all(client, get("http://" + at("allowed.test", port) + "/")));
        const HttpReply reply = read_response(client, buffered);
        EXPECT_EQ(reply.status, 502u);
        EXPECT_TRUE(contains(reply.body, "cannot connect to " + at("allowed.test", port))) << reply.body;
        ::close(client);
    }
    {
        const int client = proxy.client();
        socks_hello(client);
        ASSERT_TRUE(send_all(client, socks_connect_name("allowed.test", port)));
        std::string buffered;
        EXPECT_EQ(socks_reply_code(client, buffered), 5);  // connection refused
        ::close(client);
    }
    EXPECT_EQ(proxy.stop(), 0);
    EXPECT_TRUE(proxy.refusals().empty());
}

TEST(Proxy, Socks5RefusesWhatItDoesNotServe) {
    RunningProxy proxy(allowing({"allowed.test"}));
    {
        const int client = proxy.client();
        ASSERT_TRUE(send_all(client, std::string("\x05\x01\x02", 3)));  // username/password only
        std::string buffered;
        ASSERT_TRUE(fill(client, buffered, 2));
        EXPECT_EQ(buffered, std::string("\x05\xff", 2));
        EXPECT_EQ(read_to_end(client), "");
        ::close(client);
    }
    {
        const int client = proxy.client();
        socks_hello(client);
        ASSERT_TRUE(send_all(client, std::string("\x05\x02\x00\x01\x7f\x00\x00\x01\x00\x50", 10)));  // BIND
        std::string buffered;
        EXPECT_EQ(socks_reply_code(client, buffered), 7);
        ::close(client);
    }
    EXPECT_EQ(proxy.stop(), 0);
}

TEST(Proxy, ConnectionsBeyondTheBoundAreClosedAtOnce) {
    Origin origin(AF_INET, serve_echo);
    ProxyOptions options = allowing({"allowed.test"});
    options.maxConnections = 1;
    RunningProxy proxy(std::move(options));
    const int first = proxy.client();
    std::string buffered;
    ASSERT_TRUE(tunnel_opened(first, origin.port(), buffered));
    const int second = proxy.client();
    EXPECT_EQ(read_to_end(second), "");
    ::close(second);
    expect_echo(first, "still served", buffered);
    ::close(first);
    EXPECT_EQ(proxy.stop(), 0);
    origin.stop();
    EXPECT_EQ(origin.accepted(), 1);
}

TEST(Proxy, IdleAndSlowConnectionsAreClosed) {
    Origin origin(AF_INET, serve_echo);
    ProxyOptions options = allowing({"allowed.test"});
    // Long enough that the test's own next step (the CONNECT line, reading the reply) is never
    // late on a loaded host or in an instrumented build; short enough to keep the test quick.
    options.headTimeout = std::chrono::milliseconds(1000);
    options.idleTimeout = std::chrono::milliseconds(300);
    RunningProxy proxy(std::move(options));
    // A head that never completes.
    const int slow = proxy.client();
    ASSERT_TRUE(send_all(slow, "GET http://allowed.test/ HTTP/1.1\r\nX-Slow:"));
    EXPECT_EQ(read_to_end(slow), "");
    ::close(slow);
    // A tunnel nothing moves through.
    const int idle = proxy.client();
    std::string buffered;
    ASSERT_TRUE(tunnel_opened(idle, origin.port(), buffered));
    EXPECT_EQ(read_to_end(idle), "");
    ::close(idle);
    EXPECT_EQ(proxy.stop(), 0);
}

// True when the proxy ended the connection (recv reads its end), false when the hang guard
// ran out first: the test that uses it sets the phase it expects to end the connection far
// shorter than the guard, and the one it must not wait for far longer.
bool ended_by_proxy(int fd) {
    char chunk[4096];
    for (;;) {
        const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
        if (n > 0 || (n < 0 && errno == EINTR)) continue;
        return n == 0 || errno == ECONNRESET;
    }
}

TEST(Proxy, SocksRequestHasTheHeadsTimeNotTheIdleTime) {
    ProxyOptions options = allowing({"allowed.test"});
    options.headTimeout = std::chrono::milliseconds(1000);  // the hello and its reply fit in it on any host
    options.idleTimeout = std::chrono::hours(1);
    RunningProxy proxy(std::move(options));
    // The method reply is sent, and then no request ever comes.
    const int client = proxy.client();
    socks_hello(client);
    EXPECT_TRUE(ended_by_proxy(client));
    ::close(client);
    EXPECT_EQ(proxy.stop(), 0);
}

TEST(Proxy, ChunkSizeLineThatNeverEndsIsBounded) {
    Origin origin(AF_INET, serve_http);
    ProxyOptions options = allowing({"allowed.test"});
    options.headerLimit = 1024;
    options.idleTimeout = std::chrono::hours(1);
    RunningProxy proxy(std::move(options));
    const int client = proxy.client();
    ASSERT_TRUE(send_all(client, "POST http://" + at("allowed.test", origin.port()) +
                                     "/echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1;"));
    // A chunk extension that never ends: the proxy may hold one head's worth of it, no more.
    // Sent in pieces, each one keeping the connection busy; the connection stays open after.
    const std::string piece(512, 'e');
    for (int i = 0; i < 64; ++i)
        if (!send_all(client, piece)) break;  // the proxy ended it already
    EXPECT_TRUE(ended_by_proxy(client));
    ::close(client);
    EXPECT_EQ(proxy.stop(), 0);
}

TEST(Proxy, ABodyReadWithItsHeadIsRelayedWholeWhateverTheHeadLimit) {
    // The head and a body longer than the head limit, sent at once: the proxy's first read takes
    // both, and what lies beyond the limit is body, not head, and must reach the origin.
    Origin origin(AF_INET, serve_http);
    ProxyOptions options = allowing({"allowed.test"});
    options.headerLimit = 1024;
    RunningProxy proxy(std::move(options));
    const std::string base = "http://" + at("allowed.test", origin.port());
    const int client = proxy.client();
    std::string buffered;
    std::string body(32 << 10, '\0');
    for (std::size_t i = 0; i < body.size(); ++i) body[i] = static_cast<char>('a' + i % 26);
    ASSERT_TRUE(send_all(client, "POST " + base + "/echo HTTP/1.1\r\nContent-Length: " + std::to_string(body.size()) +
                                     "\r\n\r\n" + body));
    HttpReply reply = read_response(client, buffered);
    EXPECT_EQ(reply.status, 200u);
    EXPECT_TRUE(reply.body == body) << reply.body.size() << " bytes back";
    // The same body chunked, in one chunk.
    std::ostringstream size;
    size << std::hex << body.size();
    ASSERT_TRUE(send_all(client, "POST " + base + "/echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" + size.str() +
                                     "\r\n" + body + "\r\n0\r\n\r\n"));
    reply = read_response(client, buffered);
    EXPECT_EQ(reply.status, 200u);
    EXPECT_TRUE(reply.body == body) << reply.body.size() << " bytes back";
    ::close(client);
    EXPECT_EQ(proxy.stop(), 0);
}

// TCP urgent data (send's MSG_OOB) stops splice(2) at the urgent byte, which it never moves,
// answering EAGAIN while the socket stays readable. The proxy reads that byte itself, inline,
// in its place: each byte arrives once and in order, either way through a tunnel and in a body
// of known length, and the relay goes on after it (a pump that only waited for readiness again
// would spin there and relay nothing more).
TEST(Proxy, AnUrgentByteIsRelayedInItsPlace) {
    Origin echo(AF_INET, serve_echo);
    RunningProxy proxy(allowing({"allowed.test"}));
    const auto send_urgent = [](int fd, const char* before, char urgent, const char* after) {
        return send_all(fd, before) && ::send(fd, &urgent, 1, MSG_OOB | MSG_NOSIGNAL) == 1 && send_all(fd, after);
    };
    {
        const int client = proxy.client();
        std::string buffered;
        ASSERT_TRUE(tunnel_opened(client, echo.port(), buffered));
        ASSERT_TRUE(send_urgent(client, "before", '!', "after"));
        ASSERT_TRUE(fill(client, buffered, 12));
        EXPECT_EQ(buffered, "before!after");
        expect_echo(client, "and on");
        ::close(client);
    }
    {
        // From the origin's side: its urgent byte reaches the client in its place.
        Origin urgent(AF_INET, [&send_urgent](int fd, Origin& self) {
            if (send_urgent(fd, "AB", 'C', "DE")) serve_echo(fd, self);
        });
        const int client = proxy.client();
        std::string buffered;
        ASSERT_TRUE(tunnel_opened(client, urgent.port(), buffered));
        ASSERT_TRUE(fill(client, buffered, 5));
        EXPECT_EQ(buffered, "ABCDE");
        expect_echo(client, "and on");
        ::close(client);
    }
    {
        Origin origin(AF_INET, serve_http);
        const int client = proxy.client();
        ASSERT_TRUE(send_all(client, "POST http://" + at("allowed.test", origin.port()) +
                                         "/echo HTTP/1.1\r\nContent-Length: 12\r\n\r\n"));
        ASSERT_TRUE(send_urgent(client, "before", '!', "after"));
        std::string buffered;
        const HttpReply reply = read_response(client, buffered);
        EXPECT_EQ(reply.status, 200u);
        EXPECT_EQ(reply.body, "before!after");
        ::close(client);
    }
    EXPECT_EQ(proxy.stop(), 0);
}

// A refused client gets a short while to read its answer, counted once from when it was
// written, and the proxy reads and drops at most a head's worth of what it sends meanwhile:
// one that goes on writing, fast or slowly, is closed all the same.
TEST(Proxy, ARefusedClientThatGoesOnWritingIsClosed) {
    ProxyOptions options = allowing({"allowed.test"});
    options.headerLimit = 4096;
    RunningProxy proxy(std::move(options));
    const std::string refused = "GET http://refused.test/ HTTP/1.1\r\n\r\n";
    {
        const int client = proxy.client();
        ASSERT_TRUE(send_all(client, refused));
        std::string buffered;
        EXPECT_EQ(read_response(client, buffered).status, 403u);
        // 64 MiB offered: the proxy ends the connection long before it has taken them.
        const std::string piece(64 << 10, 'f');
        int sent = 0;
        while (sent < 1024 && send_all(client, piece)) ++sent;
        EXPECT_LT(sent, 1024) << "the proxy read 64 MiB from a refused client";
        ::close(client);
    }
    {
        const int client = proxy.client();
        ASSERT_TRUE(send_all(client, refused));
        std::string buffered;
        EXPECT_EQ(read_response(client, buffered).status, 403u);
        // A byte every 50 ms for up to the hang guard: the linger (2 s) is not made longer by them.
        int sent = 0;
        const int most = kHangGuardSeconds * 20;
        while (sent < most && send_all(client, "s")) {
            ++sent;
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        EXPECT_LT(sent, most) << "a refused client that writes a byte at a time kept its connection";
        ::close(client);
    }
    EXPECT_EQ(proxy.stop(), 0);
}

TEST(Proxy, ServesEveryListeningSocket) {
    PROXY_REQUIRE(ipv6_loopback_works(), "no IPv6 loopback (::1) on this host");
    Origin origin(AF_INET, serve_http);
    const int six = listen_on(AF_INET6);
    ProxyOptions options = allowing({"allowed.test"});
    int lifetime[2];
    ASSERT_EQ(::pipe2(lifetime, O_CLOEXEC), 0);
    const int four = listen_on(AF_INET);
    options.listenFds = {four, six};
    options.lifetimeFds = {lifetime[0]};
    std::thread proxy([&] { EXPECT_EQ(run_proxy(options), 0); });
    for (const auto& [family, fd] : {std::pair{AF_INET, four}, std::pair{AF_INET6, six}}) {
        const int client = connect_to(family, port_of(fd));
        std::string buffered;
        ASSERT_TRUE(send_all(client, get("http://" + at("allowed.test", origin.port()) + "/")));
        EXPECT_EQ(read_response(client, buffered).status, 200u) << family;
        ::close(client);
    }
    ::close(lifetime[1]);
    proxy.join();
    for (const int fd : {lifetime[0], four, six}) ::close(fd);
}

TEST(Proxy, LifetimePipeEndsRunProxyAndItsConnections) {
    Origin origin(AF_INET, serve_echo);
    RunningProxy proxy(allowing({"allowed.test"}));
    const int client = proxy.client();
    std::string buffered;
    ASSERT_TRUE(tunnel_opened(client, origin.port(), buffered));
    expect_echo(client, "open", buffered);
    EXPECT_EQ(proxy.stop(), 0);
    EXPECT_EQ(read_to_end(client), "");  // the tunnel was closed with the proxy
    ::close(client);
}

TEST(Proxy, LifetimePidfdEndsRunProxyWhenTheProcessEnds) {
    int hold[2];
    ASSERT_EQ(::pipe2(hold, O_CLOEXEC), 0);
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        char byte;
        ::close(hold[1]);
        const ssize_t ignored = ::read(hold[0], &byte, 1);  // until the parent closes its end
        (void)ignored;
        ::_exit(0);
    }
    ::close(hold[0]);
    const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, child, 0));
    if (pidfd < 0) {
        ::close(hold[1]);
        ::waitpid(child, nullptr, 0);
    }
    PROXY_REQUIRE(pidfd >= 0, "pidfd_open is not available (Linux 5.3)");
    RunningProxy proxy(allowing({"allowed.test"}), pidfd);
    const int client = proxy.client();
    ASSERT_TRUE(send_all(client, std::string("\x05\x01\x00", 3)));
    std::string buffered;
    ASSERT_TRUE(fill(client, buffered, 2));  // served: the proxy runs
    ::close(hold[1]);                         // the process ends, and with it the proxy
    proxy.join();
    EXPECT_EQ(read_to_end(client), "");
    ::close(client);
    ::close(pidfd);
    int status = 0;
    ::waitpid(child, &status, 0);
    EXPECT_EQ(proxy.stop(), 0);
}

TEST(Proxy, SetupFailuresAreReported) {
    ProxyOptions options;
    std::string error;
    EXPECT_NE(run_proxy(options, &error), 0);
    EXPECT_TRUE(contains(error, "no listening socket")) << error;
    int fds[2];
    ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
    options.listenFds = {fds[0]};
    EXPECT_NE(run_proxy(options, &error), 0);
    EXPECT_TRUE(contains(error, "not a listening TCP socket")) << error;
    const int listener = listen_on(AF_INET);
    options.listenFds = {listener};
    options.lifetimeFds = {1'000'000};  // no such descriptor
    EXPECT_NE(run_proxy(options, &error), 0);
    EXPECT_TRUE(contains(error, "lifetime descriptor")) << error;
    for (int fd : {fds[0], fds[1], listener}) ::close(fd);
}

}  // namespace
}  // namespace dsh::proxy
