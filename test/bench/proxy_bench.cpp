// The allow-list proxy's figures, side by side in one run on loopback: a large download
// direct and through the proxy (an absolute-URI request, and a CONNECT tunnel), the time to set
// up a connection and get a small answer, and 64 downloads at once. Beside them, the floor of
// any relay on this host: a port forwarder that is one blocking splice(2) loop per direction and
// connection, with no event loop, no parsing and no checks. It prints figures and judges
// nothing.
//
//   proxy_bench [--bytes N] [--runs N] [--setups N] [--parallel N] [--relay-buffer N]
//   proxy_bench --link RATE[,RATE...] [--bytes N] [--runs N] [--relay-buffer N]
//
// The origin, the proxy and the clients are threads of this one process (the proxy on a thread
// of its own, as run_proxy runs in its own process in use), all on the loopback interface.
//
// On loopback the download is bound by the CPU, and a relay's second socket pair costs about
// as much as the download itself. --link puts the origin where a real network puts it, across
// a link of a fixed rate, and times only the large download at each RATE (tc's syntax: 1gbit,
// 500mbit, 2.5gbit; `unshaped` for the bare veth pair): the origin listens in a network
// namespace of its own, joined to the bench's by a veth pair whose both ends tc's token bucket
// (tbf) shapes to RATE, while the client still reaches the proxy and the relay floor on
// loopback, as in a real call. Every route then crosses the same link exactly once. Without
// --bytes a download is 1 GiB, or what the link moves in 4 s when that is less, so a rate's
// runs stay under about a minute.
//
// The namespaces are the bench's own and die with it, however it ends: it moves itself into a
// new network namespace first (in a new user namespace when it cannot otherwise, as an
// unprivileged user), makes the origin's beside it, and holds both only by its threads and
// descriptors, so nothing is named in /run/netns and the veth pair goes with them. Every ip and
// tc command runs inside one of the two; the host's interfaces are never touched. Where the
// namespaces, the veth pair or the shaping cannot be made, one line says so and it exits 0.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <utility>
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

// Where the origin listens (IPv4): its address for connect(2), and as a request target's
// authority.
struct Endpoint {
    sockaddr_storage address{};
    socklen_t size = 0;
    std::string authority;  // "address:port"
};

Endpoint endpoint_of(int listener) {
    Endpoint endpoint;
    endpoint.size = sizeof endpoint.address;
    if (::getsockname(listener, reinterpret_cast<sockaddr*>(&endpoint.address), &endpoint.size) != 0) fail("getsockname");
    char text[INET_ADDRSTRLEN] = "";
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&endpoint.address)->sin_addr, text, sizeof text);
    endpoint.authority = std::string(text) + ":" + std::to_string(port_of(listener));
    return endpoint;
}

struct Setup {
    Endpoint origin;
    std::uint16_t proxy = 0;
    std::uint16_t floor = 0;
};

