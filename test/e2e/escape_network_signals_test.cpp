// The escape classes of `--network deny` beyond socket(2), and of signals: a datagram socket
// that addresses a host socket by name (from socket(2) or a socketpair end, per call, connected,
// or disconnected), a socketpair end turned into a listener by path or abstract name, netlink
// messages to host processes and socket diagnostics, and a signal to the caller's process
// group (and to every process the command may signal). Each is attempted by a real command
// under each Linux backend, as root and as nobody, on the exec path, under `run`, through a
// printed plan run by sh, and with a session; each verdict comes from the host's side: a host
// socket or netlink port that must receive nothing, a connection the host must fail to make, a
// sentinel process that must receive no signal. Each class has a control that gets through
// without the promise (the network allowed, danger-full-access), so the checks can fail.
//
// Sockets and signals do not depend on where the scratch tree lies: only /var/tmp is used.
#include <fcntl.h>
#include <linux/netlink.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iterator>
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

using Param = e2e::BackendCaller;  // backend, caller, the form of the call

std::vector<Param> every_combination() { return e2e::backends_and_callers({"exec", "run", "print", "session"}); }

std::string canonical(const std::string& path) {
    std::error_code ec;
    const fs::path resolved = fs::canonical(path, ec);
    return ec ? path : resolved.string();
}

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

sockaddr_un unix_address(const std::string& name, socklen_t& size) {
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::memcpy(address.sun_path, name.data(), std::min(name.size(), sizeof address.sun_path - 1));
    size = sizeof address;
    if (!name.empty() && name.front() == '@') {  // an abstract name
        address.sun_path[0] = '\0';
        size = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size());
    }
    return address;
}

// A host socket of `type` bound at `name` (a path, or '@' and an abstract name), listening if a
// stream; non-blocking.
int host_socket(const std::string& name, int type) {
    const int fd = socket(AF_UNIX, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    socklen_t size = 0;
    const sockaddr_un address = unix_address(name, size);
    if (fd < 0 || bind(fd, reinterpret_cast<const sockaddr*>(&address), size) != 0 ||
        (type == SOCK_STREAM && listen(fd, 16) != 0)) {
        if (fd >= 0) close(fd);
        return -1;
    }
    return fd;
}

// Whether anything waits on a host socket: a datagram, or a connection to accept.
bool received(int fd, bool stream) {
    if (stream) {
        Fd connection(accept4(fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
        return connection.get() >= 0;
    }
    char byte;
    return recv(fd, &byte, 1, MSG_DONTWAIT) >= 0;
}

// Whether the host can reach a socket at `name` now: a stream or seqpacket connection made, or
// a datagram accepted.
bool host_reaches(const std::string& name, int type) {
    Fd fd(socket(AF_UNIX, type | SOCK_CLOEXEC, 0));
    socklen_t size = 0;
    const sockaddr_un address = unix_address(name, size);
    if (type == SOCK_DGRAM) return sendto(fd.get(), "h", 1, MSG_DONTWAIT, reinterpret_cast<const sockaddr*>(&address), size) == 1;
    return connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), size) == 0;
}

// Every datagram a command could address to the host's socket DGRAM, and every connection to its
// listener STREAM, from every socket it could make: its own, and socketpair ends of each type,
// addressed per call, connected, or disconnected first (connect with AF_UNSPEC); then io_uring.
const char* kDatagramScript = R"(
import ctypes, errno, socket, sys
dgram, stream = sys.argv[1:3]
libc = ctypes.CDLL(None, use_errno=True)
def attempt(name, action):
    try:
        action()
        print(name, "ok")
    except OSError as e:
        print(name, errno.errorcode.get(e.errno, e.errno))
def pair(kind):
    return socket.socketpair(socket.AF_UNIX, kind)[0]
def unspec(s):
    if libc.connect(s.fileno(), (ctypes.c_ushort * 8)(0), 16) != 0:
        e = ctypes.get_errno()
        raise OSError(e, errno.errorcode.get(e, str(e)))
def connected(s, to):
    s.connect(to); s.send(b"c")
attempt("own socket sendto", lambda: socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(b"o", dgram))
attempt("own socket connect", lambda: connected(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM), stream))
for kind, name in ((socket.SOCK_DGRAM, "dgram"), (socket.SOCK_RAW, "raw"), (socket.SOCK_STREAM, "stream"),
                   (socket.SOCK_SEQPACKET, "seqpacket")):
    attempt(name + " pair sendto", lambda: pair(kind).sendto(b"p", dgram))
    attempt(name + " pair sendmsg", lambda: pair(kind).sendmsg([b"m"], [], 0, dgram))
    attempt(name + " pair connect datagram", lambda: connected(pair(kind), dgram))
    attempt(name + " pair connect stream", lambda: connected(pair(kind), stream))
    def disconnected():
        s = pair(kind); unspec(s); s.sendto(b"u", dgram)
    attempt(name + " pair disconnected sendto", disconnected)
def ring():
    if libc.syscall(425, 1, (ctypes.c_char * 120)()) < 0:
        e = ctypes.get_errno()
        raise OSError(e, errno.errorcode.get(e, str(e)))
attempt("io_uring_setup", ring)
)";

