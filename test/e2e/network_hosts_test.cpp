// The `hosts` network end to end: a real command under each Linux backend, as root and as nobody,
// reaching host-side servers the test runs on loopback through dsh-confine's proxy, on the exec
// path, under `run`, through a printed plan run by sh and with a session. Every verdict comes
// from the host's side: a server that counts the connections it accepts (an allowed host's
// count goes up; a refused host's, and a bypassed one's, stays at zero), a UDP socket that must
// receive nothing, the proxy's process and listener that must be gone when the call has ended,
// and the file system. The controls (the network allowed) show each check can fail. Bad input
// is refused with one line and 125 before anything runs.
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <arpa/inet.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness.hpp"

namespace {

namespace fs = std::filesystem;
using e2e::first_line;
using e2e::read_file;
using nlohmann::json;

class Fd {
public:
    explicit Fd(int fd = -1) : fd_(fd) {}
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    ~Fd() {
        if (fd_ >= 0) close(fd_);
    }
    int get() const { return fd_; }

private:
    int fd_;
};

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A TCP socket bound to the loopback address of `family` on a port the kernel picks.
int loopback_socket(int family, int type, std::uint16_t& port) {
    const int fd = socket(family, type | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    sockaddr_storage address{};
    socklen_t size = 0;
    if (family == AF_INET6) {
        auto* six = reinterpret_cast<sockaddr_in6*>(&address);
        six->sin6_family = AF_INET6;
        six->sin6_addr = in6addr_loopback;
        size = sizeof *six;
    } else {
        auto* four = reinterpret_cast<sockaddr_in*>(&address);
        four->sin_family = AF_INET;
        four->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        size = sizeof *four;
    }
    if (bind(fd, reinterpret_cast<sockaddr*>(&address), size) != 0 || (type == SOCK_STREAM && listen(fd, 64) != 0)) {
        close(fd);
        return -1;
    }
    size = sizeof address;
    getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size);
    port = ntohs(family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&address)->sin6_port
                                    : reinterpret_cast<sockaddr_in*>(&address)->sin_port);
    return fd;
}

// A host-side HTTP server on loopback: it accepts every connection, counts it, reads a request
// head and answers 200 with a short body, then closes. It is also the target of a CONNECT
// tunnel and of a SOCKS connection, which carry the same request.
class CountingServer {
public:
    explicit CountingServer(int family = AF_INET) {
        listener_ = loopback_socket(family, SOCK_STREAM, port_);
        if (listener_ < 0 || pipe2(stop_, O_CLOEXEC) != 0) throw std::runtime_error("cannot start the host-side server");
        thread_ = std::thread([this] { serve(); });
    }
    ~CountingServer() {
        [[maybe_unused]] const ssize_t n = write(stop_[1], "x", 1);
        thread_.join();
        for (int fd : {listener_, stop_[0], stop_[1]}) close(fd);
    }
    CountingServer(const CountingServer&) = delete;
    CountingServer& operator=(const CountingServer&) = delete;

    std::uint16_t port() const { return port_; }
    int accepted() const { return accepted_.load(); }
    // The count once it has reached `n` (a connection the client closed unanswered is accepted
    // by this server's thread at its own pace), or after 10 s, as a hang guard.
    int accepted_reaching(int n) const {
        for (int tries = 0; accepted_.load() < n && tries < 1000; ++tries)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        return accepted_.load();
    }
    std::string requests() const {
        std::lock_guard lock(mutex_);
        return requests_;
    }

private:
    void serve() {
        for (;;) {
            pollfd fds[2] = {{listener_, POLLIN, 0}, {stop_[0], POLLIN, 0}};
            if (poll(fds, 2, -1) < 0) continue;
            if (fds[1].revents) return;
            const int client = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
            if (client < 0) continue;
            ++accepted_;
            answer(client);
            close(client);
        }
    }
    void answer(int client) {
        // A client that sends nothing (a bare TCP connect) is given a few seconds, then closed.
        timeval wait{5, 0};
        setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait);
        std::string head;
        char buffer[4096];
        while (head.find("\r\n\r\n") == std::string::npos && head.size() < 65536) {
            const ssize_t n = read(client, buffer, sizeof buffer);
            if (n <= 0) return;
            head.append(buffer, static_cast<std::size_t>(n));
        }
        {
            std::lock_guard lock(mutex_);
            requests_ += head.substr(0, head.find("\r\n")) + "\n";
        }
        const std::string body = "dsh-e2e-served\n";
        const std::string response = "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) +
                                     "\r\nConnection: close\r\n\r\n" + body;
        [[maybe_unused]] const ssize_t n = write(client, response.data(), response.size());
    }

    int listener_ = -1;
    std::uint16_t port_ = 0;
    int stop_[2] = {-1, -1};
    std::atomic<int> accepted_{0};
    mutable std::mutex mutex_;
    std::string requests_;
    std::thread thread_;
};

// What a client inside does, as a JSON list of steps, each [label, operation, arguments...]; it
// prints "label result" per step and exits with the status given. The proxy is the one the
// environment names (HTTP_PROXY). Operations:
//   http URL [HOST]        an absolute-URI GET through the proxy (HOST: another Host field): the status
//   connect AUTHORITY      CONNECT through the proxy: its status, then, on 200, the status of a GET
//                          through the tunnel
//   socks KIND HOST PORT   SOCKS5 CONNECT (KIND name, ipv4 or ipv6): the reply code, then, on 0, the
//                          status of a GET through it
//   direct HOST PORT       a TCP connection straight to HOST, bypassing the proxy: ok, or the errno
//   udp HOST PORT          a datagram straight to HOST: ok, or the errno
//   dns NAME               getaddrinfo: ok, or the error
const char* kClient = R"(
import errno, json, os, socket, sys, urllib.parse
spec = json.loads(sys.argv[1])
proxy = urllib.parse.urlsplit(os.environ.get("HTTP_PROXY", "http://127.0.0.1:1"))
def name(e):
    return errno.errorcode.get(e.errno, str(e.errno)) if isinstance(e, OSError) and e.errno else type(e).__name__
def exact(s, n):
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            raise EOFError()
        data += chunk
    return data
def head(s):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(1)
        if not chunk:
            break
        data += chunk
    return data
def rest(s):
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            return data
        data += chunk
def status(data):
    parts = data.split(b" ", 2)
    return parts[1].decode() if len(parts) > 1 else "none"