// The relay floor: accepts on `listener`, connects each client to the origin, and moves bytes
// each way with blocking splice(2) through a pipe of `capacity` bytes, on two threads per
// connection. Runs until the listener is shut down.
void relay_floor(int listener, const Endpoint& origin, std::size_t capacity) {
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
        const int upstream = connect_to(origin.address, origin.size, "the origin");
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
    const std::string& origin = setup.origin.authority;
    if (route == Route::Direct || route == Route::Floor) {
        const int fd = route == Route::Direct ? connect_to(setup.origin.address, setup.origin.size, "the origin")
                                              : connect_to(AF_INET, setup.floor);
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

const Route kAllRoutes[] = {Route::Direct, Route::Floor, Route::AbsoluteUri, Route::Connect};

// The proxy (allowing `allow` only) and the relay floor, each on a thread of its own and
// listening on loopback, relaying to `origin`; both end when this does.
class Relays {
public:
    Relays(const Endpoint& origin, const std::string& allow, std::size_t relayBuffer, int parallel) : origin_(origin) {
        options_.allow.push_back(*dsh::parse_host_pattern(allow));
        const int listener = listen_on(AF_INET);
        proxyPort_ = port_of(listener);
        options_.listenFds = {listener};
        if (::pipe2(lifetime_, O_CLOEXEC) != 0) fail("pipe2");
        options_.lifetimeFds = {lifetime_[0]};
        options_.relayBuffer = relayBuffer;
        options_.maxConnections = static_cast<std::size_t>(parallel) + 16;
        proxy_ = std::thread([this] { dsh::proxy::run_proxy(options_); });
        floorListener_ = listen_on(AF_INET);
        floor_ = std::thread([this, relayBuffer] { relay_floor(floorListener_, origin_, relayBuffer); });
    }
    Relays(const Relays&) = delete;
    Relays& operator=(const Relays&) = delete;
    ~Relays() {
        ::close(lifetime_[1]);
        proxy_.join();
        ::shutdown(floorListener_, SHUT_RDWR);
        floor_.join();
        ::close(floorListener_);
        ::close(lifetime_[0]);
        ::close(options_.listenFds[0]);
    }

    Setup setup() const { return {origin_, proxyPort_, port_of(floorListener_)}; }

private:
    const Endpoint origin_;
    dsh::proxy::ProxyOptions options_;
    std::uint16_t proxyPort_ = 0;
    int lifetime_[2] = {-1, -1};
    int floorListener_ = -1;
    std::thread proxy_;
    std::thread floor_;
};

struct Downloads {
    std::vector<double> rate[kRoutes];  // bytes per second, one per run
    std::vector<double> cpu[kRoutes];   // CPU seconds per GiB, one per run
};

// One large download by each route, `runs` times; the routes alternate, so a slower moment of
// the host falls on all of them.
Downloads time_downloads(const Setup& setup, std::uint64_t bytes, int runs) {
    Downloads downloads;
    for (int run = 0; run < runs; ++run) {
        for (const Route route : kAllRoutes) {
            const auto start = Clock::now();
            const double cpu_start = cpu_seconds();
            const std::uint64_t got = download(route, setup, bytes);
            const double elapsed = seconds_since(start);
            downloads.cpu[static_cast<int>(route)].push_back((cpu_seconds() - cpu_start) /
                                                            (static_cast<double>(got) / (1 << 30)));
            if (got != bytes) std::fprintf(stderr, "proxy_bench: %s download got %llu bytes\n", name(route),
                                            static_cast<unsigned long long>(got));
            downloads.rate[static_cast<int>(route)].push_back(static_cast<double>(got) / elapsed);
        }
    }
    return downloads;
}

// The medians, one row per route, each led by `label`; GB/s with `decimals` places.
void print_downloads(const char* label, const Downloads& downloads, std::uint64_t bytes, int decimals) {
    const double direct_rate = median(downloads.rate[0]);
    const double floor_rate = median(downloads.rate[1]);
    for (const Route route : kAllRoutes) {
        const double r = median(downloads.rate[static_cast<int>(route)]);
        std::printf("%s %-13s %6.0f MiB  %6.*f GB/s  %.2fx direct  %.2fx floor  CPU %.2f s/GiB\n", label, name(route),
                    static_cast<double>(bytes) / (1 << 20), decimals, r / 1e9, r / direct_rate, r / floor_rate,
                    median(downloads.cpu[static_cast<int>(route)]));
    }
    std::fflush(stdout);
}

// ---- The shaped link (--link) ----

constexpr const char* kBenchAddress = "10.55.0.1";
constexpr const char* kOriginAddress = "10.55.0.2";
constexpr const char* kBenchDevice = "dsh-bench";
constexpr const char* kOriginDevice = "dsh-origin";

struct Link {
    int benchNs = -1;   // where this process, the client, the proxy and the floor are
    int originNs = -1;  // where the origin listens, across the veth pair
};

std::string error_text(const std::string& what, int error) { return what + ": " + std::strerror(error); }

bool write_file(const char* path, const std::string& text) {
    const int fd = ::open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return false;
    const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    ::close(fd);
    return ok;
}

// Moves this process, still single-threaded (a user namespace needs it), into a network
// namespace of its own, and makes the origin's; nullopt, with the reason, where this host
// does not let it.
std::optional<Link> make_namespaces(std::string& why) {
    if (::unshare(CLONE_NEWNET) != 0) {
        const int direct = errno;
        const uid_t uid = ::geteuid();
        const gid_t gid = ::getegid();
        if (::unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0) {
            why = error_text("no network namespace: unshare(CLONE_NEWNET)", direct) + "; " +
                  error_text("with a user namespace", errno);
            return std::nullopt;
        }
        if (!write_file("/proc/self/setgroups", "deny") ||
            !write_file("/proc/self/uid_map", "0 " + std::to_string(uid) + " 1") ||
            !write_file("/proc/self/gid_map", "0 " + std::to_string(gid) + " 1")) {
            why = error_text("cannot map this user into its user namespace", errno);
            return std::nullopt;
        }
    }
    Link link;
    link.benchNs = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    if (link.benchNs < 0 || ::unshare(CLONE_NEWNET) != 0) {
        why = error_text("cannot make the origin's network namespace", errno);
        return std::nullopt;
    }
    link.originNs = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    if (link.originNs < 0 || ::setns(link.benchNs, CLONE_NEWNET) != 0) {
        why = error_text("cannot return to the bench's network namespace", errno);
        return std::nullopt;
    }
    return link;
}

// Runs ip or tc in the network namespace `ns`, with `passFd` as its descriptor 3 when given
// (ip names a namespace by /proc/self/fd/3). Called only while this process has no other
// thread, so the child may do anything before it execs. "" when it exits 0, else the command
// and the first line it printed.
std::string run_tool(int ns, const std::vector<std::string>& argv, int passFd = -1) {
    std::string command;
    for (const auto& word : argv) command += (command.empty() ? "" : " ") + word;
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0) return error_text(command, errno);
    std::vector<char*> args;
    for (const auto& word : argv) args.push_back(const_cast<char*>(word.c_str()));
    args.push_back(nullptr);
    // ip and tc live in /usr/sbin, which an unprivileged user's PATH may lack.
    const std::string fallbacks[] = {"/usr/sbin/" + argv[0], "/sbin/" + argv[0]};
    const pid_t pid = ::fork();
    if (pid < 0) return error_text(command + ": fork", errno);
    if (pid == 0) {
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // a bench killed in set-up leaves no tool behind
        if (::setns(ns, CLONE_NEWNET) != 0) ::_exit(126);
        if (passFd >= 0 && (passFd == 3 ? ::fcntl(3, F_SETFD, 0) : ::dup2(passFd, 3)) < 0) ::_exit(126);
        ::dup2(out[1], 1);
        ::dup2(out[1], 2);
        ::execvp(args[0], args.data());
        for (const auto& path : fallbacks) ::execv(path.c_str(), args.data());
        ::_exit(127);
    }
    ::close(out[1]);
    std::string output;
    char chunk[4096];
    for (ssize_t n; (n = ::read(out[0], chunk, sizeof chunk)) != 0;) {
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) break;
        output.append(chunk, static_cast<std::size_t>(n));
    }
    ::close(out[0]);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return {};
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127) return argv[0] + " (iproute2) not found";
    output = output.substr(0, output.find('\n'));
    return command + (output.empty() ? ": failed" : ": " + output);
}

