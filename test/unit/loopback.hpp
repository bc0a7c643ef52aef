// Loopback servers and clients for the proxy's tests and benchmark (test/bench/proxy_bench.cpp):
// listening sockets on 127.0.0.1 or ::1, an origin server that counts the connections it
// accepted and keeps the request heads it read, and a client's blocking reads and writes. Plain
// POSIX sockets and threads, so what judges the proxy shares no code with it.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace dsh::loopback {

// Every blocking read in the tests gives up after this long: a guard against a hang, never a
// measurement (a read that times out fails the test as a short read).
inline constexpr int kHangGuardSeconds = 20;

inline void fail(const std::string& what) { throw std::runtime_error(what + ": " + std::strerror(errno)); }

inline void guard(int fd) {
    timeval tv{kHangGuardSeconds, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

inline sockaddr_storage loopback_address(int family, std::uint16_t port, socklen_t& size) {
    sockaddr_storage address{};
    if (family == AF_INET6) {
        auto* v6 = reinterpret_cast<sockaddr_in6*>(&address);
        v6->sin6_family = AF_INET6;
        v6->sin6_addr = in6addr_loopback;
        v6->sin6_port = htons(port);
        size = sizeof(sockaddr_in6);
    } else {
        auto* v4 = reinterpret_cast<sockaddr_in*>(&address);
        v4->sin_family = AF_INET;
        v4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        v4->sin_port = htons(port);
        size = sizeof(sockaddr_in);
    }
    return address;
}

// A listening socket on the loopback address of `family`, on a port the kernel picks.
inline int listen_on(int family) {
    const int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) fail("socket");
    socklen_t size = 0;
    const sockaddr_storage address = loopback_address(family, 0, size);
    if (::bind(fd, reinterpret_cast<const sockaddr*>(&address), size) != 0 || ::listen(fd, 512) != 0) {
        ::close(fd);
        fail("bind/listen on loopback");
    }
    return fd;
}

inline std::uint16_t port_of(int fd) {
    sockaddr_storage address{};
    socklen_t size = sizeof address;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size) != 0) fail("getsockname");
    if (address.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&address)->sin6_port);
    return ntohs(reinterpret_cast<sockaddr_in*>(&address)->sin_port);
}

inline bool ipv6_loopback_works() {
    const int fd = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    socklen_t size = 0;
    const sockaddr_storage address = loopback_address(AF_INET6, 0, size);
    const bool ok = ::bind(fd, reinterpret_cast<const sockaddr*>(&address), size) == 0;
    ::close(fd);
    return ok;
}

// A port on which nothing listens (bound, then closed): a connection there is refused.
inline std::uint16_t closed_port() {
    const int fd = listen_on(AF_INET);
    const std::uint16_t port = port_of(fd);
    ::close(fd);
    return port;
}

// A connection to `address` (`what` names it in the error), with the hang guard.
inline int connect_to(const sockaddr_storage& address, socklen_t size, const std::string& what) {
    const int fd = ::socket(address.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) fail("socket");
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), size) != 0) {
        ::close(fd);
        fail("connect to " + what);
    }
    guard(fd);
    return fd;
}

inline int connect_to(int family, std::uint16_t port) {
    socklen_t size = 0;
    const sockaddr_storage address = loopback_address(family, port, size);
    return connect_to(address, size, "loopback port " + std::to_string(port));
}

