// The allow-list proxy's figures, side by side in one run on loopback: a large download
// direct and through the proxy (an absolute-URI request, and a CONNECT tunnel), the time to set
// up a connection and get a small answer, and 64 downloads at once. Beside them, the floor of
// any relay on this host: a port forwarder that is one blocking splice(2) loop per direction and
// connection, with no event loop, no parsing and no checks. It prints figures and judges
// nothing.
//
//   proxy_bench [--bytes N] [--runs N] [--setups N] [--parallel N] [--relay-buffer N]
//
// The origin, the proxy and the clients are threads of this one process (the proxy on a thread
// of its own, as run_proxy runs in its own process in use), all on the loopback interface.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "../../platform/linux/proxy.hpp"
#include "../unit/loopback.hpp"

namespace {

using namespace dsh::loopback;
using Clock = std::chrono::steady_clock;

enum class Route { Direct, Floor, AbsoluteUri, Connect };
constexpr int kRoutes = 4;
const char* name(Route route) {
    switch (route) {
        case Route::Direct: return "direct";
        case Route::Floor: return "relay floor";
        case Route::AbsoluteUri: return "absolute-URI";
        case Route::Connect: return "CONNECT";
    }
    return "";
}

struct Setup {
    std::uint16_t origin = 0;
    std::uint16_t proxy = 0;
    std::uint16_t floor = 0;
};

// The relay floor: accepts on `listener`, connects each client to the origin, and moves bytes
// each way with blocking splice(2) through a pipe of `capacity` bytes, on two threads per
// connection. Runs until the listener is shut down.
void relay_floor(int listener, std::uint16_t origin, std::size_t capacity) {
    std::vector<std::thread> threads;
    auto pump = [capacity](int from, int to) {
        int pipe[2];
        if (::pipe2(pipe, O_CLOEXEC) != 0) return;
        ::fcntl(pipe[1], F_SETPIPE_SZ, static_cast<int>(capacity));
        for (;;) {
            ssize_t n = ::splice(from, nullptr, pipe[1], nullptr, capacity, SPLICE_F_MOVE);
            if (n <= 0) break;
            while (n > 0) {
                const ssize_t m = ::splice(pipe[0], nullptr, to, nullptr, static_cast<std::size_t>(n), SPLICE_F_MOVE);
                if (m <= 0) break;
                n -= m;
            }
            if (n > 0) break;
        }
        ::shutdown(to, SHUT_WR);
        ::close(pipe[0]);
        ::close(pipe[1]);
    };
    for (;;) {
        const int client = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
        if (client < 0) break;
        const int upstream = connect_to(AF_INET, origin);
        threads.emplace_back([=] {
            std::thread back(pump, upstream, client);
            pump(client, upstream);
            back.join();
            ::close(client);
            ::close(upstream);
        });
    }
    for (auto& thread : threads) thread.join();
}

// Opens a connection by `route` and sends a GET for `path`; returns the socket, with whatever
// was read past the CONNECT answer in `buffered`.
int open_and_ask(Route route, const Setup& setup, const std::string& path, std::string& buffered) {
    const std::string origin = "127.0.0.1:" + std::to_string(setup.origin);
    if (route == Route::Direct || route == Route::Floor) {
        const int fd = connect_to(AF_INET, route == Route::Direct ? setup.origin : setup.floor);
        send_all(fd, "GET " + path + " HTTP/1.1\r\nHost: " + origin + "\r\n\r\n");
        return fd;
    }
    const int fd = connect_to(AF_INET, setup.proxy);
    if (route == Route::AbsoluteUri) {
        send_all(fd, "GET http://" + origin + path + " HTTP/1.1\r\nHost: " + origin + "\r\n\r\n");
        return fd;
    }
    send_all(fd, "CONNECT " + origin + " HTTP/1.1\r\nHost: " + origin + "\r\n\r\n");
    if (read_through(fd, buffered, "\r\n\r\n").find(" 200 ") == std::string::npos) {
        std::fprintf(stderr, "proxy_bench: CONNECT was refused\n");
        std::exit(1);
    }
    send_all(fd, "GET " + path + " HTTP/1.1\r\nHost: " + origin + "\r\n\r\n");
    return fd;
}

// Downloads `size` bytes, discarding them; returns the bytes received after the head.
std::uint64_t download(Route route, const Setup& setup, std::uint64_t size) {
    std::string buffered;
    const int fd = open_and_ask(route, setup, "/bytes/" + std::to_string(size), buffered);
    read_through(fd, buffered, "\r\n\r\n");
    std::uint64_t got = buffered.size();
    static thread_local std::vector<char> chunk(1 << 20);
    while (got < size) {
        const ssize_t n = ::recv(fd, chunk.data(), chunk.size(), 0);
        if (n <= 0) break;
        got += static_cast<std::uint64_t>(n);
    }
    ::close(fd);
    return got;
}

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// CPU time of this whole process (origin, proxy and client threads), user and system.
double cpu_seconds() {
    rusage usage{};
    ::getrusage(RUSAGE_SELF, &usage);
    return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
           static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

double median(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    return values[values.size() / 2];
}

double percentile(std::vector<double> values, double p) {
    std::sort(values.begin(), values.end());
    return values[std::min(values.size() - 1, static_cast<std::size_t>(p * static_cast<double>(values.size())))];
}

std::uint64_t number(const char* text) { return std::strtoull(text, nullptr, 10); }

}  // namespace

int main(int argc, char** argv) {
    std::uint64_t bytes = 1ull << 30;
    int runs = 3;
    int setups = 1000;
    int parallel = 64;
    std::size_t relay_buffer = dsh::proxy::ProxyOptions{}.relayBuffer;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string option = argv[i];
        if (option == "--bytes") bytes = number(argv[i + 1]);
        else if (option == "--runs") runs = static_cast<int>(number(argv[i + 1]));
        else if (option == "--setups") setups = static_cast<int>(number(argv[i + 1]));
        else if (option == "--parallel") parallel = static_cast<int>(number(argv[i + 1]));
        else if (option == "--relay-buffer") relay_buffer = number(argv[i + 1]);
        else {
            std::fprintf(stderr, "usage: proxy_bench [--bytes N] [--runs N] [--setups N] [--parallel N] [--relay-buffer N]\n");
            return 2;
        }
    }
    if (runs < 1 || setups < 1 || parallel < 1 || bytes < 1) return 2;