// A socketpair end of each type, disconnected where it can be, bound to a name in the workspace
// and to an abstract name, and made to listen; and a listener of its own socket. Then it says
// "ready" on one FIFO and waits on another while the host tries to reach each name.
const char* kListenerScript = R"(
import ctypes, errno, os, select, socket, sys
ws, tag, ready, done = sys.argv[1:5]
libc = ctypes.CDLL(None, use_errno=True)
kept = []
def attempt(name, action):
    try:
        action()
        print(name, "ok")
    except OSError as e:
        print(name, errno.errorcode.get(e.errno, e.errno))
for kind, name in ((socket.SOCK_DGRAM, "dgram"), (socket.SOCK_STREAM, "stream"), (socket.SOCK_SEQPACKET, "seqpacket")):
    def listener(where):
        a, b = socket.socketpair(socket.AF_UNIX, kind)
        b.close()
        libc.connect(a.fileno(), (ctypes.c_ushort * 8)(0), 16)
        kept.append(a)
        a.bind(where)
        if kind != socket.SOCK_DGRAM:
            a.listen(4)
    attempt(name + " pair at a path", lambda: listener(os.path.join(ws, "pair-" + name + ".sock")))
    attempt(name + " pair at an abstract name", lambda: listener("\0" + tag + "-pair-" + name))
def own():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); kept.append(s)
    s.bind(os.path.join(ws, "own.sock")); s.listen(4)
attempt("own listener", own)
done_fd = os.open(done, os.O_RDONLY)
with open(ready, "w") as r:
    r.write("ready\n")
select.select([done_fd], [], [], 60)
)";

// A message to a host process's netlink port (NETLINK_USERSOCK), a dump of the host's Unix
// sockets (NETLINK_SOCK_DIAG, whose answer names them), a uevent listener, the other protocols;
// and the interface list through NETLINK_ROUTE, which must keep working.
const char* kNetlinkScript = R"(
import errno, socket, struct, sys
port = int(sys.argv[1])
def attempt(name, action):
    try:
        action()
        print(name, "ok")
    except OSError as e:
        print(name, errno.errorcode.get(e.errno, e.errno))
def usersock():
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 2)
    s.sendto(struct.pack("=LHHLL", 24, 16, 0, 0, 0) + b"dsh-nl\0\0", (port, 0))
def sock_diag():
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 4)
    request = struct.pack("=BBHLLLLL", socket.AF_UNIX, 0, 0, 0xffffffff, 0, 1, 0, 0)
    s.send(struct.pack("=LHHLL", 16 + len(request), 20, 0x301, 1, 0) + request)
    while True:
        answer = s.recv(65536)
        print("diag:", answer.hex())
        if len(answer) < 16 or struct.unpack("=LH", answer[:6])[1] in (2, 3):
            break
def uevent():
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, 15); s.bind((0, 1))
attempt("usersock", usersock)
attempt("sock_diag", sock_diag)
attempt("kobject_uevent", uevent)
for proto in (5, 6, 9, 10, 12, 16):
    attempt("netlink %d" % proto, lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, proto))
print("interfaces", len(socket.if_nameindex()))
)";

class NetworkSignals : public ::testing::TestWithParam<Param> {
protected:
    std::string backend = std::get<0>(GetParam());
    bool asRoot = std::get<1>(GetParam()) == "root";
    std::string form = std::get<2>(GetParam());
    std::optional<unsigned> uid = asRoot ? std::nullopt : std::optional<unsigned>(e2e::kNobody);
    e2e::TempDir home{"/var/tmp", uid};
    e2e::TempDir base{"/var/tmp", uid};
    std::string ws = base / "ws";
    std::string self = canonical(e2e::binary());

    void SetUp() override {
        E2E_REQUIRE(getuid() == 0, "these classes run as root, and as nobody through setpriv");
        E2E_REQUIRE(e2e::exists("/usr/bin/python3"), "no /usr/bin/python3 to attempt the classes with");
        mkdir(ws.c_str(), 0755);
        own(ws);
        const e2e::Result plan = dsh({"--print", "--backend", backend, "--", "true"});
        E2E_REQUIRE(plan.status == 0, backend + " cannot confine here: " + first_line(plan.err));
        if (form == "session") {
            ASSERT_EQ(dsh({"session", "start", "s", "--cwd", ws}).status, 0);
            ASSERT_EQ(dsh({"session", "mode", "s", "workspace-write"}).status, 0);
        }
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
        o.timeoutMs = 60000;
        return o;
    }
    e2e::Result dsh(const std::vector<std::string>& args) const { return e2e::run(args, options()); }

    // The argv a caller runs for `command` in this test's form, with the network `network`
    // (a session's is logged as its event).
    std::vector<std::string> call(const std::string& network, const std::vector<std::string>& command) const {
        std::vector<std::string> args = {e2e::binary()};
        if (form == "session") {
            EXPECT_EQ(dsh({"session", "network", "s", network}).status, 0);
            args.insert(args.end(), {"--session", "s", "--backend", backend});
        } else {
            args.insert(args.end(), {"--backend", backend, "--mode", "workspace-write", "--workspace-root", ws, "--network",
                                     network});
        }
        if (form == "run") args.insert(args.begin() + 1, "run");
        if (form == "print") args.insert(args.begin() + 1, {"--print", "--format", "shell"});
        args.push_back("--");
        args.insert(args.end(), command.begin(), command.end());
        if (form != "print") return args;
        const e2e::Result printed = e2e::run_program(args, options());
        EXPECT_EQ(printed.status, 0) << printed.err;
        return {"/bin/sh", "-c", printed.out};
    }
    e2e::Result confined(const std::string& network, const std::vector<std::string>& command) const {
        return e2e::run_program(call(network, command), options());
    }
    std::vector<std::string> python(const char* script, const std::vector<std::string>& args) const {
        std::vector<std::string> argv = {"/usr/bin/python3", "-c", script};
        argv.insert(argv.end(), args.begin(), args.end());
        return argv;
    }
};