// The veth pair between the two namespaces, addressed and up; "" or what failed.
std::string join_namespaces(const Link& link) {
    std::string why;
    const std::string bench = kBenchDevice;
    const std::string origin = kOriginDevice;
    for (const auto& step : std::vector<std::vector<std::string>>{
             {"ip", "link", "set", "lo", "up"},
             {"ip", "link", "add", bench, "type", "veth", "peer", "name", origin, "netns", "/proc/self/fd/3"},
             {"ip", "address", "add", std::string(kBenchAddress) + "/24", "dev", bench},
             {"ip", "link", "set", bench, "up"}}) {
        if (!(why = run_tool(link.benchNs, step, link.originNs)).empty()) return why;
    }
    for (const auto& step : std::vector<std::vector<std::string>>{
             {"ip", "address", "add", std::string(kOriginAddress) + "/24", "dev", origin},
             {"ip", "link", "set", origin, "up"}}) {
        if (!(why = run_tool(link.originNs, step)).empty()) return why;
    }
    return {};
}

// A rate in tc's syntax (a number, then bit, kbit, mbit, gbit or tbit, powers of 1000) in bits
// per second; nullopt for anything else.
std::optional<double> bits_per_second(const std::string& rate) {
    char* end = nullptr;
    const double value = std::strtod(rate.c_str(), &end);
    if (end == rate.c_str() || !(value > 0)) return std::nullopt;
    const std::string unit = end;
    const std::pair<const char*, double> units[] = {{"bit", 1}, {"kbit", 1e3}, {"mbit", 1e6}, {"gbit", 1e9}, {"tbit", 1e12}};
    for (const auto& [word, scale] : units)
        if (unit == word) return value * scale;
    return std::nullopt;
}