inline bool send_all(int fd, std::string_view data) {
    while (!data.empty()) {
        const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        data.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
}

// Reads into `buffered` until it holds `size` bytes; false on EOF or an error first.
inline bool fill(int fd, std::string& buffered, std::size_t size) {
    char chunk[65536];
    while (buffered.size() < size) {
        const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        buffered.append(chunk, static_cast<std::size_t>(n));
    }
    return true;
}

// Reads until `buffered` holds `delimiter`; returns what precedes it and the delimiter, and
// leaves the rest in `buffered`. Empty on EOF or an error first.
inline std::string read_through(int fd, std::string& buffered, std::string_view delimiter) {
    char chunk[65536];
    for (;;) {
        const std::size_t at = buffered.find(delimiter);
        if (at != std::string::npos) {
            std::string out = buffered.substr(0, at + delimiter.size());
            buffered.erase(0, at + delimiter.size());
            return out;
        }
        const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return {};
        buffered.append(chunk, static_cast<std::size_t>(n));
    }
}

// Everything until the peer closes (or the hang guard).
inline std::string read_to_end(int fd, std::string buffered = {}) {
    char chunk[65536];
    for (;;) {
        const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return buffered;
        buffered.append(chunk, static_cast<std::size_t>(n));
    }
}

inline std::string lower(std::string text) {
    for (char& c : text)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return text;
}

// The value of a field in a head ("" when absent), by a case-insensitive name.
inline std::string field(const std::string& head, const std::string& name) {
    const std::string lowered = lower(head);
    const std::size_t at = lowered.find("\r\n" + lower(name) + ":");
    if (at == std::string::npos) return {};
    std::size_t start = at + 3 + name.size();
    while (start < head.size() && head[start] == ' ') ++start;
    return head.substr(start, head.find("\r\n", start) - start);
}

// A chunked body's bytes, decoded into `body`; false when it breaks off.
inline bool read_chunked(int fd, std::string& buffered, std::string& body) {
    for (;;) {
        const std::string line = read_through(fd, buffered, "\r\n");
        if (line.empty()) return false;
        const std::size_t size = std::strtoul(line.c_str(), nullptr, 16);
        if (size == 0) return read_through(fd, buffered, "\r\n") == "\r\n";
        if (!fill(fd, buffered, size + 2)) return false;
        body += buffered.substr(0, size);
        buffered.erase(0, size + 2);
    }
}

struct HttpReply {
    unsigned status = 0;  // 0: no complete response
    std::string head;
    std::string body;
};

// One response: the head, then a body by Content-Length, chunked, or until the close.
inline HttpReply read_response(int fd, std::string& buffered, bool headRequest = false) {
    HttpReply reply;
    reply.head = read_through(fd, buffered, "\r\n\r\n");
    if (reply.head.size() < 12) return {};
    const unsigned status = static_cast<unsigned>(std::atoi(reply.head.c_str() + 9));
    if (headRequest || status == 204 || status == 304 || status < 200) {
        reply.status = status;
        return reply;
    }
    const std::string length = field(reply.head, "Content-Length");
    if (!length.empty()) {
        const std::size_t size = std::strtoull(length.c_str(), nullptr, 10);
        if (!fill(fd, buffered, size)) return {};
        reply.body = buffered.substr(0, size);
        buffered.erase(0, size);
    } else if (lower(field(reply.head, "Transfer-Encoding")) == "chunked") {
        if (!read_chunked(fd, buffered, reply.body)) return {};
    } else {
        reply.body = read_to_end(fd, std::move(buffered));
        buffered.clear();
    }
    reply.status = status;
    return reply;
}

// A server on loopback (or on a listening socket given) that hands each connection it accepts
// to `serve` on a thread of its own, and counts them. stop() (or the destructor) also counts
// connections still waiting in the backlog, so after the proxy has ended, accepted() is every
// connection ever made to it.
class Origin {
public:
    using Serve = std::function<void(int fd, Origin& origin)>;

    // A listening socket the caller made, which the Origin owns from then on: bound to any
    // address, in any network namespace (a socket keeps the one it was made in).
    struct Listening {
        int fd;
    };

    Origin(int family, Serve serve) : Origin(Listening{listen_on(family)}, std::move(serve)) {}
    Origin(Listening listening, Serve serve) : serve_(std::move(serve)), listen_(listening.fd) {
        port_ = port_of(listen_);
        if (::pipe2(stop_, O_CLOEXEC) != 0) fail("pipe2");
        acceptor_ = std::thread([this] { accept_loop(); });
    }
    Origin(const Origin&) = delete;
    Origin& operator=(const Origin&) = delete;
    ~Origin() { stop(); }

    std::uint16_t port() const { return port_; }

    void stop() {
        if (stopped_) return;
        stopped_ = true;
        if (::write(stop_[1], "x", 1) != 1) std::abort();
        acceptor_.join();
        for (auto& worker : workers_) worker.thread.join();
        ::close(listen_);
        ::close(stop_[0]);
        ::close(stop_[1]);
    }

    int accepted() {
        std::lock_guard lock(mutex_);
        return accepted_;
    }
    void record(std::string head) {
        std::lock_guard lock(mutex_);
        requests_.push_back(std::move(head));
    }
    std::vector<std::string> requests() {
        std::lock_guard lock(mutex_);
        return requests_;
    }

private:
    void accept_loop() {
        pollfd fds[2] = {{listen_, POLLIN, 0}, {stop_[0], POLLIN, 0}};
        for (;;) {
            if (::poll(fds, 2, -1) < 0 && errno != EINTR) break;
            if (fds[1].revents) break;
            if (fds[0].revents) take(::accept4(listen_, nullptr, nullptr, SOCK_CLOEXEC));
        }
        // What is left in the backlog was a connection too.
        ::fcntl(listen_, F_SETFL, ::fcntl(listen_, F_GETFL) | O_NONBLOCK);
        for (;;) {
            const int fd = ::accept4(listen_, nullptr, nullptr, SOCK_CLOEXEC);
            if (fd < 0) break;
            std::lock_guard lock(mutex_);
            ++accepted_;
            ::close(fd);
        }
    }

    void take(int fd) {
        if (fd < 0) return;
        {
            std::lock_guard lock(mutex_);
            ++accepted_;
        }
        guard(fd);
        // Finished workers are joined as new ones start: a benchmark makes thousands.
        std::erase_if(workers_, [](Worker& worker) {
            if (!worker.done->load()) return false;
            worker.thread.join();
            return true;
        });
        auto done = std::make_shared<std::atomic<bool>>(false);
        workers_.push_back({std::thread([this, fd, done] {
                                serve_(fd, *this);
                                ::close(fd);
                                done->store(true);
                            }),
                            done});
    }

    struct Worker {
        std::thread thread;
        std::shared_ptr<std::atomic<bool>> done;
    };

    Serve serve_;
    int listen_ = -1;
    std::uint16_t port_ = 0;
    int stop_[2] = {-1, -1};
    bool stopped_ = false;
    std::thread acceptor_;
    std::vector<Worker> workers_;
    std::mutex mutex_;
    int accepted_ = 0;
    std::vector<std::string> requests_;
};

// Echoes every byte back until the client closes.
inline void serve_echo(int fd, Origin&) {
    char chunk[65536];
    for (;;) {
        const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0 || !send_all(fd, std::string_view(chunk, static_cast<std::size_t>(n)))) return;
    }
}