// --- datagrams and connections to host sockets ----------------------------------------------

class DatagramToHost : public NetworkSignals {};

TEST_P(DatagramToHost, NoSocketTheCommandMakesReachesAHostSocketByName) {
    const std::string dgram_path = base / "log.dgram";  // a stand-in for /dev/log, /run/systemd/notify
    const std::string stream_path = base / "daemon.sock";
    for (const std::string network : {"deny", "allow"}) {
        Fd dgram(host_socket(dgram_path, SOCK_DGRAM));
        Fd stream(host_socket(stream_path, SOCK_STREAM));
        ASSERT_TRUE(dgram.get() >= 0 && stream.get() >= 0);
        own(dgram_path);
        own(stream_path);
        const e2e::Result r = confined(network, python(kDatagramScript, {dgram_path, stream_path}));
        ASSERT_EQ(r.status, 0) << network << ": " << r.err;
        const bool got_datagram = received(dgram.get(), false);
        const bool got_connection = received(stream.get(), true);
        if (network == "deny") {
            EXPECT_FALSE(got_datagram) << "a datagram reached the host's socket:\n" << r.out;
            EXPECT_FALSE(got_connection) << "a connection reached the host's listener:\n" << r.out;
            EXPECT_NE(r.out.find("io_uring_setup ENOSYS"), std::string::npos) << r.out;
        } else {  // the control: allowed, they get through, so the checks above can fail
            EXPECT_TRUE(got_datagram) << r.out;
            EXPECT_TRUE(got_connection) << r.out;
        }
        unlink(dgram_path.c_str());
        unlink(stream_path.c_str());
    }
}

INSTANTIATE_TEST_SUITE_P(Linux, DatagramToHost, ::testing::ValuesIn(every_combination()), e2e::backend_caller_name);

// --- listeners the host could reach ----------------------------------------------------------

class ListenerForHost : public NetworkSignals {};