def to_proxy():
    return socket.create_connection((proxy.hostname, proxy.port), timeout=30)
def get(s, host):
    s.sendall(("GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % host).encode())
    return status(rest(s))
def http(url, host=None):
    s = to_proxy()
    s.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (url, host or urllib.parse.urlsplit(url).netloc)).encode())
    return status(rest(s))
def connect(authority):
    s = to_proxy()
    s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (authority, authority)).encode())
    code = status(head(s))
    return code if code != "200" else code + " " + get(s, authority)
def socks(kind, host, port):
    s = to_proxy()
    s.sendall(b"\x05\x01\x00")
    if exact(s, 2) != b"\x05\x00":
        return "no-method"
    if kind == "name":
        address = b"\x03" + bytes([len(host)]) + host.encode()
    else:
        family = socket.AF_INET if kind == "ipv4" else socket.AF_INET6
        address = (b"\x01" if kind == "ipv4" else b"\x04") + socket.inet_pton(family, host)
    s.sendall(b"\x05\x01\x00" + address + int(port).to_bytes(2, "big"))
    reply = exact(s, 4)
    if reply[1] != 0:
        return str(reply[1])
    exact(s, (exact(s, 1)[0] if reply[3] == 3 else {1: 4, 4: 16}[reply[3]]) + 2)
    return "0 " + get(s, host)
def direct(host, port):
    socket.create_connection((host, int(port)), timeout=10).close()
    return "ok"
def udp(host, port):
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    socket.socket(family, socket.SOCK_DGRAM).sendto(b"dsh-e2e", (host, int(port)))
    return "ok"
def dns(host):
    socket.getaddrinfo(host, 80)
    return "ok"
for label, operation, *arguments in spec["steps"]:
    try:
        result = globals()[operation](*arguments)
    except Exception as e:
        result = "error " + name(e)
    print(label, result, flush=True)
sys.exit(spec.get("exit", 0))
)";

using Param = e2e::BackendCaller;  // backend, caller, the form of the call

std::string canonical(const std::string& path) {
    std::error_code ec;
    const fs::path resolved = fs::canonical(path, ec);
    return ec ? path : resolved.string();
}

// The proxy's processes of this test's calls: dsh-confine's own image, in a session of its own
// (the proxy calls setsid; of dsh-confine's others only the program a test runs leads one, and
// that one is the test's child), with this test's HOME. With
// `in_own_session` false, every process of dsh-confine's image with this HOME.
std::vector<pid_t> proxy_processes(const std::string& home, bool in_own_session = true) {
    std::vector<pid_t> out;
    const std::string self = canonical(e2e::binary());
    // Without exceptions: a test that looks while a thread of its own runs the call must not throw.
    std::error_code listing;
    for (fs::directory_iterator it("/proc", listing), end; !listing && it != end; it.increment(listing)) {
        const fs::directory_entry& entry = *it;
        const std::string name = entry.path().filename();
        if (name.find_first_not_of("0123456789") != std::string::npos) continue;
        std::error_code ec;
        if (fs::read_symlink(entry.path() / "exe", ec).string() != self || ec) continue;
        const std::string stat = read_file(entry.path() / "stat");
        const std::size_t close = stat.rfind(')');
        if (close == std::string::npos) continue;
        std::istringstream fields(stat.substr(close + 2));
        std::string state, parent, group, session;
        fields >> state >> parent >> group >> session;
        if (in_own_session && session != name) continue;
        // The program a test runs leads a session of its own too (e2e::run_program), `run` included.
        if (parent == std::to_string(getpid())) continue;
        const std::string environment = read_file(entry.path() / "environ");
        if (!contains(environment, std::string("HOME=") + home + '\0')) continue;
        out.push_back(std::stoi(name));
    }
    return out;
}

// The proxy's process once it is one: the command may say it is ready before the proxy has made
// its own session (on the exec path the proxy makes it only once the caller has executed the
// command), so this looks again until one is found or, as a hang guard, 10 s pass.
std::vector<pid_t> awaited_proxy_processes(const std::string& home) {
    std::vector<pid_t> found = proxy_processes(home);
    for (int tries = 0; found.empty() && tries < 1000; ++tries) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        found = proxy_processes(home);
    }
    return found;
}

// Whether process `pid` blocks no signal right now (its status's SigBlk).
bool blocks_nothing(pid_t pid) {
    const std::string status = read_file("/proc/" + std::to_string(pid) + "/status");
    return contains(status, "\nSigBlk:\t0000000000000000\n");
}

// Waits until process `pid` has ended, as a hang guard only: true once it is gone.
bool ends(pid_t pid) {
    const int fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
    if (fd < 0) return errno == ESRCH;
    pollfd ready{fd, POLLIN, 0};
    const bool gone = poll(&ready, 1, 60000) == 1;
    close(fd);
    return gone;
}