// Reads and discards everything until the client closes: what a download's sink is.
inline std::uint64_t drain(int fd) {
    static char chunk[1 << 20];
    std::uint64_t total = 0;
    for (;;) {
        const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return total;
        total += static_cast<std::uint64_t>(n);
    }
}

// Sends `size` bytes of a repeating pattern.
inline bool send_pattern(int fd, std::uint64_t size) {
    static const std::string block = [] {
        std::string b(1 << 20, '\0');
        for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<char>('a' + i % 26);
        return b;
    }();
    while (size > 0) {
        const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(size, block.size()));
        if (!send_all(fd, std::string_view(block.data(), n))) return false;
        size -= n;
    }
    return true;
}

// An HTTP/1.1 origin: it records each request head and answers by path:
//   /bytes/N    N bytes of a pattern, with Content-Length (a HEAD request gets the head only)
//   /chunked    "hello, world" in two chunks
//   /close      "until the close" without a length, then closes
//   /echo       the request's body back (Content-Length or chunked request)
//   anything else: "origin saw: " and the request line
// It keeps the connection until the client closes it or asks to.
inline void serve_http(int fd, Origin& origin) {
    std::string buffered;
    for (;;) {
        const std::string head = read_through(fd, buffered, "\r\n\r\n");
        if (head.empty()) return;
        origin.record(head);
        const std::string request_line = head.substr(0, head.find("\r\n"));
        const std::size_t path_start = request_line.find(' ') + 1;
        const std::string path = request_line.substr(path_start, request_line.find(' ', path_start) - path_start);
        std::string body;
        const std::string length = field(head, "Content-Length");
        if (!length.empty()) {
            const std::size_t size = std::strtoull(length.c_str(), nullptr, 10);
            if (!fill(fd, buffered, size)) return;
            body = buffered.substr(0, size);
            buffered.erase(0, size);
        } else if (lower(field(head, "Transfer-Encoding")) == "chunked") {
            if (!read_chunked(fd, buffered, body)) return;
        }
        const bool close_after = lower(field(head, "Connection")) == "close" || request_line.ends_with("HTTP/1.0");
        const bool head_only = request_line.starts_with("HEAD ");
        const std::string connection = close_after ? "Connection: close\r\n" : "";
        bool ok = true;
        if (path.starts_with("/bytes/")) {
            const std::uint64_t size = std::strtoull(path.c_str() + 7, nullptr, 10);
            ok = send_all(fd, "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(size) + "\r\n" + connection + "\r\n") &&
                 (head_only || send_pattern(fd, size));
        } else if (path == "/chunked") {
            ok = send_all(fd, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n" + connection +
                                  "\r\n7\r\nhello, \r\n5\r\nworld\r\n0\r\n\r\n");
        } else if (path == "/close") {
            send_all(fd, "HTTP/1.1 200 OK\r\n\r\nuntil the close");
            return;
        } else {
            const std::string answer = path == "/echo" ? body : "origin saw: " + request_line;
            ok = send_all(fd, "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(answer.size()) + "\r\n" + connection +
                                  "\r\n" + (head_only ? std::string() : answer));
        }
        if (!ok || close_after) return;
    }
}

}  // namespace dsh::loopback