TEST_P(ListenerForHost, NoNameTheCommandBindsCanBeReachedFromTheHost) {
    const std::string tag = "dsh-e2e-" + std::to_string(getpid()) + "-" + backend + "-" + std::get<1>(GetParam()) + "-" + form;
    for (const std::string network : {"deny", "allow"}) {
        const std::string ready = ws + "/ready-" + network, done = ws + "/done-" + network;
        for (const std::string& fifo : {ready, done}) {
            ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0) << fifo;
            own(fifo);
        }
        // Both ends held here (O_RDWR never waits): the command's opens never block, and a
        // command that died early leaves a FIFO that simply stays empty.
        Fd ready_fd(open(ready.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC));
        Fd done_fd(open(done.c_str(), O_RDWR | O_CLOEXEC));
        const std::string network_tag = tag + "-" + network;
        e2e::Result r;
        std::thread command([&] { r = confined(network, python(kListenerScript, {ws, network_tag, ready, done})); });
        pollfd wait_ready{ready_fd.get(), POLLIN, 0};
        const bool listening = poll(&wait_ready, 1, 60000) == 1;  // a hang guard, not a measurement
        std::vector<std::string> reached;
        if (listening) {
            for (const char* kind : {"dgram", "stream", "seqpacket"})
                for (const std::string& name : {ws + "/pair-" + kind + ".sock", "@" + network_tag + "-pair-" + kind})
                    for (const int type : {SOCK_DGRAM, SOCK_STREAM, SOCK_SEQPACKET})
                        if (host_reaches(name, type)) reached.push_back(name + " as type " + std::to_string(type));
        }
        const bool own_reached = listening && host_reaches(ws + "/own.sock", SOCK_STREAM);
        EXPECT_EQ(write(done_fd.get(), "d", 1), 1);
        command.join();
        ASSERT_TRUE(listening) << network << ": the command never said it was ready: " << r.err;
        EXPECT_EQ(r.status, 0) << network << ": " << r.err;
        if (network == "deny") {
            EXPECT_TRUE(reached.empty()) << "the host reached " << reached.front() << ":\n" << r.out;
            EXPECT_FALSE(own_reached) << r.out;
        } else {  // the control: the command's own listener is reachable with the network allowed
            EXPECT_TRUE(own_reached) << r.out;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Linux, ListenerForHost, ::testing::ValuesIn(every_combination()), e2e::backend_caller_name);

// --- netlink ---------------------------------------------------------------------------------

class NetlinkToHost : public NetworkSignals {};

TEST_P(NetlinkToHost, NoMessageReachesAHostProcessAndNoSocketDiagnosticsAnswer) {
    // A host socket whose name a NETLINK_SOCK_DIAG dump would show. (Under Landlock the host's
    // /proc/net/unix lists it too, readable like the rest of the host: not what this tests.)
    const std::string secret = "dsh-e2e-secret-" + std::to_string(getpid()) + "-" + backend + form;
    Fd listed(host_socket("@" + secret, SOCK_STREAM));
    ASSERT_GE(listed.get(), 0);
    std::string secret_hex;
    for (const unsigned char c : secret) {
        static const char digits[] = "0123456789abcdef";
        secret_hex += digits[c >> 4];
        secret_hex += digits[c & 15];
    }
    for (const std::string network : {"deny", "allow"}) {
        Fd port(socket(AF_NETLINK, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, NETLINK_USERSOCK));
        sockaddr_nl address{};
        address.nl_family = AF_NETLINK;
        socklen_t size = sizeof address;
        ASSERT_EQ(bind(port.get(), reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
        ASSERT_EQ(getsockname(port.get(), reinterpret_cast<sockaddr*>(&address), &size), 0);
        const e2e::Result r = confined(network, python(kNetlinkScript, {std::to_string(address.nl_pid)}));
        ASSERT_EQ(r.status, 0) << network << ": " << r.err;
        char buffer[256];
        const bool got_message = recv(port.get(), buffer, sizeof buffer, MSG_DONTWAIT) > 0;
        const bool listed_secret = r.out.find(secret_hex) != std::string::npos;
        EXPECT_NE(r.out.find("interfaces "), std::string::npos) << "NETLINK_ROUTE no longer works:\n" << r.out << r.err;
        if (network == "deny") {
            EXPECT_FALSE(got_message) << "a netlink message reached a host process:\n" << r.out;
            EXPECT_FALSE(listed_secret) << "NETLINK_SOCK_DIAG listed the host's sockets:\n" << r.out;
            EXPECT_NE(r.out.find("kobject_uevent EPERM"), std::string::npos) << r.out;
        } else {  // the control: with the network allowed, both backends share the host's netlink
            EXPECT_TRUE(got_message) << r.out;
            EXPECT_TRUE(listed_secret) << r.out;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Linux, NetlinkToHost, ::testing::ValuesIn(every_combination()), e2e::backend_caller_name);

// --- signals to the caller's process group ---------------------------------------------------

// The caller: a script that starts a sentinel in its own process group (no job control: every
// child shares the group, as a script's do), waits until it is ready, runs the call, then asks
// the sentinel which signals reached it. The script traps SIGUSR1 and SIGHUP itself so that it
// always gets to ask. Prints the call's status.
const char* kCaller = R"(self=$1 record=$2 fifo=$3; shift 3
export CALLER_GROUP=$$
trap : USR1 HUP
mkfifo "$fifo" || exit 90
"$self" __effect sentinel "$record" > "$fifo" &
sentinel=$!
read ready < "$fifo"
"$@"
status=$?
kill -USR2 "$sentinel"
wait "$sentinel"
echo "status=$status"
)";

// A caller that leads its session and ends by executing the call (a service's or a container's
// entry point that started a helper first): the helper is a sentinel in its process group, whose
// pid the script leaves in FIFO.pid for the test to ask it once the call has ended (it holds
// none of the test's pipes, whose end the test awaits first). The call
// then leads the caller's session and process group, as the caller did.
const char* kExecutingCaller = R"(self=$1 record=$2 fifo=$3; shift 3
export CALLER_GROUP=$$
mkfifo "$fifo" || exit 90
"$self" __effect sentinel "$record" > "$fifo" 2> /dev/null < /dev/null &
echo $! > "$fifo.pid"
read ready < "$fifo"
exec "$@"
)";

// What a harness's process_group=0 does before it executes the call: the call leads a process
// group of its own in the caller's session.
const std::vector<std::string> kGroupLeader = {"/usr/bin/python3", "-c",
                                               "import os, sys; os.setpgid(0, 0); os.execv(sys.argv[1], sys.argv[1:])"};

class SignalsToCallersGroup : public NetworkSignals {
protected:
    // How the caller runs the call: as its child, as its child made a process group's leader,
    // or by executing it (kExecutingCaller).
    enum class Calls { AsChild, AsGroupLeader, ByExec };

    // What the sentinel recorded ("none" or "USR1"), and the caller's last line ("status=N",
    // the call's status) with anything that went wrong, for `command` run in this test's form,
    // or unconfined (`confine` false). The command finds the caller's process group's number
    // in CALLER_GROUP (where the caller leads its group, as under setsid).
    std::pair<std::string, std::string> attempt(const std::vector<std::string>& command, bool confine,
                                                const std::vector<std::string>& prefix, const std::string& name,
                                                bool terminal = false, Calls calls = Calls::AsChild) const {
        const std::string record = base / ("record-" + name), fifo = base / ("fifo-" + name);
        std::vector<std::string> script = {"/bin/sh", "-c", calls == Calls::ByExec ? kExecutingCaller : kCaller,
                                           "sh", self, record, fifo};
        std::vector<std::string> argv = {e2e::binary(), "--mode", "danger-full-access", "--"};
        argv.insert(argv.end(), command.begin(), command.end());
        if (confine) argv = call("allow", command);
        if (calls == Calls::AsGroupLeader) argv.insert(argv.begin(), kGroupLeader.begin(), kGroupLeader.end());
        script.insert(script.end(), argv.begin(), argv.end());
        e2e::RunOptions o = options();
        o.prefix = prefix;
        o.pty = terminal;
        const e2e::Result r = e2e::run_program(script, o);
        if (calls != Calls::ByExec) {
            std::string said = r.out.substr(std::min(r.out.size(), r.out.rfind("status=")));
            if (r.status != 0) said += " (the caller exited " + std::to_string(r.status) + ")";
            return {first_line(read_file(record)), first_line(said) + (r.err.empty() ? "" : "; stderr: " + r.err)};
        }
        // The sentinel outlived the caller: asked now, its answer awaited (it writes it at once).
        const pid_t sentinel = static_cast<pid_t>(std::atol(read_file(fifo + ".pid").c_str()));
        if (sentinel <= 1 || kill(sentinel, SIGUSR2) != 0) return {"no sentinel", "status=" + std::to_string(r.status)};
        for (int tries = 0; tries < 1000 && read_file(record).empty(); ++tries) usleep(10 * 1000);
        return {first_line(read_file(record)), "status=" + std::to_string(r.status) + (r.err.empty() ? "" : "; stderr: " + r.err)};
    }
    bool names_signals_gap() const {
        const json plan = json::parse(dsh({"--print", "--backend", backend, "--", "true"}).out, nullptr, false);
        for (const auto& text : plan.value("enforcementGaps", json::array()))
            if (text.get<std::string>().rfind("signals:", 0) == 0) return true;
        return false;
    }
    // The confined command: kill(0, SIGUSR1), or kill(-1, SIGUSR1). It ignores SIGUSR1 itself
    // (it is among the receivers).
    std::vector<std::string> signalling(bool every_process) const {
        return {"/bin/sh", "-c", std::string("trap '' USR1; exec \"$0\" __effect ") + (every_process ? "signal-all" : "signal-group"),
                self};
    }
};

// With a controlling terminal (the caller leads a session on a pseudo-terminal) the command
// stays in the caller's session and process group, and only the Landlock scope keeps kill(0)
// in; without one it also has a session of its own.
TEST_P(SignalsToCallersGroup, KillZeroReachesNothingOutsideTheSandbox) {
    E2E_REQUIRE(!names_signals_gap(), backend + " names a signals gap on this kernel (Landlock before ABI 6)");
    for (const bool terminal : {true, false}) {
        const std::string name = terminal ? "group-tty" : "group";
        const auto [record, said] = attempt(signalling(false), true, {}, name, terminal);
        EXPECT_EQ(record, "none") << "a process of the caller's group received SIGUSR1; " << name << ": " << said;
        EXPECT_EQ(said, "status=0") << "the call did not end normally (bubblewrap killed?); " << name;
        if (form != "exec") continue;
        // The control: unconfined, the same command reaches the sentinel.
        const auto [control, control_said] = attempt(signalling(false), false, {}, name + "-control", terminal);
        EXPECT_EQ(control, "USR1") << name << ": " << control_said;
    }
}

// kill(-1, ...) reaches every process the command may signal. It runs in a PID namespace of its
// own (unshare, before setpriv), so that a regression reaches only this test's processes (kill(-1)
// reaches no process outside the caller's PID namespace; unshare, outside, shares the process
// group, so this test sends kill(-1) alone). The namespace's init is a shell that waits for the
// caller (kill(-1) spares init), so the caller and the sentinel are ordinary processes there.
TEST_P(SignalsToCallersGroup, KillMinusOneReachesNothingOutsideTheSandbox) {
    E2E_REQUIRE(!names_signals_gap(), backend + " names a signals gap on this kernel (Landlock before ABI 6)");
    E2E_REQUIRE(e2e::exists("/usr/bin/unshare"), "no unshare (util-linux)");
    const std::vector<std::string> own_namespace = {"/usr/bin/unshare", "--pid", "--fork", "--kill-child", "--",
                                                    "/bin/sh", "-c", "\"$@\"; exit $?", "sh"};
    const auto [record, said] = attempt(signalling(true), true, own_namespace, "all");
    EXPECT_EQ(record, "none") << "a process outside the sandbox received SIGUSR1; " << said;
    // The helper's own status: 0, or 1 where kill(-1) found nothing to signal (bubblewrap's PID
    // namespace holds only the helper and its init); not a death by signal.
    const auto status_is = [](const std::string& line, const std::string& value) {
        return line.rfind(value, 0) == 0 && (line.size() == value.size() || line[value.size()] == ';');
    };
    EXPECT_TRUE(status_is(said, "status=0") || status_is(said, "status=1")) << "the call did not end normally: " << said;
    if (form != "exec") return;
    const auto [control, control_said] = attempt(signalling(true), false, own_namespace, "all-control");
    EXPECT_EQ(control, "USR1") << control_said;
}

// The kernel's own signals to a process group: the command leaves its group orphaned with a
// stopped member (the effect orphan-group), and the kernel sends the whole group SIGHUP and
// SIGCONT, no permission checked, no Landlock scope consulted. The caller leads a session of its
// own without a terminal (setsid), as a service, a CI job or a harness started so does: no
// process of its group has a parent in another group of the session, so a group of it left with
// a stopped member is orphaned. Without a controlling terminal the command runs in a session of
// its own, which no setpgid(2) of its leaves for the caller's group.
TEST_P(SignalsToCallersGroup, AnOrphanedGroupsSignalsReachNothingOutside) {
    E2E_REQUIRE(e2e::exists("/usr/bin/setsid"), "no setsid (util-linux)");
    const std::vector<std::string> own_session = {"/usr/bin/setsid", "--wait"};
    const std::vector<std::string> orphaning = {"/bin/sh", "-c", "exec \"$0\" __effect orphan-group", self};
    const auto [record, said] = attempt(orphaning, true, own_session, "orphan");
    EXPECT_EQ(record, "none") << "the kernel signalled the caller's process group; " << said;
    EXPECT_EQ(said, "status=0") << "the command could not orphan its group, or the call did not end normally";
    // The same where /dev/tty is not the terminal device (a bind of /dev/null in a mount
    // namespace of the caller's own, as a container's /dev may have it): opening it succeeds, and
    // is still no controlling terminal.
    E2E_REQUIRE(e2e::exists("/usr/bin/unshare"), "no unshare (util-linux)");
    const std::vector<std::string> no_tty_device = {
        "/usr/bin/unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c",
        "mount --bind /dev/null /dev/tty && exec /usr/bin/setsid --wait \"$@\"", "sh"};
    const auto [replaced, replaced_said] = attempt(orphaning, true, no_tty_device, "orphan-devnull");
    EXPECT_EQ(replaced, "none") << "/dev/tty a bind of /dev/null: the kernel signalled the caller's group; " << replaced_said;
    EXPECT_EQ(replaced_said, "status=0") << "/dev/tty a bind of /dev/null";
    if (form != "exec") return;
    // The control: unconfined, the same command has the kernel signal the caller's group.
    // (The kernel sends SIGHUP, then SIGCONT; this one's SIGHUP has not been seen to arrive.)
    const auto [control, control_said] = attempt(orphaning, false, own_session, "orphan-control");
    EXPECT_NE(control.find("CONT"), std::string::npos) << control << "; " << control_said;
}

// The same where setsid cannot give the command a session: the caller made the call a process
// group's leader (a harness's process_group=0), or leads its session and executes the call (a
// service's or a container's entry point that started a helper first). On the Landlock exec path
// the call then becomes the command in a child, with a process in front that passes signals on;
// elsewhere the command is a new process anyway. The command's stopped grandchild tries to join
// the caller's group (by number, which /proc shows), which is then left orphaned.
TEST_P(SignalsToCallersGroup, ACallerThatMadeTheCallALeaderGetsNoSignal) {
    E2E_REQUIRE(e2e::exists("/usr/bin/setsid"), "no setsid (util-linux)");
    E2E_REQUIRE(e2e::exists(kGroupLeader.front()), "no " + kGroupLeader.front() + " to make the call a group's leader");
    const std::vector<std::string> own_session = {"/usr/bin/setsid", "--wait"};
    const std::vector<std::string> joining = {"/bin/sh", "-c", "exec \"$0\" __effect orphan-group \"$CALLER_GROUP\"", self};
    for (const Calls calls : {Calls::AsGroupLeader, Calls::ByExec}) {
        const std::string name = calls == Calls::ByExec ? "leads-session" : "leads-group";
        const auto [record, said] = attempt(joining, true, own_session, name, false, calls);
        EXPECT_EQ(record, "none") << name << ": the kernel signalled the caller's process group; " << said;
        EXPECT_EQ(said, "status=0") << name << ": the command could not orphan its group, or the call did not end normally";
        if (form != "exec") continue;
        // The control: unconfined, the same command has the kernel signal the caller's group.
        const auto [control, control_said] = attempt(joining, false, own_session, name + "-control", false, calls);
        EXPECT_NE(control.find("CONT"), std::string::npos) << name << ": " << control << "; " << control_said;
    }
}

INSTANTIATE_TEST_SUITE_P(Linux, SignalsToCallersGroup, ::testing::ValuesIn(every_combination()), e2e::backend_caller_name);

// --- the caller as the command's parent ----------------------------------------------------

// The caller: runs the call as its child and reaps every child it gets until it has none (as a
// shell's `wait` does), then prints what its waits reported besides the call's end: "stopped", a
// stop only a tracer hears of (the call is then killed), and "foreign", a child it never started.
const char* kReapingCaller = R"(import os, signal, sys
call = os.fork()
if call == 0:
    os.execv(sys.argv[1], sys.argv[1:])
seen = []
while True:
    try:
        pid, status = os.waitpid(-1, 0)
    except ChildProcessError:
        break
    if pid != call:
        seen.append("foreign")
    elif os.WIFSTOPPED(status):
        seen.append("stopped")
        os.kill(call, signal.SIGKILL)
print("seen=" + (",".join(seen) or "nothing"))
)";

class CallersChild : public NetworkSignals {
protected:
    // What the caller's waits reported, for `op` (an effect) run confined in this test's form,
    // or unconfined.
    std::string seen_by_caller(const std::string& op, bool confine) const {
        const std::vector<std::string> command = {self, "__effect", op};
        std::vector<std::string> argv = {e2e::binary(), "--mode", "danger-full-access", "--"};
        argv.insert(argv.end(), command.begin(), command.end());
        if (confine) argv = call("allow", command);
        argv.insert(argv.begin(), {"/usr/bin/python3", "-c", kReapingCaller});
        const e2e::Result r = e2e::run_program(argv, options());
        const std::size_t at = r.out.rfind("seen=");
        return at == std::string::npos ? "no answer: " + r.out + r.err : first_line(r.out.substr(at));
    }
};

// Under Landlock the runner executes the command in place, so the command is the caller's own
// child: made its tracer (PTRACE_TRACEME), the caller's wait(2) would report the command stopped
// by each signal it gets (a harness takes that for its end, and the command runs on once the
// caller is gone), and CLONE_PARENT would hand the caller children it never started. The guard
// refuses both; under bubblewrap and `run` the command's parent is dsh-confine's.
TEST_P(CallersChild, TheCommandCannotMakeItsParentActForIt) {
    E2E_REQUIRE(e2e::exists("/usr/bin/python3"), "no /usr/bin/python3 for the caller");
    for (const std::string op : {"trace-me", "clone-parent"}) {
        EXPECT_EQ(seen_by_caller(op, true), "seen=nothing") << op;
        if (form != "exec") continue;
        // The control: unconfined, the command is the caller's child and gets its way.
        EXPECT_EQ(seen_by_caller(op, false), op == "trace-me" ? "seen=stopped" : "seen=foreign") << op;
    }
}

INSTANTIATE_TEST_SUITE_P(Linux, CallersChild, ::testing::ValuesIn(every_combination()), e2e::backend_caller_name);

// --- another cgroup ---------------------------------------------------------------------------

// clone3's CLONE_INTO_CGROUP starts a child in any cgroup whose cgroup.procs the user may write
// (the kernel checks the file, past a read-only /sys): out of `run --limit`'s group, or into one
// outside the sandbox. The guard refuses clone3 under both backends (ENOSYS: libc falls back to
// clone, which names no cgroup). Judged by the child's line of /proc/self/cgroup (the kernel's)
// in a target group the host made, with an unconfined control that lands there.
class IntoAnotherCgroup : public NetworkSignals {};

TEST_P(IntoAnotherCgroup, TheCommandCannotStartAChildInAnotherCgroup) {
    std::string v2;
    std::istringstream mounts(read_file("/proc/self/mounts"));
    for (std::string device, where, type, rest; mounts >> device >> where >> type && std::getline(mounts, rest);)
        if (type == "cgroup2" && v2.empty()) v2 = where;
    E2E_REQUIRE(!v2.empty(), "no cgroup2 mount");
    const std::string target = v2 + "/dsh-into-" + std::to_string(getpid()) + "-" + backend + "-" + form;
    ASSERT_TRUE(mkdir(target.c_str(), 0755) == 0 || errno == EEXIST) << target << ": " << std::strerror(errno);
    const std::string name = target.substr(v2.size());
    const std::vector<std::string> command = {self, "__effect", "clone-into-cgroup", target};
    const e2e::Result r = e2e::run_program(call("allow", command), options());
    std::vector<std::string> argv = {e2e::binary(), "--mode", "danger-full-access", "--"};
    argv.insert(argv.end(), command.begin(), command.end());
    const e2e::Result control = form == "exec" ? e2e::run_program(argv, options()) : e2e::Result{};
    rmdir(target.c_str());
    EXPECT_EQ(r.out.find("child in " + name), std::string::npos) << r.out << r.err;
    EXPECT_NE(r.err.find("clone3(CLONE_INTO_CGROUP)"), std::string::npos) << r.out << r.err;
    if (form == "exec") {
        EXPECT_NE(control.out.find("child in " + name + "\n"), std::string::npos) << control.out << control.err;
    }
}

// Root alone may write a cgroup.procs here (an unprivileged user needs a delegated subtree).
INSTANTIATE_TEST_SUITE_P(Linux, IntoAnotherCgroup,
                         ::testing::Values(Param{"bwrap", "root", "exec"}, Param{"landlock", "root", "exec"},
                                           Param{"bwrap", "root", "run"}, Param{"landlock", "root", "run"}),
                         e2e::backend_caller_name);

// --- other processes' scheduling ------------------------------------------------------------

// The command, as the victim's user: lowers the victim's nice value (by its pid, and by its
// process group, which it leads), sets it SCHED_IDLE, and its I/O class idle (ionice), then its
// own (by pid 0), which stay its to set. One line each: done or refused.
const char* kScheduling = R"(import os, subprocess, sys
victim = int(sys.argv[1])
def attempt(name, f):
    try:
        f()
        print(name, "done")
    except OSError:
        print(name, "refused")
def ionice():
    if subprocess.run(["ionice", "-c", "3", "-p", str(victim)], stderr=subprocess.DEVNULL).returncode != 0:
        raise OSError("ionice")
attempt("nice", lambda: os.setpriority(os.PRIO_PROCESS, victim, 19))
attempt("group-nice", lambda: os.setpriority(os.PRIO_PGRP, victim, 19))
attempt("idle", lambda: os.sched_setscheduler(victim, os.SCHED_IDLE, os.sched_param(0)))
attempt("io-idle", ionice)
attempt("own", lambda: (os.setpriority(os.PRIO_PROCESS, 0, 5), os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))))
)";