// Whether anything on the host accepts a TCP connection at 127.0.0.1:`port`.
bool host_listens(std::uint16_t port) {
    Fd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(port);
    return connect(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
}

// Waits until a command writes to the FIFO `fd` (opened O_RDWR | O_NONBLOCK, so opening never
// blocks): a hang guard, not a measurement.
bool said_ready(int fd) {
    pollfd ready{fd, POLLIN, 0};
    return poll(&ready, 1, 60000) == 1;
}

// The port of the proxy a command was pointed at: its HTTP_PROXY, printed as "proxy URL".
std::uint16_t proxy_port(const std::string& out) {
    const std::size_t at = out.find("proxy http://127.0.0.1:");
    return at == std::string::npos ? 0 : static_cast<std::uint16_t>(std::stoi(out.substr(at + 23)));
}

class NetworkHosts : public ::testing::TestWithParam<Param> {
protected:
    std::string backend = std::get<0>(GetParam());
    bool asRoot = std::get<1>(GetParam()) == "root";
    std::string form = std::get<2>(GetParam());
    std::optional<unsigned> uid = asRoot ? std::nullopt : std::optional<unsigned>(e2e::kNobody);
    e2e::TempDir home{"/var/tmp", uid};
    e2e::TempDir base{"/var/tmp", uid};
    std::string ws = base / "ws";

    void SetUp() override {
        E2E_REQUIRE(getuid() == 0, "the hosts network's tests run as root, and as nobody through setpriv");
        E2E_REQUIRE(e2e::exists("/usr/bin/python3"), "no /usr/bin/python3 for the client inside");
        mkdir(ws.c_str(), 0755);
        own(ws);
        const e2e::Result plan = dsh({"--print", "--backend", backend, "--allow-host", "example.org", "--", "true"});
        E2E_REQUIRE(plan.status == 0, backend + " cannot confine in the hosts network here: " + first_line(plan.err));
    }

    void own(const std::string& path) const {
        if (uid) {
            ASSERT_EQ(lchown(path.c_str(), *uid, *uid), 0) << path;
        }
    }

    e2e::RunOptions options() const {
        e2e::RunOptions o;
        o.env = e2e::isolated_env(home.path());
        o.uid = uid;
        o.cwd = ws;
        o.timeoutMs = 120000;
        return o;
    }
    e2e::Result dsh(const std::vector<std::string>& args) const { return e2e::run(args, options()); }

    // The argv a caller runs for `command` in this test's form, with `hosts` allowed (a session's
    // are logged as its event first). Under `run`, the report goes to `report`.
    std::vector<std::string> call(const std::vector<std::string>& hosts, const std::vector<std::string>& command,
                                  const std::string& report = "") const {
        std::vector<std::string> args = {e2e::binary()};
        if (form == "session") {
            if (!e2e::exists(home / "state/dsh-confine/sessions/s")) {
                EXPECT_EQ(dsh({"session", "start", "s", "--cwd", ws}).status, 0);
                EXPECT_EQ(dsh({"session", "mode", "s", "workspace-write"}).status, 0);
            }
            std::vector<std::string> event = {"session", "network", "s", "hosts"};
            event.insert(event.end(), hosts.begin(), hosts.end());
            const e2e::Result logged = dsh(event);
            EXPECT_EQ(logged.status, 0) << logged.err;
            args.insert(args.end(), {"--session", "s", "--backend", backend});
        } else {
            args.insert(args.end(), {"--backend", backend, "--mode", "workspace-write", "--workspace-root", ws});
            for (const auto& host : hosts) args.insert(args.end(), {"--allow-host", host});
        }
        if (form == "run") {
            args.insert(args.begin() + 1, "run");
            if (!report.empty()) args.insert(args.begin() + 2, {"--report", report});
        }
        if (form == "print") args.insert(args.begin() + 1, {"--print", "--format", "shell"});
        args.push_back("--");
        args.insert(args.end(), command.begin(), command.end());
        if (form != "print") return args;
        const e2e::Result printed = e2e::run_program(args, options());
        EXPECT_EQ(printed.status, 0) << printed.err;
        return {"/bin/sh", "-c", printed.out};
    }
    e2e::Result confined(const std::vector<std::string>& hosts, const json& steps, const std::string& report = "") const {
        return e2e::run_program(call(hosts, client(steps), report), options());
    }
    static std::vector<std::string> client(const json& spec) { return {"/usr/bin/python3", "-c", kClient, spec.dump()}; }
};

// What each step printed, by label.
std::string step(const std::string& out, const std::string& label) {
    std::istringstream lines(out);
    for (std::string line; std::getline(lines, line);)
        if (line.rfind(label + " ", 0) == 0) return line.substr(label.size() + 1);
    return "(no output)";
}

// --- an allowed host reached, a refused one never contacted, in every form ---------------------

class AllowedAndRefused : public NetworkHosts {};

TEST_P(AllowedAndRefused, TheAllowedHostIsReachedAndTheRefusedOneNeverContacted) {
    CountingServer allowed, refused;
    const std::string a = "127.0.0.1:" + std::to_string(allowed.port());
    const std::string r = "127.0.0.1:" + std::to_string(refused.port());
    const json spec = {{"steps",
                        {{"http-allowed", "http", "http://" + a + "/"},
                         {"connect-allowed", "connect", a},
                         {"socks-allowed", "socks", "ipv4", "127.0.0.1", allowed.port()},
                         {"http-refused", "http", "http://" + r + "/"},
                         {"connect-refused", "connect", r},
                         {"socks-refused", "socks", "ipv4", "127.0.0.1", refused.port()}}},
                       {"exit", 3}};
    const std::string report = base / "report.json";
    const e2e::Result result = confined({a}, spec, report);
    EXPECT_EQ(result.status, 3) << result.err;
    EXPECT_EQ(step(result.out, "http-allowed"), "200") << result.out << result.err;
    EXPECT_EQ(step(result.out, "connect-allowed"), "200 200") << result.out << result.err;
    EXPECT_EQ(step(result.out, "socks-allowed"), "0 200") << result.out << result.err;
    EXPECT_EQ(step(result.out, "http-refused"), "403") << result.out;
    EXPECT_EQ(step(result.out, "connect-refused"), "403") << result.out;
    EXPECT_EQ(step(result.out, "socks-refused"), "2") << result.out;  // connection not allowed by ruleset
    // From the host's side: three connections to the allowed server, none to the refused one.
    EXPECT_EQ(allowed.accepted(), 3) << allowed.requests();
    EXPECT_EQ(refused.accepted(), 0) << refused.requests();
    // One line per refusal on the call's stderr.
    const std::string line = "dsh-confine: network: refused " + r + ", not in allow_hosts";
    std::size_t lines = 0;
    for (std::size_t at = result.err.find(line); at != std::string::npos; at = result.err.find(line, at + 1)) ++lines;
    EXPECT_EQ(lines, 3U) << result.err;
    EXPECT_FALSE(contains(result.err, "refused " + a)) << result.err;
    if (form == "run") {
        const json parsed = json::parse(read_file(report));
        EXPECT_EQ(parsed["refusedHosts"], json::parse(R"([{"host":")" + r + R"(","count":3}])")) << parsed.dump();
        EXPECT_EQ(parsed["verdict"]["verdict"], "denial") << parsed.dump();
        EXPECT_EQ(parsed["verdict"]["host"], r) << parsed.dump();
        EXPECT_EQ(parsed["policy"]["network"], json::parse(R"({"mode":"hosts","allow":[")" + a + R"("]})")) << parsed.dump();
    }
    if (form == "session") {
        const json shown = json::parse(dsh({"session", "show", "s"}).out);
        EXPECT_EQ(shown["network"], json::parse(R"({"mode":"hosts","allow":[")" + a + R"("]})")) << shown.dump();
        EXPECT_EQ(shown["events"].back()["allow"], json::array({a})) << shown.dump();
    }
}

INSTANTIATE_TEST_SUITE_P(Linux, AllowedAndRefused, ::testing::ValuesIn(e2e::backends_and_callers({"exec", "run", "print", "session"})),
                         e2e::backend_caller_name);

// --- run's report: neither forged nor silently cut short ---------------------------------------

class RunReport : public NetworkHosts {};

TEST_P(RunReport, ARefusalLineTheCommandPrintsItselfIsNoDenial) {
    // The proxy refused nothing: the line is the command's own, and names a host of its choosing.
    const std::string report = base / "report.json";
    const e2e::Result result = e2e::run_program(
        call({"example.org"},
             {"/bin/sh", "-c", "echo 'dsh-confine: network: refused evil.test:443, not in allow_hosts' >&2; exit 1"}, report),
        options());
    EXPECT_EQ(result.status, 1) << result.err;
    const json parsed = json::parse(read_file(report));
    EXPECT_EQ(parsed["verdict"]["verdict"], "failure") << parsed.dump();
    EXPECT_TRUE(parsed["verdict"]["host"].is_null()) << parsed.dump();
    EXPECT_EQ(parsed["refusedHosts"], json::array()) << parsed.dump();
    EXPECT_EQ(parsed["refusedHostsUnlisted"], 0) << parsed.dump();
}

TEST_P(RunReport, AListFloodedWithDecoysSaysItIsIncomplete) {
    // 256 decoys fill the list; the host refused after them is counted as unlisted, not lost.
    json steps = json::array();
    for (int i = 0; i < 256; ++i) steps.push_back({"decoy", "http", "http://h" + std::to_string(i) + ".invalid/"});
    steps.push_back({"last", "http", "http://evil.invalid/"});
    const std::string report = base / "report.json";
    const e2e::Result result = confined({"example.org"}, {{"steps", steps}, {"exit", 1}}, report);
    EXPECT_EQ(result.status, 1) << result.err;
    EXPECT_EQ(step(result.out, "last"), "403") << result.out;
    EXPECT_TRUE(contains(result.err, "refused evil.invalid:80")) << result.err;
    const json parsed = json::parse(read_file(report));
    ASSERT_EQ(parsed["refusedHosts"].size(), 256U) << parsed.dump();
    EXPECT_EQ(parsed["refusedHosts"][0], json::parse(R"({"host":"h0.invalid:80","count":1})")) << parsed.dump();
    EXPECT_EQ(parsed["refusedHostsUnlisted"], 1) << parsed.dump();
    EXPECT_EQ(parsed["verdict"]["verdict"], "denial") << parsed.dump();
}

INSTANTIATE_TEST_SUITE_P(Linux, RunReport, ::testing::ValuesIn(e2e::backends_and_callers({"run"})), e2e::backend_caller_name);

// --- every way around the proxy, refused; the control gets through ----------------------------

class Bypass : public NetworkHosts {};

TEST_P(Bypass, DirectTcpUdpAndDnsAreRefusedWhereTheAllowedNetworkLetsThemThrough) {
    CountingServer server;
    std::uint16_t udp_port = 0;
    Fd udp(loopback_socket(AF_INET, SOCK_DGRAM, udp_port));
    ASSERT_GE(udp.get(), 0);
    const std::string port = std::to_string(server.port());
    const json spec = {{"steps",
                        {{"direct", "direct", "127.0.0.1", port},
                         {"udp", "udp", "127.0.0.1", std::to_string(udp_port)},
                         {"dns", "dns", "dsh-e2e-unresolvable.example"}}}};
    // Allowed by name, so only the bypass itself stands between the command and the server.
    const e2e::Result result = confined({"127.0.0.1:" + port}, spec);
    ASSERT_EQ(result.status, 0) << result.err;
    EXPECT_NE(step(result.out, "direct"), "ok") << result.out;
    EXPECT_NE(step(result.out, "udp"), "ok") << result.out;
    EXPECT_NE(step(result.out, "dns"), "ok") << result.out;
    char byte = 0;
    EXPECT_LT(recv(udp.get(), &byte, 1, MSG_DONTWAIT), 0) << "a datagram reached the host's socket";
    EXPECT_EQ(server.accepted(), 0) << "a direct connection reached the host's server: " << server.requests();

    // The control: with the network allowed, the same direct connection and datagram arrive.
    std::vector<std::string> args = {"--backend", backend, "--mode", "workspace-write", "--workspace-root", ws,
                                     "--network", "allow", "--"};
    const std::vector<std::string> command = client(spec);
    args.insert(args.end(), command.begin(), command.end());
    const e2e::Result control = dsh(args);
    ASSERT_EQ(control.status, 0) << control.err;
    EXPECT_EQ(step(control.out, "direct"), "ok") << control.out;
    EXPECT_EQ(step(control.out, "udp"), "ok") << control.out;
    EXPECT_GE(recv(udp.get(), &byte, 1, MSG_DONTWAIT), 0) << "the control's datagram did not arrive";
    EXPECT_EQ(server.accepted_reaching(1), 1);
}

INSTANTIATE_TEST_SUITE_P(Linux, Bypass, ::testing::ValuesIn(e2e::backends_and_callers({"exec"})), e2e::backend_caller_name);

// --- what the proxy refuses by itself: a second host in the Host field, a wildcard's boundary --

class ProxyRules : public NetworkHosts {};

TEST_P(ProxyRules, AHostFieldNamingAnotherHostIsRefusedAndNothingIsContacted) {
    CountingServer allowed, other;
    const std::string a = "127.0.0.1:" + std::to_string(allowed.port());
    const std::string o = "127.0.0.1:" + std::to_string(other.port());
    const json spec = {{"steps", {{"smuggled", "http", "http://" + a + "/", o}, {"plain", "http", "http://" + a + "/"}}}};
    const e2e::Result result = confined({a}, spec);
    ASSERT_EQ(result.status, 0) << result.err;
    EXPECT_EQ(step(result.out, "smuggled"), "400") << result.out;
    EXPECT_EQ(step(result.out, "plain"), "200") << result.out << result.err;  // the control
    EXPECT_EQ(allowed.accepted(), 1) << allowed.requests();                   // the plain request alone
    EXPECT_EQ(other.accepted(), 0) << other.requests();
}

TEST_P(ProxyRules, AWildcardDoesNotAllowANameThatOnlyEndsLikeIt) {
    const json spec = {{"steps",
                        {{"http", "http", "http://badexample.org:8080/"},
                         {"connect", "connect", "badexample.org:443"},
                         {"socks", "socks", "name", "badexample.org", 443},
                         {"apex", "connect", "example.org:443"}}}};
    const e2e::Result result = confined({"*.example.org"}, spec);
    ASSERT_EQ(result.status, 0) << result.err;
    EXPECT_EQ(step(result.out, "http"), "403") << result.out;
    EXPECT_EQ(step(result.out, "connect"), "403") << result.out;
    EXPECT_EQ(step(result.out, "socks"), "2") << result.out;
    EXPECT_EQ(step(result.out, "apex"), "403") << result.out;  // *.example.org is not example.org itself
    EXPECT_TRUE(contains(result.err, "dsh-confine: network: refused badexample.org:8080, not in allow_hosts")) << result.err;
    EXPECT_TRUE(contains(result.err, "dsh-confine: network: refused badexample.org:443, not in allow_hosts")) << result.err;
    EXPECT_TRUE(contains(result.err, "dsh-confine: network: refused example.org:443, not in allow_hosts")) << result.err;
}

TEST_P(ProxyRules, IPv6LoopbackIsReachedThroughTheProxyWhenAllowed) {
    CountingServer allowed(AF_INET6), refused(AF_INET6);
    const std::string a = "[::1]:" + std::to_string(allowed.port());
    const std::string r = "[::1]:" + std::to_string(refused.port());
    const json spec = {{"steps",
                        {{"http", "http", "http://" + a + "/"},
                         {"connect", "connect", a},
                         {"socks", "socks", "ipv6", "::1", allowed.port()},
                         {"refused", "connect", r},
                         {"socks-refused", "socks", "ipv6", "::1", refused.port()}}}};
    const e2e::Result result = confined({a}, spec);
    ASSERT_EQ(result.status, 0) << result.err;
    EXPECT_EQ(step(result.out, "http"), "200") << result.out << result.err;
    EXPECT_EQ(step(result.out, "connect"), "200 200") << result.out << result.err;
    EXPECT_EQ(step(result.out, "socks"), "0 200") << result.out << result.err;
    EXPECT_EQ(step(result.out, "refused"), "403") << result.out;
    EXPECT_EQ(step(result.out, "socks-refused"), "2") << result.out;
    EXPECT_EQ(allowed.accepted(), 3) << allowed.requests();
    EXPECT_EQ(refused.accepted(), 0) << refused.requests();
    EXPECT_TRUE(contains(result.err, "dsh-confine: network: refused " + r + ", not in allow_hosts")) << result.err;
}

INSTANTIATE_TEST_SUITE_P(Linux, ProxyRules, ::testing::ValuesIn(e2e::backends_and_callers({"exec"})), e2e::backend_caller_name);

// --- the proxy's lifetime: exactly the call's ---------------------------------------------------

class Lifetime : public NetworkHosts {};

// The command says where its proxy is, then waits on a FIFO until the test has seen the proxy's
// process (and, under Landlock, its listener on the host); when the call has ended, both are gone
// and the workspace holds only what the command wrote.
TEST_P(Lifetime, TheProxyEndsWithTheCallAndLeavesNothing) {
    const std::string before = e2e::host_snapshot(ws);
    const std::string ready = ws + "/ready", go = ws + "/go";
    ASSERT_EQ(mkfifo(ready.c_str(), 0600), 0);
    ASSERT_EQ(mkfifo(go.c_str(), 0600), 0);
    own(ready);
    own(go);
    const std::vector<std::string> argv =
        call({"dsh-e2e-lifetime.example"},
             {"/bin/sh", "-c", "echo \"proxy $HTTP_PROXY\"; echo ready > \"$0\"; read line < \"$1\"; echo done > \"$2\"",
              ready, go, ws + "/written"},
             base / "report.json");
    Fd ready_fd(open(ready.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC)), go_fd(open(go.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC));
    e2e::Result result;
    std::thread caller([&] { result = e2e::run_program(argv, options()); });
    const bool running = said_ready(ready_fd.get());  // the command runs, so does its proxy
    const std::vector<pid_t> during = awaited_proxy_processes(home.path());
    [[maybe_unused]] const ssize_t n = write(go_fd.get(), "go\n", 3);
    caller.join();
    ASSERT_TRUE(running) << "the command never said it was ready: " << result.err;
    ASSERT_EQ(result.status, 0) << result.err;
    ASSERT_EQ(during.size(), 1U) << "the proxy's process was not found while the call ran";
    EXPECT_TRUE(ends(during.front())) << "the proxy outlived the call: pid " << during.front();
    EXPECT_TRUE(proxy_processes(home.path()).empty());
    const std::uint16_t port = proxy_port(result.out);
    ASSERT_NE(port, 0) << result.out;
    // Under bubblewrap the proxy listened inside the sandbox's network namespace (port 3128 there);
    // under Landlock on the host's loopback: nothing listens there any more.
    if (backend == "landlock") {
        EXPECT_FALSE(host_listens(port)) << "the proxy's listener outlived the call";
    }
    unlink(ready.c_str());
    unlink(go.c_str());
    unlink((ws + "/written").c_str());
    EXPECT_EQ(e2e::host_snapshot(ws), before) << "the call left something in the workspace";
}

INSTANTIATE_TEST_SUITE_P(Linux, Lifetime, ::testing::ValuesIn(e2e::backends_and_callers({"exec", "run", "print", "session"})),
                         e2e::backend_caller_name);

// The proxy takes signals as any process would once it serves: a SIGTERM ends it while the
// command goes on (the command here never connects).
class ProxySignals : public NetworkHosts {};

TEST_P(ProxySignals, ASigtermEndsTheProxyWhileTheCommandRuns) {
    const std::string ready = ws + "/ready", go = ws + "/go";
    ASSERT_EQ(mkfifo(ready.c_str(), 0600), 0);
    ASSERT_EQ(mkfifo(go.c_str(), 0600), 0);
    own(ready);
    own(go);
    const std::vector<std::string> argv = call({"dsh-e2e-signals.example"},
                                               {"/bin/sh", "-c", "echo ready > \"$0\"; read line < \"$1\"; echo still here", ready, go});
    Fd ready_fd(open(ready.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC)), go_fd(open(go.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC));
    e2e::Result result;
    std::thread caller([&] { result = e2e::run_program(argv, options()); });
    bool running = false, signalled = false, ended = false;
    std::vector<pid_t> during;
    try {
        running = said_ready(ready_fd.get());
        during = awaited_proxy_processes(home.path());
        // Once it serves (it blocks no signal from then on): one that came before, while the
        // caller's handlers were still in place, would be discarded as the caller's.
        for (int tries = 0; during.size() == 1 && !blocks_nothing(during.front()) && tries < 1000; ++tries)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));  // 10 s, as a hang guard
        signalled = during.size() == 1 && kill(during.front(), SIGTERM) == 0;
        ended = signalled && ends(during.front());
    } catch (const std::exception& e) {
        ADD_FAILURE() << e.what();
    }
    [[maybe_unused]] const ssize_t n = write(go_fd.get(), "go\n", 3);
    caller.join();
    ASSERT_TRUE(running) << "the command never said it was ready: " << result.err;
    ASSERT_EQ(during.size(), 1U) << "the proxy's process was not found while the call ran";
    EXPECT_TRUE(signalled);
    EXPECT_TRUE(ended) << "a SIGTERM did not end the proxy: pid " << during.front();
    EXPECT_EQ(result.status, 0) << result.err;
    EXPECT_EQ(result.out, "still here\n");
}