    Origin origin(AF_INET, serve_http);
    dsh::proxy::ProxyOptions options;
    options.allow.push_back(*dsh::parse_host_pattern("127.0.0.1"));
    const int listener = listen_on(AF_INET);
    options.listenFds = {listener};
    int lifetime[2];
    if (::pipe2(lifetime, O_CLOEXEC) != 0) return 1;
    options.lifetimeFds = {lifetime[0]};
    options.relayBuffer = relay_buffer;
    options.maxConnections = static_cast<std::size_t>(parallel) + 16;
    std::thread proxy([&] { dsh::proxy::run_proxy(options); });
    const int floor_listener = listen_on(AF_INET);
    std::thread floor([&] { relay_floor(floor_listener, origin.port(), relay_buffer); });
    const Setup setup{origin.port(), port_of(listener), port_of(floor_listener)};
    const Route routes[] = {Route::Direct, Route::Floor, Route::AbsoluteUri, Route::Connect};

    std::printf("proxy_bench: loopback, %d run(s) of each (median), relay buffer %zu bytes, %u cores\n", runs,
                relay_buffer, std::thread::hardware_concurrency());
    std::printf("(CPU: of this whole process, origin and client included, per GiB moved)\n");

    // One large download; the runs of the three routes alternate, so a slower moment of the
    // host falls on all of them.
    std::vector<double> rate[kRoutes];
    std::vector<double> cpu[kRoutes];
    for (int run = 0; run < runs; ++run) {
        for (const Route route : routes) {
            const auto start = Clock::now();
            const double cpu_start = cpu_seconds();
            const std::uint64_t got = download(route, setup, bytes);
            const double elapsed = seconds_since(start);
            cpu[static_cast<int>(route)].push_back((cpu_seconds() - cpu_start) / (static_cast<double>(got) / (1 << 30)));
            if (got != bytes) std::fprintf(stderr, "proxy_bench: %s download got %llu bytes\n", name(route),
                                            static_cast<unsigned long long>(got));
            rate[static_cast<int>(route)].push_back(static_cast<double>(got) / elapsed);
        }
    }
    const double direct_rate = median(rate[0]);
    const double floor_rate = median(rate[1]);
    for (const Route route : routes) {
        const double r = median(rate[static_cast<int>(route)]);
        std::printf("download %-13s %6.0f MiB  %6.2f GB/s  %.2fx direct  %.2fx floor  CPU %.2f s/GiB\n", name(route),
                    static_cast<double>(bytes) / (1 << 20), r / 1e9, r / direct_rate, r / floor_rate,
                    median(cpu[static_cast<int>(route)]));
    }