class OthersScheduling : public NetworkSignals {
protected:
    static bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }
    // A `sleep` of this test's user, in a session (and process group) of its own, outside any sandbox.
    pid_t start_victim() const {
        const pid_t pid = fork();
        if (pid == 0) {
            setsid();
            if (uid && (setgid(*uid) != 0 || setuid(*uid) != 0)) _exit(127);
            execl("/bin/sleep", "sleep", "60", static_cast<char*>(nullptr));
            _exit(127);
        }
        return pid;
    }
    static void end(pid_t victim) {
        kill(victim, SIGKILL);
        waitpid(victim, nullptr, 0);
    }
    // The victim's nice value and scheduling policy (/proc/PID/stat's 19th and 41st fields) and
    // I/O class (ionice's word), as the host sees them.
    static std::string scheduling_of(pid_t victim) {
        const std::string stat = read_file("/proc/" + std::to_string(victim) + "/stat");
        std::istringstream fields(stat.substr(std::min(stat.size(), stat.rfind(')') + 2)));
        std::vector<std::string> field(std::istream_iterator<std::string>(fields), {});
        const e2e::Result io = e2e::run_program({"/usr/bin/ionice", "-p", std::to_string(victim)}, {});
        return "nice " + (field.size() > 16 ? field[16] : "?") + " policy " + (field.size() > 38 ? field[38] : "?") +
               " io " + first_line(io.out);
    }
};