INSTANTIATE_TEST_SUITE_P(Linux, ProxySignals, ::testing::ValuesIn(e2e::backends_and_callers({"exec", "run"})),
                         e2e::backend_caller_name);

// The proxy's own start-up (its event loop, the resolver's thread) waits for its first client:
// a call that never connects pays for none of it. Until a client comes the proxy's process is
// one thread; the first connection starts it, and is served.
class ProxyStart : public NetworkHosts {};

// The number of threads of process `pid`, or 0 once it is gone.
std::size_t threads_of(pid_t pid) {
    std::error_code ec;
    std::size_t count = 0;
    for (fs::directory_iterator it("/proc/" + std::to_string(pid) + "/task", ec), end; !ec && it != end; it.increment(ec)) ++count;
    return count;
}

TEST_P(ProxyStart, TheProxyStartsUpAtItsFirstClient) {
    CountingServer allowed;
    const std::string a = "127.0.0.1:" + std::to_string(allowed.port());
    const std::string ready = ws + "/ready", go = ws + "/go";
    ASSERT_EQ(mkfifo(ready.c_str(), 0600), 0);
    ASSERT_EQ(mkfifo(go.c_str(), 0600), 0);
    own(ready);
    own(go);
    const json spec = {{"steps", {{"http-allowed", "http", "http://" + a + "/"}}}, {"exit", 0}};
    std::vector<std::string> command = {"/bin/sh", "-c",
                                        "echo ready > \"$0\"; read line < \"$1\"; \"$2\" -c \"$3\" \"$4\"; "
                                        "echo ready > \"$0\"; read line < \"$1\"",
                                        ready, go};
    const std::vector<std::string> the_client = client(spec);
    command.insert(command.end(), {the_client[0], the_client[2], the_client[3]});
    Fd ready_fd(open(ready.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC)), go_fd(open(go.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC));
    e2e::Result result;
    std::thread caller([&] { result = e2e::run_program(call({a}, command), options()); });
    const auto next = [&] {  // the command's next "ready": true once it came
        const bool came = said_ready(ready_fd.get());
        char line[64];
        [[maybe_unused]] const ssize_t drained = read(ready_fd.get(), line, sizeof line);
        return came;
    };
    bool first = false, second = false;
    std::size_t before = 0, after = 0;
    std::vector<pid_t> during;
    try {
        first = next();
        during = awaited_proxy_processes(home.path());
        if (during.size() == 1) {
            // Once it waits (its signals unblocked just before), and for 300 ms more: one thread.
            for (int tries = 0; !blocks_nothing(during.front()) && tries < 1000; ++tries)
                std::this_thread::sleep_for(std::chrono::milliseconds(10));
            before = threads_of(during.front());
            for (int tries = 0; tries < 30 && before == 1; ++tries) {
                std::this_thread::sleep_for(std::chrono::milliseconds(10));
                before = std::max(before, threads_of(during.front()));
            }
        }
        [[maybe_unused]] const ssize_t n = write(go_fd.get(), "go\n", 3);
        second = next();
        if (during.size() == 1) after = threads_of(during.front());
    } catch (const std::exception& e) {
        ADD_FAILURE() << e.what();
    }
    [[maybe_unused]] const ssize_t n = write(go_fd.get(), "go\n", 3);
    caller.join();
    ASSERT_TRUE(first && second) << "the command never said it was ready: " << result.err;
    ASSERT_EQ(result.status, 0) << result.err;
    ASSERT_EQ(during.size(), 1U) << "the proxy's process was not found while the call ran";
    EXPECT_EQ(before, 1U) << "the proxy started up before any client came";
    EXPECT_EQ(step(result.out, "http-allowed"), "200") << result.out << result.err;
    EXPECT_EQ(allowed.accepted(), 1) << allowed.requests();
    EXPECT_EQ(after, 2U) << "the proxy's first client did not start it up (its resolver's thread)";
    EXPECT_TRUE(ends(during.front())) << "the proxy outlived the call: pid " << during.front();
}