// Shapes both ends of the veth pair to `rate` (nullopt: takes the shaping off); "" or what
// failed. The bucket holds 1 ms at the rate and never less than 256 KiB, so a segmentation
// offload's 64 KiB packet passes whole; the queue holds 20 ms more.
std::string shape(const Link& link, std::optional<double> bits, bool shaped) {
    const std::pair<int, const char*> ends[] = {{link.benchNs, kBenchDevice}, {link.originNs, kOriginDevice}};
    for (const auto& [ns, device] : ends) {
        std::string why;
        if (!bits) {
            if (shaped) why = run_tool(ns, {"tc", "qdisc", "delete", "dev", device, "root"});
        } else {
            const auto burst = std::max<std::uint64_t>(static_cast<std::uint64_t>(*bits / 8 / 1000), 256 * 1024);
            why = run_tool(ns, {"tc", "qdisc", "replace", "dev", device, "root", "tbf", "rate",
                                std::to_string(static_cast<std::uint64_t>(*bits)) + "bit", "burst",
                                std::to_string(burst), "latency", "20ms"});
        }
        if (!why.empty()) return why;
    }
    return {};
}

// A listening socket on the origin's address, made in the origin's namespace.
int listen_across(const Link& link) {
    if (::setns(link.originNs, CLONE_NEWNET) != 0) fail("setns to the origin's namespace");
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    ::inet_pton(AF_INET, kOriginAddress, &address.sin_addr);
    const bool ok = fd >= 0 && ::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0 &&
                    ::listen(fd, 512) == 0;
    const int error = errno;
    if (::setns(link.benchNs, CLONE_NEWNET) != 0) fail("setns back to the bench's namespace");
    if (!ok) {
        errno = error;
        fail("listen on the origin's address");
    }
    return fd;
}

std::vector<std::string> split(const std::string& text, char separator) {
    std::vector<std::string> words;
    std::size_t start = 0;
    for (;;) {
        const std::size_t end = text.find(separator, start);
        words.push_back(text.substr(start, end - start));
        if (end == std::string::npos) return words;
        start = end + 1;
    }
}