// No LSM hook governs another process's nice value, scheduling policy or I/O priority, and a
// process of the same user may lower them: the guard refuses every target but the command's
// own process (bubblewrap's PID namespace already hides the victim). Judged by the victim's
// scheduling as the host reads it, with an unconfined control.
TEST_P(OthersScheduling, TheCommandCannotLowerAProcessOutsideItsSandbox) {
    E2E_REQUIRE(e2e::exists("/usr/bin/ionice"), "no ionice (util-linux)");
    const pid_t victim = start_victim();
    ASSERT_GT(victim, 0);
    usleep(50 * 1000);  // the victim has executed sleep
    const std::string before = scheduling_of(victim);
    const e2e::Result r = confined("allow", python(kScheduling, {std::to_string(victim)}));
    const std::string after = scheduling_of(victim);
    end(victim);
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(after, before) << r.out;
    for (const char* name : {"nice", "group-nice", "idle", "io-idle"})
        EXPECT_TRUE(contains(r.out, std::string(name) + " refused\n")) << name << ": " << r.out;
    EXPECT_TRUE(contains(r.out, "own done\n")) << "the command's own scheduling is its own: " << r.out << r.err;
    if (form != "exec") return;
    // The control: unconfined, the same command lowers the victim.
    const pid_t control = start_victim();
    ASSERT_GT(control, 0);
    usleep(50 * 1000);
    const std::string control_before = scheduling_of(control);
    std::vector<std::string> argv = {e2e::binary(), "--mode", "danger-full-access", "--"};
    const std::vector<std::string> command = python(kScheduling, {std::to_string(control)});
    argv.insert(argv.end(), command.begin(), command.end());
    const e2e::Result c = e2e::run_program(argv, options());
    const std::string control_after = scheduling_of(control);
    end(control);
    EXPECT_TRUE(contains(c.out, "nice done\n") && contains(c.out, "idle done\n")) << c.out << c.err;
    EXPECT_NE(control_after, control_before) << c.out;
}