    // Set-up: a new connection, a small request, its answer, the close.
    std::vector<double> latency[kRoutes];
    for (int i = 0; i < setups; ++i) {
        for (const Route route : routes) {
            const auto start = Clock::now();
            std::string buffered;
            const int fd = open_and_ask(route, setup, "/small", buffered);
            const HttpReply reply = read_response(fd, buffered);
            ::close(fd);
            if (reply.status != 200) {
                std::fprintf(stderr, "proxy_bench: %s request answered %u\n", name(route), reply.status);
                return 1;
            }
            latency[static_cast<int>(route)].push_back(seconds_since(start) * 1e6);
        }
    }
    const double direct_setup = median(latency[0]);
    for (const Route route : routes) {
        const auto& l = latency[static_cast<int>(route)];
        std::printf("setup    %-13s median %7.1f us  p90 %7.1f us  %+7.1f us against direct (%d connections)\n",
                    name(route), median(l), percentile(l, 0.9), median(l) - direct_setup, setups);
    }

    // Many downloads at once, sharing `bytes` between them; the routes alternate as above.
    const std::uint64_t each = std::max<std::uint64_t>(bytes / static_cast<std::uint64_t>(parallel), 1);
    std::vector<double> aggregate[kRoutes];
    for (int run = 0; run < runs; ++run) {
        for (const Route route : routes) {
            std::vector<std::thread> clients;
            std::vector<std::uint64_t> got(static_cast<std::size_t>(parallel));
            const auto start = Clock::now();
            for (int c = 0; c < parallel; ++c)
                clients.emplace_back([&, c] { got[static_cast<std::size_t>(c)] = download(route, setup, each); });
            for (auto& client : clients) client.join();
            const double elapsed = seconds_since(start);
            std::uint64_t total = 0;
            for (const auto g : got) total += g;
            if (total != each * static_cast<std::uint64_t>(parallel))
                std::fprintf(stderr, "proxy_bench: %s parallel downloads fell short\n", name(route));
            aggregate[static_cast<int>(route)].push_back(static_cast<double>(total) / elapsed);
        }
    }
    const double direct_parallel = median(aggregate[0]);
    const double floor_parallel = median(aggregate[1]);
    for (const Route route : routes) {
        const double r = median(aggregate[static_cast<int>(route)]);
        std::printf("parallel %-13s %d x %.1f MiB  %6.2f GB/s  %.2fx direct  %.2fx floor\n", name(route), parallel,
                    static_cast<double>(each) / (1 << 20), r / 1e9, r / direct_parallel, r / floor_parallel);
    }

    ::close(lifetime[1]);
    proxy.join();
    ::shutdown(floor_listener, SHUT_RDWR);
    floor.join();
    ::close(floor_listener);
    ::close(lifetime[0]);
    ::close(listener);
    origin.stop();
    return 0;
}