int link_mode(const std::vector<std::string>& rates, std::optional<std::uint64_t> bytes, int runs,
              std::size_t relay_buffer) {
    std::string why;
    const std::optional<Link> link = make_namespaces(why);
    if (link) why = join_namespaces(*link);
    if (!why.empty()) {
        std::printf("proxy_bench: shaped link: skipped: %s\n", why.c_str());
        return 0;
    }
    std::printf("(CPU: of this whole process, origin and client included, per GiB moved)\n");
    bool shaped = false;
    for (const auto& rate : rates) {
        const std::optional<double> bits = rate == "unshaped" ? std::nullopt : bits_per_second(rate);
        if (rate != "unshaped" && !bits) {
            std::printf("proxy_bench: link %s: skipped: not a rate (tc's syntax: 1gbit, 500mbit; or unshaped)\n",
                        rate.c_str());
            continue;
        }
        // Every thread of the rate before has ended: tc runs from a single-threaded process.
        if (!(why = shape(*link, bits, shaped)).empty()) {
            std::printf("proxy_bench: link %s: skipped: %s\n", rate.c_str(), why.c_str());
            continue;
        }
        shaped = bits.has_value();
        std::uint64_t size = bytes.value_or(1ull << 30);
        if (!bytes && bits) size = std::min<std::uint64_t>(size, static_cast<std::uint64_t>(*bits / 8 * 4) >> 20 << 20);
        size = std::max<std::uint64_t>(size, 1);
        std::printf("proxy_bench: link %s: the origin across a veth pair (%s), client and proxy on "
                    "loopback, %d run(s) of each (median), relay buffer %zu bytes, %u cores\n",
                    rate.c_str(), bits ? "tbf on both ends" : "no shaping", runs, relay_buffer,
                    std::thread::hardware_concurrency());
        if (bits && size < (1ull << 30) && !bytes)
            std::printf("(%.0f MiB a download: 1 GiB would take %.1f s a run at this rate)\n",
                        static_cast<double>(size) / (1 << 20), static_cast<double>(1ull << 30) * 8 / *bits);
        std::fflush(stdout);
        const int listener = listen_across(*link);
        const Endpoint endpoint = endpoint_of(listener);
        Origin origin(Origin::Listening{listener}, serve_http);
        const Relays relays(endpoint, kOriginAddress, relay_buffer, 1);
        // A small download by each route first, so no timed one waits for the neighbour's
        // address to be resolved across the link.
        for (const Route route : kAllRoutes) download(route, relays.setup(), 1 << 20);
        const Downloads downloads = time_downloads(relays.setup(), size, runs);
        char label[64];
        std::snprintf(label, sizeof label, "link %-8s download", rate.c_str());
        print_downloads(label, downloads, size, 3);
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    std::optional<std::uint64_t> bytes;
    int runs = 3;
    int setups = 1000;
    int parallel = 64;
    std::size_t relay_buffer = dsh::proxy::ProxyOptions{}.relayBuffer;
    std::vector<std::string> links;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string option = argv[i];
        if (option == "--bytes") bytes = number(argv[i + 1]);
        else if (option == "--runs") runs = static_cast<int>(number(argv[i + 1]));
        else if (option == "--setups") setups = static_cast<int>(number(argv[i + 1]));
        else if (option == "--parallel") parallel = static_cast<int>(number(argv[i + 1]));
        else if (option == "--relay-buffer") relay_buffer = number(argv[i + 1]);
        else if (option == "--link") links = split(argv[i + 1], ',');
        else {
            std::fprintf(stderr,
                         "usage: proxy_bench [--bytes N] [--runs N] [--setups N] [--parallel N] [--relay-buffer N]\n"
                         "       proxy_bench --link RATE[,RATE...] [--bytes N] [--runs N] [--relay-buffer N]\n");
            return 2;
        }
    }
    if (runs < 1 || setups < 1 || parallel < 1 || bytes == 0u) return 2;
    if (!links.empty()) return link_mode(links, bytes, runs, relay_buffer);
    const std::uint64_t size = bytes.value_or(1ull << 30);

    const int origin_listener = listen_on(AF_INET);
    const Endpoint endpoint = endpoint_of(origin_listener);
    Origin origin(Origin::Listening{origin_listener}, serve_http);
    const Relays relays(endpoint, "127.0.0.1", relay_buffer, parallel);
    const Setup setup = relays.setup();

    std::printf("proxy_bench: loopback, %d run(s) of each (median), relay buffer %zu bytes, %u cores\n", runs,
                relay_buffer, std::thread::hardware_concurrency());
    std::printf("(CPU: of this whole process, origin and client included, per GiB moved)\n");

    // One large download.
    print_downloads("download", time_downloads(setup, size, runs), size, 2);

    // Set-up: a new connection, a small request, its answer, the close.
    std::vector<double> latency[kRoutes];
    for (int i = 0; i < setups; ++i) {
        for (const Route route : kAllRoutes) {
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
    for (const Route route : kAllRoutes) {
        const auto& l = latency[static_cast<int>(route)];
        std::printf("setup    %-13s median %7.1f us  p90 %7.1f us  %+7.1f us against direct (%d connections)\n",
                    name(route), median(l), percentile(l, 0.9), median(l) - direct_setup, setups);
    }

    // Many downloads at once, sharing `size` between them; the routes alternate as above.
    const std::uint64_t each = std::max<std::uint64_t>(size / static_cast<std::uint64_t>(parallel), 1);
    std::vector<double> aggregate[kRoutes];
    for (int run = 0; run < runs; ++run) {
        for (const Route route : kAllRoutes) {
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
    for (const Route route : kAllRoutes) {
        const double r = median(aggregate[static_cast<int>(route)]);
        std::printf("parallel %-13s %d x %.1f MiB  %6.2f GB/s  %.2fx direct  %.2fx floor\n", name(route), parallel,
                    static_cast<double>(each) / (1 << 20), r / 1e9, r / direct_parallel, r / floor_parallel);
    }
    return 0;
}
