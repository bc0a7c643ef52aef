// This file implements the allow-list proxy's event loop: one thread, one Boost.Asio
// io_context, one Connection per client connection. Tunnels and bodies of known length are
// relayed by splice(2) through a pipe (the bytes never enter this process), chunked bodies are
// decoded by Beast's parser and chunked again, heads go through proxy_protocol.cpp. Every
// connection holds at most a head buffer and a relay buffer per direction, and a deadline.
#include "proxy.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <limits>
#include <array>
#include <cerrno>
#include <csignal>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include <boost/asio/buffer.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/chunk_encode.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/parser.hpp>

#include "proxy_protocol.hpp"

namespace dsh::proxy {
namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kReadChunk = std::size_t{64} * 1024;
// A client that is being closed gets this long to read what it was sent (a refusal) before the
// connection goes, counted once from when the answer was written: closing with its unread
// request bytes pending would reset the connection and could lose the answer. What it sends
// meanwhile is read and dropped, up to the header limit; a client that sends more is closed
// then (it is not reading an answer, it is making the proxy work).
constexpr std::chrono::milliseconds kLinger{2'000};

class Server;
class Connection;

// Why an upstream could not be reached, for the client's answer.
struct UpstreamFailure {
    enum class Kind { Resolve, Refused, NetworkUnreachable, HostUnreachable, Timeout, Other };
    Kind kind = Kind::Other;
    std::string text;
};

// One direction of a relay by splice(2): socket -> pipe -> socket. `capacity` bounds the bytes
// in flight; `remaining` the bytes still to move when the length is known.
struct Pump {
    int pipeRead = -1;
    int pipeWrite = -1;
    std::size_t capacity = 0;
    std::size_t inPipe = 0;
    tcp::socket* from = nullptr;
    tcp::socket* to = nullptr;
    bool limited = false;
    std::uint64_t remaining = 0;
    bool eof = false;
    void (Connection::*finished)(Pump&, const error_code&) = nullptr;

    Pump() = default;
    Pump(const Pump&) = delete;
    Pump& operator=(const Pump&) = delete;
    ~Pump() { close_pipe(); }

    void close_pipe() {
        if (pipeRead >= 0) ::close(pipeRead);
        if (pipeWrite >= 0) ::close(pipeWrite);
        pipeRead = pipeWrite = -1;
        inPipe = 0;
    }
};

// A chunked body: Beast's parser, fed the head and then what the source sends, hands the
// decoded bytes to `decoded`; they leave as Beast's chunks.
template <bool isRequest>
struct ChunkedRelay {
    std::optional<http::parser<isRequest, http::empty_body>> parser;
    std::string decoded;
    std::function<std::size_t(std::uint64_t, boost::beast::string_view, error_code&)> onBody;
    std::optional<http::chunk_body<asio::const_buffer>> chunk;
    std::optional<http::chunk_last<http::chunk_crlf>> last;
    tcp::socket* from = nullptr;
    tcp::socket* to = nullptr;
    std::string* input = nullptr;  // what was read from `from` and not yet parsed
    void (Connection::*finished)(const error_code&) = nullptr;
};

struct Exchange {
    HttpRequest request;
    HttpResponse response;
    bool requestDone = false;
    bool responseDone = false;
    bool responseStarted = false;  // bytes of the response went to the client
};

class Server {
public:
    // Makes the resolver's thread now (Asio makes it at the first lookup), so that a proxy that
    // cannot make one fails at start-up, with one line, not at each lookup. Throws
    // std::system_error when it cannot: where the command has used up its user's processes
    // (RLIMIT_NPROC) before its first connection, which starts the proxy (proxy_companion.cpp),
    // that call's network is what fails.
    explicit Server(const ProxyOptions& options) : options_(options) {
        tcp::resolver warm(io_);
        warm.async_resolve("127.0.0.1", "0", tcp::resolver::numeric_host | tcp::resolver::numeric_service,
                           [](const error_code&, const tcp::resolver::results_type&) {});
    }
    Server(const Server&) = delete;
    Server& operator=(const Server&) = delete;

    bool start(std::string& why);
    // An exception out of one handler (an allocation that failed) ends that handler's
    // connection, whose state it held, not the proxy: Asio lets run() be called again.
    void run() {
        for (;;) {
            try {
                io_.run();
                return;
            } catch (const std::exception&) {
            }
        }
    }

    const ProxyOptions& options() const { return options_; }
    asio::io_context& io() { return io_; }
    void enter(Connection* connection) { live_.insert(connection); }
    void leave(Connection* connection) { live_.erase(connection); }
    void refused(const RequestedHost& host, std::uint16_t port, const std::string& reason) {
        if (options_.onRefused) options_.onRefused(ProxyRefusal{host.host, port, reason});
    }

private:
    struct Listener {
        explicit Listener(asio::io_context& io) : acceptor(io), pause(io) {}
        tcp::acceptor acceptor;
        asio::steady_timer pause;  // after a failed accept (no descriptor left), before the next
    };

    void accept(Listener& listener);
    void stop();

    const ProxyOptions& options_;
    // Declared before io_: connections still held by handlers leave this set while the
    // io_context is destroyed.
    std::unordered_set<Connection*> live_;
    asio::io_context io_{1};
    std::vector<std::unique_ptr<Listener>> listeners_;
    std::vector<std::unique_ptr<asio::posix::stream_descriptor>> lifetimes_;
    bool stopped_ = false;
};

class Connection : public std::enable_shared_from_this<Connection> {
public:
    Connection(Server& server, tcp::socket client)
        : server_(server),
          options_(server.options()),
          client_(std::move(client)),
          upstream_(server.io()),
          resolver_(server.io()),
          timer_(server.io()) {
        server_.enter(this);
    }
    Connection(const Connection&) = delete;
    Connection& operator=(const Connection&) = delete;
    ~Connection() { server_.leave(this); }

    void start() {
        error_code ignored;
        client_.set_option(tcp::no_delay(true), ignored);
        client_.set_option(asio::socket_base::out_of_band_inline(true), ignored);  // pump_step says why
        arm(options_.headTimeout);
        read_first();
    }

    void close();

private:
    // A relay or upstream error: the end of the connection, unless the client is being answered
    // (a refusal, a 502) and only the upstream side broke.
    void broken() {
        if (!answering_) close();
    }

    // The deadline: a phase sets it (arm), activity while relaying moves it (touch), and the
    // timer only looks at it when it fires, so moving it costs no timer operation. Before
    // relaying (a head, a SOCKS request, a connect) activity moves nothing: a client that
    // trickles a head, or answers the SOCKS method reply and then waits, has the head's time.
    void arm(std::chrono::milliseconds span, bool relaying = false);
    void touch() {
        if (relaying_) deadline_ = Clock::now() + options_.idleTimeout;
    }
    void wait_deadline();
    void on_deadline();

    void read_first();
    // HTTP
    void read_request_head();
    void on_request_head(const error_code& ec, std::size_t size);
    void refuse(unsigned status, const std::string& text);
    void refuse_host(const RequestedHost& host, std::uint16_t port);
    void start_exchange(HttpRequest request, std::string head);
    void send_request(std::string head);
    void request_body_done(const error_code& ec);
    void request_body_pumped(Pump&, const error_code& ec) { request_body_done(ec); }
    void read_response_head();
    void on_response_head(const error_code& ec, std::size_t size);
    void upstream_failed(const std::string& text);
    void response_body_done(const error_code& ec);
    void response_body_pumped(Pump&, const error_code& ec) { response_body_done(ec); }
    void finish_exchange();
    // SOCKS5
    void read_socks_greeting();
    void read_socks_request();
    // Both
    void connect(const RequestedHost& host, std::uint16_t port, std::function<void(const UpstreamFailure*)> done);
    void connect_to(const std::vector<tcp::endpoint>& endpoints, const std::string& what,
                    std::function<void(const UpstreamFailure*)> done);
    UpstreamFailure failure(const error_code& ec, const std::string& what) const;
    bool upstream_reusable();
    void open_tunnel();
    void tunnel_half_done(Pump& pump, const error_code& ec);
    void close_after(std::string message);
    void linger();
    void discard();

    // Relays
    template <class Then>
    void read_head(tcp::socket& socket, std::string& buffer, Then then, std::size_t searched = 0);
    template <class Then>
    void read_some(tcp::socket& socket, std::string& into, Then then, std::size_t at_most = kReadChunk);
    template <class Then>
    void write(tcp::socket& socket, std::string& buffer, std::string data, Then then);
    void pump(Pump& pump, tcp::socket& from, tcp::socket& to, std::optional<std::uint64_t> limit,
              void (Connection::*finished)(Pump&, const error_code&));
    void pump_step(Pump& pump);
    template <bool isRequest>
    void relay_chunked(ChunkedRelay<isRequest>& relay, tcp::socket& from, std::string& input, tcp::socket& to,
                       const std::string& head, void (Connection::*finished)(const error_code&));
    template <bool isRequest>
    void chunked_step(ChunkedRelay<isRequest>& relay);

    Server& server_;
    const ProxyOptions& options_;
    tcp::socket client_;
    tcp::socket upstream_;
    tcp::resolver resolver_;
    asio::steady_timer timer_;
    Clock::time_point deadline_{};
    bool waiting_ = false;
    bool closed_ = false;
    bool connecting_ = false;
    bool connectTimedOut_ = false;
    bool answering_ = false;
    bool relaying_ = false;

    std::string in_;          // read from the client, not yet used (a head, the start of a body)
    std::string upIn_;        // read from the upstream, not yet used
    std::string clientOut_;   // being written to the client
    std::string upstreamOut_;  // being written to the upstream
    std::optional<std::pair<RequestedHost, std::uint16_t>> upstreamTarget_;
    Exchange exchange_;
    Pump toUpstream_;
    Pump toClient_;
    int tunnelOpen_ = 0;
    ChunkedRelay<true> requestChunks_;
    ChunkedRelay<false> responseChunks_;
    std::array<char, 4096> discard_{};
    std::size_t discarded_ = 0;  // bytes dropped while lingering
};

void Connection::arm(std::chrono::milliseconds span, bool relaying) {
    relaying_ = relaying;
    deadline_ = Clock::now() + span;
    if (closed_) return;
    // Re-armed only when the new deadline is earlier than the one the timer waits for; a later
    // one is picked up when it fires.
    if (waiting_ && timer_.expiry() <= deadline_) return;
    timer_.expires_at(deadline_);
    wait_deadline();
}

void Connection::wait_deadline() {
    waiting_ = true;
    timer_.async_wait([self = shared_from_this(), this](const error_code& ec) {
        if (ec == asio::error::operation_aborted || closed_) return;
        waiting_ = false;
        if (Clock::now() < deadline_) {
            timer_.expires_at(deadline_);
            wait_deadline();
            return;
        }
        on_deadline();
    });
}

void Connection::on_deadline() {
    if (connecting_) {
        // The connect's handler answers the client (504, or a SOCKS reply).
        connectTimedOut_ = true;
        resolver_.cancel();
        error_code ignored;
        upstream_.close(ignored);
        return;
    }
    close();
}

void Connection::close() {
    if (closed_) return;
    closed_ = true;
    error_code ignored;
    client_.close(ignored);
    upstream_.close(ignored);
    resolver_.cancel();
    timer_.cancel();
    toUpstream_.close_pipe();
    toClient_.close_pipe();
}

template <class Then>
void Connection::read_some(tcp::socket& socket, std::string& into, Then then, std::size_t at_most) {
    const std::size_t old = into.size();
    into.resize(old + at_most);
    socket.async_read_some(asio::buffer(into.data() + old, at_most),
                           [self = shared_from_this(), &into, old, then = std::move(then)](const error_code& ec,
                                                                                           std::size_t n) mutable {
                               into.resize(old + n);
                               if (self->closed_) return;
                               then(ec);
                           });
}

template <class Then>
void Connection::write(tcp::socket& socket, std::string& buffer, std::string data, Then then) {
    buffer = std::move(data);
    const bool to_client = &socket == &client_;
    asio::async_write(socket, asio::buffer(buffer),
                      [self = shared_from_this(), to_client, then = std::move(then)](const error_code& ec,
                                                                                   std::size_t) mutable {
                          if (self->closed_) return;
                          if (ec) {
                              if (to_client) self->close();
                              else self->broken();
                              return;
                          }
                          self->touch();
                          then();
                      });
}

void Connection::read_first() {
    read_some(client_, in_, [this](const error_code& ec) {
        if (ec) return close();
        if (in_.empty()) return read_first();
        // SOCKS5 begins with its version, 5; no HTTP method begins with that byte.
        if (in_.front() == '\x05') return read_socks_greeting();
        read_request_head();
    });
}

// ---- HTTP ----

// A head ends at its first empty line, which must come within headerLimit bytes (not_found
// otherwise): looked for in what the buffer holds, then in what the peer sends, each byte once
// (find_head_end), and read no further than the limit, so a head read holds at most headerLimit
// bytes of its own. asio::async_read_until over a dynamic buffer capped at headerLimit is not
// used: given a buffer already longer than the cap (a head and the body after it, read at once),
// it cuts the buffer to the cap and the rest of the body is lost.
template <class Then>
void Connection::read_head(tcp::socket& socket, std::string& buffer, Then then, std::size_t searched) {
    const HeadEnd end = find_head_end(buffer, searched, options_.headerLimit);
    if (end.outcome == HeadEnd::Outcome::Found) return then(error_code{}, end.bytes);
    if (end.outcome == HeadEnd::Outcome::TooLong) return then(make_error_code(asio::error::not_found), 0);
    const std::size_t now = buffer.size();
    read_some(socket, buffer, [this, &socket, &buffer, now, then = std::move(then)](const error_code& ec) mutable {
        if (ec) return then(ec, 0);
        read_head(socket, buffer, std::move(then), now);
    }, std::min(kReadChunk, end.bytes));
}

void Connection::read_request_head() {
    read_head(client_, in_, [this](const error_code& ec, std::size_t size) { on_request_head(ec, size); });
}

void Connection::on_request_head(const error_code& ec, std::size_t size) {
    if (ec == asio::error::not_found)
        return refuse(431, "the request head is larger than " + std::to_string(options_.headerLimit) + " bytes");
    if (ec) return close();
    HeadInspection head = inspect_request_head(std::string_view(in_).substr(0, size), options_.headerLimit);
    if (head.outcome == HeadInspection::Outcome::NeedMore) return refuse(400, "the request head is incomplete");
    if (head.outcome == HeadInspection::Outcome::Refused) return refuse(head.status, head.reason);
    HttpRequest& request = head.request;
    std::string original = request.body == BodyFraming::Chunked ? in_.substr(0, head.headBytes) : std::string();
    in_.erase(0, head.headBytes);
    if (!allows(options_.allow, request.host, request.port)) return refuse_host(request.host, request.port);
    if (request.form == RequestForm::Connect) {
        const RequestedHost host = request.host;
        const std::uint16_t port = request.port;
        connect(host, port, [this](const UpstreamFailure* failed) {
            if (failed) return refuse(failed->kind == UpstreamFailure::Kind::Timeout ? 504 : 502, failed->text);
            write(client_, clientOut_, connect_established(), [this] { open_tunnel(); });
        });
        return;
    }
    start_exchange(std::move(request), std::move(original));
}

void Connection::refuse(unsigned status, const std::string& text) {
    close_after(error_response(status, "dsh-confine: " + text + "\n"));
}

void Connection::refuse_host(const RequestedHost& host, std::uint16_t port) {
    server_.refused(host, port, "not in allow_hosts");
    close_after(error_response(403, refusal_text(host, port)));
}

void Connection::close_after(std::string message) {
    answering_ = true;
    arm(options_.headTimeout);
    error_code ignored;
    upstream_.close(ignored);
    write(client_, clientOut_, std::move(message), [this] { linger(); });
}

void Connection::linger() {
    error_code ignored;
    client_.shutdown(tcp::socket::shutdown_send, ignored);
    arm(std::min(options_.headTimeout, std::chrono::milliseconds(kLinger)));
    discard();
}

void Connection::discard() {
    client_.async_read_some(asio::buffer(discard_), [self = shared_from_this(), this](const error_code& ec, std::size_t n) {
        if (closed_) return;
        discarded_ += n;
        if (ec || discarded_ > options_.headerLimit) return close();
        discard();
    });
}

void Connection::start_exchange(HttpRequest request, std::string head) {
    exchange_ = Exchange{};
    exchange_.request = std::move(request);
    const HttpRequest& r = exchange_.request;
    if (upstreamTarget_ && upstreamTarget_->first == r.host && upstreamTarget_->second == r.port && upstream_reusable())
        return send_request(std::move(head));
    connect(r.host, r.port, [this, head = std::move(head)](const UpstreamFailure* failed) mutable {
        if (failed) return refuse(failed->kind == UpstreamFailure::Kind::Timeout ? 504 : 502, failed->text);
        send_request(std::move(head));
    });
}

void Connection::send_request(std::string head) {
    arm(options_.idleTimeout, true);
    HttpRequest& request = exchange_.request;
    std::string out = std::move(request.upstreamHead);
    std::uint64_t remaining = 0;
    if (request.body == BodyFraming::Length) {
        const std::size_t take = static_cast<std::size_t>(std::min<std::uint64_t>(request.contentLength, in_.size()));
        out.append(in_, 0, take);
        in_.erase(0, take);
        remaining = request.contentLength - take;
    }
    write(upstream_, upstreamOut_, std::move(out), [this, remaining, head = std::move(head)] {
        const HttpRequest& r = exchange_.request;
        if (r.body == BodyFraming::Length && remaining > 0)
            return pump(toUpstream_, client_, upstream_, remaining, &Connection::request_body_pumped);
        if (r.body == BodyFraming::Chunked)
            return relay_chunked(requestChunks_, client_, in_, upstream_, head, &Connection::request_body_done);
        request_body_done({});
    });
    read_response_head();
}

void Connection::request_body_done(const error_code& ec) {
    if (ec) return broken();
    exchange_.requestDone = true;
    if (exchange_.responseDone) finish_exchange();
}

void Connection::read_response_head() {
    read_head(upstream_, upIn_, [this](const error_code& ec, std::size_t size) { on_response_head(ec, size); });
}

void Connection::upstream_failed(const std::string& text) {
    if (exchange_.responseStarted) return close();
    refuse(502, text);
}

void Connection::on_response_head(const error_code& ec, std::size_t size) {
    const std::string origin = host_port_text(exchange_.request.host, exchange_.request.port);
    if (ec == asio::error::not_found)
        return upstream_failed("the response head from " + origin + " is larger than " +
                               std::to_string(options_.headerLimit) + " bytes");
    if (ec) return upstream_failed(origin + " closed the connection without a complete response");
    touch();
    ResponseInspection head = inspect_response_head(std::string_view(upIn_).substr(0, size), options_.headerLimit,
                                                    exchange_.request.headMethod, exchange_.request.keepAlive);
    if (head.outcome != ResponseInspection::Outcome::Response)
        return upstream_failed(head.outcome == ResponseInspection::Outcome::Bad ? head.reason + " (" + origin + ")"
                                                                                : "incomplete response head from " + origin);
    std::string original = head.response.body == BodyFraming::Chunked ? upIn_.substr(0, head.headBytes) : std::string();
    upIn_.erase(0, head.headBytes);
    exchange_.responseStarted = true;
    exchange_.response = head.response;
    const HttpResponse& response = exchange_.response;
    std::string out = response.clientHead;
    if (response.status < 200)  // an interim response (100 Continue): the final one follows
        return write(client_, clientOut_, std::move(out), [this] { read_response_head(); });
    std::optional<std::uint64_t> remaining;
    if (response.body == BodyFraming::Length) {
        const std::size_t take = static_cast<std::size_t>(std::min<std::uint64_t>(response.contentLength, upIn_.size()));
        out.append(upIn_, 0, take);
        upIn_.erase(0, take);
        remaining = response.contentLength - take;
    } else if (response.body == BodyFraming::UntilClose) {
        out += upIn_;
        upIn_.clear();
    }
    write(client_, clientOut_, std::move(out), [this, remaining, original = std::move(original)] {
        const HttpResponse& r = exchange_.response;
        if (r.body == BodyFraming::Length && remaining && *remaining > 0)
            return pump(toClient_, upstream_, client_, *remaining, &Connection::response_body_pumped);
        if (r.body == BodyFraming::UntilClose)
            return pump(toClient_, upstream_, client_, std::nullopt, &Connection::response_body_pumped);
        if (r.body == BodyFraming::Chunked)
            return relay_chunked(responseChunks_, upstream_, upIn_, client_, original, &Connection::response_body_done);
        response_body_done({});
    });
}

void Connection::response_body_done(const error_code& ec) {
    if (ec) return broken();
    exchange_.responseDone = true;
    // The origin answered before the request's body was all sent, or the response ends with the
    // connection: the client's connection cannot carry another request.
    if (!exchange_.requestDone || exchange_.response.body == BodyFraming::UntilClose) return linger();
    finish_exchange();
}

void Connection::finish_exchange() {
    if (!exchange_.response.upstreamKeepAlive || !upIn_.empty()) {
        error_code ignored;
        upstream_.close(ignored);
        upstreamTarget_.reset();
        upIn_.clear();
    }
    if (!exchange_.response.keepAlive) return linger();
    // Every request on a kept connection is read, parsed and checked like the first.
    arm(options_.headTimeout);
    read_request_head();
}

// ---- SOCKS5 ----

void Connection::read_socks_greeting() {
    const SocksGreeting greeting = parse_socks_greeting(in_);
    switch (greeting.outcome) {
        case SocksGreeting::Outcome::NeedMore:
            return read_some(client_, in_, [this](const error_code& ec) {
                if (ec) return close();
                read_socks_greeting();
            });
        case SocksGreeting::Outcome::Malformed: return close();
        case SocksGreeting::Outcome::NoAcceptableMethod: return close_after(socks_method_reply(false));
        case SocksGreeting::Outcome::Accepted:
            in_.erase(0, greeting.bytes);
            return write(client_, clientOut_, socks_method_reply(true), [this] { read_socks_request(); });
    }
}

void Connection::read_socks_request() {
    SocksRequest request = parse_socks_request(in_);
    switch (request.outcome) {
        case SocksRequest::Outcome::NeedMore:
            // A request is at most 262 bytes; a client that sends more without completing one
            // is not speaking SOCKS5.
            if (in_.size() > 512) return close();
            return read_some(client_, in_, [this](const error_code& ec) {
                if (ec) return close();
                read_socks_request();
            });
        case SocksRequest::Outcome::Error: return close_after(socks_reply(request.error));
        case SocksRequest::Outcome::Target: break;
    }
    in_.erase(0, request.bytes);
    if (!allows(options_.allow, request.host, request.port)) {
        server_.refused(request.host, request.port, "not in allow_hosts");
        return close_after(socks_reply(SocksReply::NotAllowed));
    }
    connect(request.host, request.port, [this](const UpstreamFailure* failed) {
        if (failed) {
            SocksReply reply = SocksReply::GeneralFailure;
            switch (failed->kind) {
                case UpstreamFailure::Kind::Resolve:
                case UpstreamFailure::Kind::HostUnreachable:
                case UpstreamFailure::Kind::Timeout: reply = SocksReply::HostUnreachable; break;
                case UpstreamFailure::Kind::Refused: reply = SocksReply::ConnectionRefused; break;
                case UpstreamFailure::Kind::NetworkUnreachable: reply = SocksReply::NetworkUnreachable; break;
                case UpstreamFailure::Kind::Other: break;
            }
            return close_after(socks_reply(reply));
        }
        error_code ec;
        const tcp::endpoint bound = upstream_.local_endpoint(ec);
        std::string address;
        if (!ec && bound.address().is_v4()) {
            const auto bytes = bound.address().to_v4().to_bytes();
            address.assign(bytes.begin(), bytes.end());
        } else if (!ec) {
            const auto bytes = bound.address().to_v6().to_bytes();
            address.assign(bytes.begin(), bytes.end());
        }
        write(client_, clientOut_, socks_reply(SocksReply::Succeeded, address, ec ? 0 : bound.port()),
              [this] { open_tunnel(); });
    });
}

// ---- Upstream ----

UpstreamFailure Connection::failure(const error_code& ec, const std::string& what) const {
    UpstreamFailure out;
    if (connectTimedOut_ || ec == asio::error::timed_out) {
        out.kind = UpstreamFailure::Kind::Timeout;
        out.text = "no connection to " + what + " within " + std::to_string(options_.connectTimeout.count()) + " ms";
        return out;
    }
    if (ec == asio::error::connection_refused) out.kind = UpstreamFailure::Kind::Refused;
    else if (ec == asio::error::network_unreachable) out.kind = UpstreamFailure::Kind::NetworkUnreachable;
    else if (ec == asio::error::host_unreachable) out.kind = UpstreamFailure::Kind::HostUnreachable;
    out.text = "cannot connect to " + what + ": " + ec.message();
    return out;
}

void Connection::connect(const RequestedHost& host, std::uint16_t port,
                         std::function<void(const UpstreamFailure*)> done) {
    error_code ignored;
    upstream_.close(ignored);
    upstreamTarget_.reset();
    upIn_.clear();
    arm(options_.connectTimeout);
    connecting_ = true;
    connectTimedOut_ = false;
    const std::string what = host_port_text(host, port);
    upstreamTarget_.emplace(host, port);

    auto literal_endpoints = [port](const std::vector<std::string>& literals) {
        std::vector<tcp::endpoint> endpoints;
        for (const auto& literal : literals) {
            error_code ec;
            const auto address = asio::ip::make_address(literal, ec);
            if (!ec) endpoints.emplace_back(address, port);
        }
        return endpoints;
    };
    // An address literal is connected to as it is: no lookup.
    if (host.kind != HostKind::Name) return connect_to(literal_endpoints({host.host}), what, std::move(done));
    if (const auto fixed = options_.fixedAddresses.find(host.host); fixed != options_.fixedAddresses.end())
        return connect_to(literal_endpoints(fixed->second), what, std::move(done));
    // The one lookup of this name for this request; the connection goes to what it returned.
    resolver_.async_resolve(host.host, std::to_string(port), tcp::resolver::numeric_service,
                            [self = shared_from_this(), this, what, done = std::move(done)](
                                const error_code& ec, const tcp::resolver::results_type& results) mutable {
                                if (closed_) return;
                                if (ec || results.empty()) {
                                    connecting_ = false;
                                    UpstreamFailure failed = failure(ec, what);
                                    if (failed.kind != UpstreamFailure::Kind::Timeout) {
                                        failed.kind = UpstreamFailure::Kind::Resolve;
                                        failed.text = "cannot resolve " + what + ": " +
                                                      (ec ? ec.message() : std::string("no address"));
                                    }
                                    return done(&failed);
                                }
                                std::vector<tcp::endpoint> endpoints;
                                for (const auto& entry : results) endpoints.push_back(entry.endpoint());
                                connect_to(endpoints, what, std::move(done));
                            });
}

void Connection::connect_to(const std::vector<tcp::endpoint>& endpoints, const std::string& what,
                            std::function<void(const UpstreamFailure*)> done) {
    if (connectTimedOut_) {
        connecting_ = false;
        const UpstreamFailure failed = failure(asio::error::timed_out, what);
        return done(&failed);
    }
    if (endpoints.empty()) {
        connecting_ = false;
        const UpstreamFailure failed{UpstreamFailure::Kind::Resolve, "no usable address for " + what};
        return done(&failed);
    }
    // The first address that answers, in the order the lookup gave them.
    asio::async_connect(upstream_, endpoints,
                        [self = shared_from_this(), this, what, done = std::move(done)](const error_code& ec,
                                                                                        const tcp::endpoint&) {
                            if (closed_) return;
                            connecting_ = false;
                            if (ec || connectTimedOut_) {
                                upstreamTarget_.reset();
                                const UpstreamFailure failed = failure(ec, what);
                                return done(&failed);
                            }
                            error_code ignored;
                            upstream_.set_option(tcp::no_delay(true), ignored);
                            upstream_.set_option(asio::socket_base::out_of_band_inline(true), ignored);
                            arm(options_.idleTimeout, true);
                            done(nullptr);
                        });
}

// A kept upstream connection is used again only while the origin has neither closed it nor
// sent anything unasked.
bool Connection::upstream_reusable() {
    if (!upstream_.is_open() || !upIn_.empty()) return false;
    char byte = 0;
    const ssize_t n = ::recv(upstream_.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

void Connection::open_tunnel() {
    arm(options_.idleTimeout, true);
    auto start = [this] {
        tunnelOpen_ = 2;
        pump(toUpstream_, client_, upstream_, std::nullopt, &Connection::tunnel_half_done);
        pump(toClient_, upstream_, client_, std::nullopt, &Connection::tunnel_half_done);
    };
    if (in_.empty()) return start();
    // Bytes the client sent right behind its request belong to the tunnel.
    std::string early = std::move(in_);
    in_.clear();
    write(upstream_, upstreamOut_, std::move(early), start);
}

void Connection::tunnel_half_done(Pump& pump, const error_code& ec) {
    if (ec) return broken();
    error_code ignored;
    pump.to->shutdown(tcp::socket::shutdown_send, ignored);
    if (--tunnelOpen_ == 0) close();
}

// ---- Relays ----

void Connection::pump(Pump& p, tcp::socket& from, tcp::socket& to, std::optional<std::uint64_t> limit,
                      void (Connection::*finished)(Pump&, const error_code&)) {
    if (p.pipeRead < 0) {
        int fds[2];
        if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return close();
        p.pipeRead = fds[0];
        p.pipeWrite = fds[1];
        // A larger pipe moves more per splice; where the system refuses the size, the default.
        ::fcntl(p.pipeWrite, F_SETPIPE_SZ, static_cast<int>(std::min<std::size_t>(options_.relayBuffer, 1 << 30)));
        const int size = ::fcntl(p.pipeWrite, F_GETPIPE_SZ);
        p.capacity = size > 0 ? static_cast<std::size_t>(size) : 65536;
    }
    error_code ignored;
    from.native_non_blocking(true, ignored);
    to.native_non_blocking(true, ignored);
    p.from = &from;
    p.to = &to;
    p.limited = limit.has_value();
    p.remaining = limit.value_or(0);
    p.eof = false;
    p.finished = finished;
    pump_step(p);
}

void Connection::pump_step(Pump& p) {
    error_code ignored;
    for (;;) {
        bool moved = false;
        const bool want_more = !p.eof && (!p.limited || p.remaining > 0);
        if (want_more && p.inPipe < p.capacity) {
            std::size_t ask = p.capacity - p.inPipe;
            if (p.limited) ask = static_cast<std::size_t>(std::min<std::uint64_t>(ask, p.remaining));
            const ssize_t n = ::splice(p.from->native_handle(), nullptr, p.pipeWrite, nullptr, ask,
                                       SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
            if (n > 0) {
                p.inPipe += static_cast<std::size_t>(n);
                if (p.limited) p.remaining -= static_cast<std::uint64_t>(n);
                moved = true;
            } else if (n == 0) {
                p.eof = true;
                // A body of known length that ends early is a broken message, not an end.
                if (p.limited) return (this->*p.finished)(p, asio::error::eof);
            } else if (errno != EAGAIN && errno != EINTR) {
                return (this->*p.finished)(p, error_code(errno, boost::system::system_category()));
            } else if (errno == EAGAIN && p.inPipe == 0 && p.from->at_mark(ignored)) {
                // TCP urgent data: splice(2) stops before the urgent byte and never moves it,
                // answering EAGAIN while the socket stays readable, which would spin this loop.
                // Both sockets keep it inline (SO_OOBINLINE), so it is read here, in its place in
                // the stream, into the empty pipe, and the relay goes on past it.
                char byte = 0;
                if (::recv(p.from->native_handle(), &byte, 1, 0) != 1 || ::write(p.pipeWrite, &byte, 1) != 1)
                    return (this->*p.finished)(p, asio::error::operation_aborted);
                p.inPipe += 1;
                if (p.limited) p.remaining -= 1;
                moved = true;
            }
        }
        if (p.inPipe > 0) {
            const ssize_t n = ::splice(p.pipeRead, nullptr, p.to->native_handle(), nullptr, p.inPipe,
                                       SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
            if (n > 0) {
                p.inPipe -= static_cast<std::size_t>(n);
                moved = true;
            } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
                return (this->*p.finished)(p, error_code(errno, boost::system::system_category()));
            }
        }
        if (p.inPipe == 0 && (p.eof || (p.limited && p.remaining == 0))) return (this->*p.finished)(p, {});
        if (!moved) break;
        touch();
    }
    // Bytes wait in the pipe: the destination is full. Otherwise the source has nothing yet.
    auto resume = [self = shared_from_this(), this, &p](const error_code& ec) {
        if (closed_) return;
        if (ec) return broken();
        pump_step(p);
    };
    if (p.inPipe > 0) p.to->async_wait(tcp::socket::wait_write, std::move(resume));
    else p.from->async_wait(tcp::socket::wait_read, std::move(resume));
}

template <bool isRequest>
void Connection::relay_chunked(ChunkedRelay<isRequest>& relay, tcp::socket& from, std::string& input, tcp::socket& to,
                               const std::string& head, void (Connection::*finished)(const error_code&)) {
    relay.parser.emplace();
    relay.parser->header_limit(static_cast<std::uint32_t>(std::min<std::size_t>(options_.headerLimit, UINT32_MAX)));
    relay.parser->body_limit(std::numeric_limits<std::uint64_t>::max());
    relay.parser->eager(true);
    relay.decoded.clear();
    relay.onBody = [&relay](std::uint64_t, boost::beast::string_view body, error_code&) {
        relay.decoded.append(body.data(), body.size());
        return body.size();
    };
    relay.parser->on_chunk_body(relay.onBody);
    relay.from = &from;
    relay.to = &to;
    relay.input = &input;
    relay.finished = finished;
    error_code ec;
    relay.parser->put(asio::buffer(head), ec);
    if ((ec && ec != http::error::need_more) || !relay.parser->is_header_done())
        return (this->*finished)(ec ? ec : asio::error::invalid_argument);
    chunked_step(relay);
}

template <bool isRequest>
void Connection::chunked_step(ChunkedRelay<isRequest>& relay) {
    std::string& input = *relay.input;
    if (!input.empty() && !relay.parser->is_done()) {
        error_code ec;
        const std::size_t used = relay.parser->put(asio::buffer(input), ec);
        input.erase(0, used);
        if (ec && ec != http::error::need_more) return (this->*relay.finished)(ec);
        // What the parser leaves unread is one incomplete chunk-size line or trailer field: a
        // peer that never ends it would otherwise grow this buffer without bound.
        if (input.size() > options_.headerLimit) return (this->*relay.finished)(http::error::header_limit);
    }
    auto next = [this, &relay] { chunked_step(relay); };
    if (!relay.decoded.empty()) {
        relay.chunk.emplace(http::make_chunk(asio::const_buffer(relay.decoded.data(), relay.decoded.size())));
        asio::async_write(*relay.to, *relay.chunk,
                          [self = shared_from_this(), this, &relay, next](const error_code& ec, std::size_t) {
                              if (closed_) return;
                              if (ec) return broken();
                              touch();
                              relay.decoded.clear();
                              next();
                          });
        return;
    }
    if (relay.parser->is_done()) {
        relay.last.emplace(http::make_chunk_last());
        asio::async_write(*relay.to, *relay.last, [self = shared_from_this(), this, &relay](const error_code& ec, std::size_t) {
            if (closed_) return;
            if (ec) return broken();
            touch();
            (this->*relay.finished)({});
        });
        return;
    }
    read_some(*relay.from, input, [this, next](const error_code& ec) {
        if (ec) return broken();  // the body ended before its last chunk
        touch();
        next();
    });
}

// ---- Server ----

bool Server::start(std::string& why) {
    if (options_.listenFds.empty()) {
        why = "no listening socket";
        return false;
    }
    for (const int fd : options_.listenFds) {
        int listening = 0;
        int type = 0;
        int domain = 0;
        socklen_t size = sizeof listening;
        const bool ok = ::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &size) == 0 &&
                        (size = sizeof type, ::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &size) == 0) &&
                        (size = sizeof domain, ::getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &size) == 0);
        if (!ok || !listening || type != SOCK_STREAM || (domain != AF_INET && domain != AF_INET6)) {
            why = "descriptor " + std::to_string(fd) + " is not a listening TCP socket";
            return false;
        }
        const int own = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (own < 0) {
            why = "cannot duplicate descriptor " + std::to_string(fd);
            return false;
        }
        auto listener = std::make_unique<Listener>(io_);
        error_code ec;
        listener->acceptor.assign(domain == AF_INET ? tcp::v4() : tcp::v6(), own, ec);
        if (ec) {
            ::close(own);
            why = "descriptor " + std::to_string(fd) + ": " + ec.message();
            return false;
        }
        listeners_.push_back(std::move(listener));
    }
    for (const int fd : options_.lifetimeFds) {
        const int own = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (own < 0) {
            why = "cannot duplicate the lifetime descriptor " + std::to_string(fd);
            return false;
        }
        auto lifetime = std::make_unique<asio::posix::stream_descriptor>(io_);
        error_code ec;
        lifetime->assign(own, ec);
        if (ec) {
            ::close(own);
            why = "the lifetime descriptor " + std::to_string(fd) + " cannot be waited on: " + ec.message();
            return false;
        }
        lifetime->async_wait(asio::posix::stream_descriptor::wait_read, [this](const error_code&) { stop(); });
        lifetimes_.push_back(std::move(lifetime));
    }
    for (auto& listener : listeners_) accept(*listener);
    return true;
}

void Server::accept(Listener& listener) {
    listener.acceptor.async_accept([this, &listener](const error_code& ec, tcp::socket socket) {
        if (stopped_ || ec == asio::error::operation_aborted) return;
        if (ec) {
            // Out of descriptors or memory: try again a little later rather than spin.
            listener.pause.expires_after(std::chrono::milliseconds(100));
            listener.pause.async_wait([this, &listener](const error_code& wait) {
                if (!stopped_ && !wait) accept(listener);
            });
            return;
        }
        if (live_.size() >= options_.maxConnections) {
            error_code ignored;
            socket.close(ignored);  // beyond the bound: refused at once
        } else {
            std::make_shared<Connection>(*this, std::move(socket))->start();
        }
        accept(listener);
    });
}

void Server::stop() {
    if (stopped_) return;
    stopped_ = true;
    error_code ignored;
    for (auto& listener : listeners_) {
        listener->acceptor.close(ignored);
        listener->pause.cancel();
    }
    const std::vector<Connection*> open(live_.begin(), live_.end());
    for (Connection* connection : open) connection->close();
    io_.stop();
}

// Each connection may hold its client, its upstream and two pipes: the soft limit on open
// descriptors is raised toward the hard one when the bound on connections needs it.
void raise_descriptor_limit(std::size_t connections) {
    rlimit limit{};
    if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
    const rlim_t wanted = static_cast<rlim_t>(connections) * 6 + 64;
    if (limit.rlim_cur >= wanted) return;
    limit.rlim_cur = std::min(wanted, limit.rlim_max);
    ::setrlimit(RLIMIT_NOFILE, &limit);
}

}  // namespace

int run_proxy(const ProxyOptions& options, std::string* error) {
    ::signal(SIGPIPE, SIG_IGN);
    raise_descriptor_limit(options.maxConnections);
    std::string why;
    int status = 0;
    try {
        Server server(options);
        if (server.start(why)) server.run();
        else status = 1;
    } catch (const std::exception& e) {
        why = std::string("cannot start: ") + e.what();
        status = 1;
    }
    if (status != 0 && error) *error = why;
    return status;
}

}  // namespace dsh::proxy