INSTANTIATE_TEST_SUITE_P(Linux, OthersScheduling, ::testing::ValuesIn(every_combination()), e2e::backend_caller_name);

// Where the kernel has no Landlock (no_landlock makes its syscalls fail, as on such a kernel), the
// bubblewrap plan names the signals gap, and the gap is what it says: with a controlling terminal
// (the caller leads a session on a pseudo-terminal), kill(0) reaches the caller's group,
// bubblewrap included. So the check above can fail, and the gap is exact.
class SignalsGapWithoutLandlock : public SignalsToCallersGroup {};

TEST_P(SignalsGapWithoutLandlock, TheNamedGapIsTheCallersProcessGroup) {
    e2e::RunOptions o = options();
    o.prefix = {NO_LANDLOCK_BINARY};
    const json plan = json::parse(e2e::run({"--print", "--backend", backend, "--", "true"}, o).out, nullptr, false);
    std::string gap;
    for (const auto& text : plan.value("enforcementGaps", json::array()))
        if (text.get<std::string>().rfind("signals:", 0) == 0) gap = text.get<std::string>();
    EXPECT_NE(gap.find("kill(0, ...)"), std::string::npos) << plan.dump();
    EXPECT_EQ(plan.value("enforcement", ""), "partial");
    const auto [record, said] = attempt(signalling(false), true, {NO_LANDLOCK_BINARY}, "gap", true);
    EXPECT_EQ(record, "USR1") << said;
    EXPECT_EQ(said.rfind("status=138", 0), 0u) << "bubblewrap was not killed: " << said;
}

INSTANTIATE_TEST_SUITE_P(Linux, SignalsGapWithoutLandlock,
                         ::testing::Values(Param{"bwrap", "root", "exec"}, Param{"bwrap", "nobody", "exec"}), e2e::backend_caller_name);

}  // namespace