INSTANTIATE_TEST_SUITE_P(Linux, ProxyStart, ::testing::ValuesIn(e2e::backends_and_callers({"exec", "run"})),
                         e2e::backend_caller_name);

// On the exec path the proxy's process keeps the caller's image, so under Landlock it is the
// command's child: one no wait(2) of the command's finds. A command that waits for any child of
// its own (`wait -n`, waitpid(-1), a supervisor reaping until ECHILD) must see none and go on.
class ProxyChild : public NetworkHosts {};

TEST_P(ProxyChild, TheCommandsWaitForAnyChildFindsNone) {
    const std::string script =
        "import os, sys\n"
        "print('proxy', os.environ.get('HTTP_PROXY'))\n"
        "try:\n"
        "    print('waited', os.waitpid(-1, 0))\n"
        "except ChildProcessError:\n"
        "    print('no child')\n"
        // The command may move a child of its own that never executed anything into another
        // process group of its session; the proxy, in a session of its own before the command
        // starts, cannot be moved.
        "kids = open('/proc/self/task/%d/children' % os.getpid()).read().split()\n"
        "moved = 0\n"
        "for kid in kids:\n"
        "    try:\n"
        "        os.setpgid(int(kid), int(kid))\n"
        "        moved += 1\n"
        "    except OSError:\n"
        "        pass\n"
        "print('children', len(kids), 'moved', moved)\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    os._exit(7)\n"  // the control: a child of its own is found, with its status
        "print('own child', os.waitpid(-1, 0) == (pid, 7 << 8))\n";
    e2e::RunOptions o = options();
    o.timeoutMs = 60000;  // a wait that found the proxy would block until the call's end: never
    const e2e::Result result = e2e::run_program(call({"dsh-e2e-child.example"}, {"/usr/bin/python3", "-c", script}), o);
    ASSERT_EQ(result.status, 0) << result.err;
    EXPECT_NE(proxy_port(result.out), 0) << result.out;
    EXPECT_TRUE(contains(result.out, "\nno child\n")) << result.out;
    EXPECT_TRUE(contains(result.out, "own child True")) << result.out;
    // Under Landlock on the exec path (and a printed plan) the proxy is the command's one child.
    const bool proxy_is_child = backend == "landlock" && form != "run";
    EXPECT_TRUE(contains(result.out, proxy_is_child ? "children 1 moved 0" : "children 0 moved 0")) << result.out;
}

INSTANTIATE_TEST_SUITE_P(Linux, ProxyChild, ::testing::ValuesIn(e2e::backends_and_callers({"exec", "print", "run"})),
                         e2e::backend_caller_name);

// A printed plan whose runner fails after it has started the proxy (the command was removed in
// between, so the runner reaches it and ends with 127): the proxy ends with the runner, and no
// process of it stays behind.
class FailedRunner : public NetworkHosts {};

TEST_P(FailedRunner, TheProxyEndsWithARunnerThatCouldNotStartTheCommand) {
    const std::string program = base / "gone";
    ASSERT_EQ(e2e::run_program({"/usr/bin/install", "-m", "0755", "/bin/true", program}).status, 0);
    const std::vector<std::string> argv = call({"dsh-e2e-failed.example"}, {program});
    ASSERT_EQ(unlink(program.c_str()), 0);
    const e2e::Result result = e2e::run_program(argv, options());
    EXPECT_EQ(result.status, 127) << result.err;
    EXPECT_TRUE(contains(result.err, "COMMAND_NOT_FOUND")) << result.err;
    // Any process of dsh-confine's for this HOME, in a session of its own or not yet (one still
    // waiting for the runner's execve would not have made its session).
    std::vector<pid_t> left = proxy_processes(home.path(), false);
    for (int tries = 0; !left.empty() && tries < 1000; ++tries) {  // it ends at its own pace: 10 s as a hang guard
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        left = proxy_processes(home.path(), false);
    }
    EXPECT_TRUE(left.empty()) << "a proxy outlived the runner that failed: pid " << left.front();
}

INSTANTIATE_TEST_SUITE_P(Linux, FailedRunner, ::testing::ValuesIn(e2e::backends_and_callers({"print"})),
                         e2e::backend_caller_name);

// The caller killed with SIGKILL mid-call (on the exec path, bubblewrap itself, or under Landlock
// the command itself; `run`): the proxy goes too.
class KilledCaller : public NetworkHosts {};

TEST_P(KilledCaller, TheProxyEndsWhenTheCallerIsKilled) {
    const std::string ready = ws + "/ready", pid_file = base / "caller.pid";
    ASSERT_EQ(mkfifo(ready.c_str(), 0600), 0);
    own(ready);
    std::vector<std::string> argv = call({"dsh-e2e-killed.example"},
                                         {"/bin/sh", "-c", "echo \"proxy $HTTP_PROXY\"; echo ready > \"$0\"; exec sleep 600", ready});
    // A shell in front records the caller's pid; the harness waits for the shell.
    argv.insert(argv.begin(), {"/bin/sh", "-c", "\"$@\" & echo $! > " + pid_file + "; wait", "sh"});
    e2e::RunOptions o = options();
    o.uid.reset();  // the shell as root; the caller itself as the test's user
    if (uid) argv.insert(argv.begin() + 4, {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"});
    Fd ready_fd(open(ready.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC));
    e2e::Result result;
    std::thread shell([&] { result = e2e::run_program(argv, o); });
    // Nothing may throw past the thread while it runs (std::terminate): what does is reported.
    std::string thrown;
    bool killed = false;
    std::vector<pid_t> during;
    try {
        const bool running = said_ready(ready_fd.get());
        during = awaited_proxy_processes(home.path());
        const std::string recorded = read_file(pid_file);
        const pid_t caller = recorded.empty() ? -1 : std::stoi(recorded);
        killed = running && caller > 0 && kill(caller, SIGKILL) == 0;
    } catch (const std::exception& e) {
        thrown = e.what();
    }
    if (!killed) {
        for (pid_t pid : during) kill(pid, SIGKILL);  // so that the shell ends, and the test with it
        const std::string recorded = read_file(pid_file);
        if (!recorded.empty() && recorded.find_first_not_of("0123456789\n") == std::string::npos)
            kill(static_cast<pid_t>(std::strtol(recorded.c_str(), nullptr, 10)), SIGKILL);
    }
    shell.join();
    ASSERT_EQ(thrown, "");
    ASSERT_TRUE(killed) << "the command never said it was ready: " << result.err;
    ASSERT_EQ(during.size(), 1U) << "the proxy's process was not found while the call ran";
    EXPECT_TRUE(ends(during.front())) << "the proxy outlived its killed caller: pid " << during.front();
    EXPECT_TRUE(proxy_processes(home.path()).empty());
    const std::uint16_t port = proxy_port(result.out);
    ASSERT_NE(port, 0) << result.out << result.err;
    if (backend == "landlock") {
        EXPECT_FALSE(host_listens(port)) << "the proxy's listener outlived its killed caller";
    }
}

INSTANTIATE_TEST_SUITE_P(Linux, KilledCaller, ::testing::ValuesIn(e2e::backends_and_callers({"exec", "run"})), e2e::backend_caller_name);

// /tmp after a call, seen from a mount namespace whose /tmp is a fresh tmpfs: the proxy leaves
// nothing there; what is left is the Landlock exec path's per-call temp area (removed by a later
// call, docs/backends/linux.md), inside dsh-confine's own per-user base.
class NothingInTmp : public NetworkHosts {};

TEST_P(NothingInTmp, TheCallLeavesNothingInTmpButTheDocumentedTempArea) {
    CountingServer server;
    const std::string a = "127.0.0.1:" + std::to_string(server.port());
    const std::string who = uid ? std::to_string(*uid) : "0";
    // The workspace itself in the fresh /tmp, so the call makes its temp areas there as usual.
    std::string script = "mount -t tmpfs none /tmp && chmod 1777 /tmp && mkdir /tmp/ws && chown " + who + ":" + who +
                         " /tmp/ws && cd /tmp/ws && \"$@\"; echo \"status $?\"; find /tmp -mindepth 1 | sed 's/^/left /'";
    std::vector<std::string> argv = {"/usr/bin/unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", script,
                                     "sh"};
    if (uid) argv.insert(argv.end(), {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"});
    argv.push_back(e2e::binary());
    if (form == "run") argv.push_back("run");
    const json spec = {{"steps", {{"http", "http", "http://" + a + "/"}}}};
    const std::vector<std::string> command = client(spec);
    argv.insert(argv.end(), {"--backend", backend, "--mode", "workspace-write", "--allow-host", a, "--"});
    argv.insert(argv.end(), command.begin(), command.end());
    e2e::RunOptions o = options();
    o.uid.reset();
    o.cwd = "/";
    const e2e::Result result = e2e::run_program(argv, o);
    ASSERT_TRUE(contains(result.out, "status 0")) << result.out << result.err;
    EXPECT_EQ(step(result.out, "http"), "200") << result.out << result.err;
    EXPECT_EQ(server.accepted(), 1);
    const std::string base_dir = "/tmp/dsh-confine-" + who;
    std::istringstream lines(result.out);
    for (std::string line; std::getline(lines, line);) {
        if (line.rfind("left ", 0) != 0) continue;
        const std::string path = line.substr(5);
        const bool allowed = path == "/tmp/ws" || path == base_dir ||
                             (form == "exec" && backend == "landlock" && path.rfind(base_dir + "/call-", 0) == 0);
        EXPECT_TRUE(allowed) << "left in /tmp: " << path;
    }
}

INSTANTIATE_TEST_SUITE_P(Linux, NothingInTmp, ::testing::ValuesIn(e2e::backends_and_callers({"exec", "run"})), e2e::backend_caller_name);

// --- bad input: one line, 125, nothing runs -----------------------------------------------------

class BadHosts : public ::testing::Test {
protected:
    e2e::TempDir home{"/var/tmp"};
    e2e::TempDir base{"/var/tmp"};
    std::string sentinel = base / "ran";

    e2e::Result dsh(const std::vector<std::string>& args) const {
        e2e::RunOptions o;
        o.env = e2e::isolated_env(home.path());
        o.cwd = base.path();
        return e2e::run(args, o);
    }
    // Every confining form of `args`, each refused with CODE before the command could run.
    void refused(const std::vector<std::string>& args, const std::string& code, const std::string& words) {
        for (const bool under_run : {false, true}) {
            std::vector<std::string> full = args;
            if (under_run) full.insert(full.begin(), "run");
            full.insert(full.end(), {"--", "/bin/sh", "-c", "echo ran > " + sentinel});
            const e2e::Result r = dsh(full);
            EXPECT_TRUE(e2e::IsError(r, code)) << full[0] << " " << (full.size() > 1 ? full[1] : "") << ": " << r.err;
            EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
            EXPECT_TRUE(contains(r.err, words)) << r.err;
            EXPECT_FALSE(e2e::exists(sentinel)) << "the command ran";
        }
    }
};

TEST_F(BadHosts, EachBadPatternIsRefusedWithOneLineNamingItAndTheRule) {
    const std::vector<std::pair<std::string, std::string>> patterns = {
        {"*", "\"*\" alone would allow every host"},
        {"*.org", "a wildcard needs at least two labels"},
        {"exa*ple.org", "\"*\" is allowed only as the whole first label"},
        {"https://example.org", "not a URL"},
        {"example.org/path", "not a URL"},
        {"example.org:65536", "a port is a number from 1 to 65535"},
        {"example.org:0", "a port is a number from 1 to 65535"},
    };
    for (const auto& [pattern, rule] : patterns) refused({"--allow-host", pattern}, "USAGE", rule);
    refused({"--allow-host", ""}, "USAGE", "--allow-host");
}

TEST_F(BadHosts, AllowHostWithTheNetworkAllowedOrDeniedIsAConflict) {
    for (const std::string network : {"allow", "deny"})
        refused({"--allow-host", "example.org", "--network", network}, "USAGE", "--network " + network + " says otherwise");
    refused({"--network", "hosts"}, "USAGE", "--network hosts needs hosts to allow");
}

TEST_F(BadHosts, AllowHostInDangerFullAccessIsRefusedNotIgnored) {
    // Nothing is confined there, so nothing would filter: the option cannot take effect.
    refused({"--mode", "danger-full-access", "--allow-host", "example.org"}, "USAGE",
            "--allow-host cannot apply in danger-full-access");
}

TEST_F(BadHosts, ABadAllowHostsInTheConfigNamesFileLineAndColumn) {
    const std::string config = base / "config.toml";
    e2e::write_file(config, "[sandbox]\ndefault_mode = \"read-only\"\n\n[network]\nallow_hosts = [\"example.org\", \"*.org\"]\n");
    refused({"--config", config}, "CONFIG", config + ":5:");
    refused({"--config", config}, "CONFIG", "*.org");
    e2e::write_file(config, "[sandbox]\nnetwork = \"deny\"\n[network]\nallow_hosts = [\"example.org\"]\n");
    refused({"--config", config}, "CONFIG", config + ":4:");
    e2e::write_file(config, "[sandbox]\nnetwork = \"hosts\"\n");
    refused({"--config", config}, "CONFIG", config + ":2:");
}

TEST_F(BadHosts, ASessionsHostsEventIsCheckedWhenItIsLogged) {
    ASSERT_EQ(dsh({"session", "start", "s", "--cwd", base.path()}).status, 0);
    for (const std::vector<std::string>& bad :
         {std::vector<std::string>{"hosts"}, {"hosts", "*"}, {"hosts", "https://example.org"}, {"deny", "example.org"}}) {
        std::vector<std::string> args = {"session", "network", "s"};
        args.insert(args.end(), bad.begin(), bad.end());
        const e2e::Result r = dsh(args);
        EXPECT_TRUE(e2e::IsError(r, "USAGE")) << r.err;
    }
    const json shown = json::parse(dsh({"session", "show", "s"}).out);
    EXPECT_TRUE(shown["events"].empty()) << shown.dump();
}

}  // namespace
