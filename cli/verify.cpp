#include "verify.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>

#include <fcntl.h>
#include <unistd.h>
#if defined(__linux__)
#include <linux/fs.h>  // FS_IOC_GETFLAGS, FS_IOC_SETFLAGS
#include <linux/netlink.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#endif

#include "../lib/git_protection.hpp"
#include "../platform/posix/effects.hpp"
#include "../platform/posix/process.hpp"
#include "../platform/posix/state_store.hpp"

namespace dsh::cli {
namespace {

namespace fs = std::filesystem;

struct Scratch {
    std::string base;  // under /var/tmp: outside the private /tmp a backend may mount
    std::string ws;
    std::string out;
};

void write_file(const std::string& path, const std::string& content) {
    std::ofstream(path, std::ios::binary) << content;
}

Scratch make_scratch() {
    std::string pattern = "/var/tmp/dsh-confine-verify-XXXXXX";
    if (!mkdtemp(pattern.data())) {
        pattern = "/tmp/dsh-confine-verify-XXXXXX";
        if (!mkdtemp(pattern.data())) return {};
    }
    Scratch s{pattern, pattern + "/ws", pattern + "/outside"};
    fs::create_directories(s.ws);
    fs::create_directories(s.out + "/dir");
    for (const char* name : {"file", "victim", "moveme"}) write_file(s.out + "/" + name, "original\n");
    for (const char* name : {"inside", "inside2", "inside3"}) write_file(s.ws + "/" + name, "inside\n");
    return s;
}

void reset_scratch(const Scratch& s) {
    std::error_code ec;
    fs::remove_all(s.ws + ".moved", ec);
    fs::remove_all(s.ws, ec);
    fs::remove_all(s.out, ec);
    fs::create_directories(s.ws);
    fs::create_directories(s.out + "/dir");
    for (const char* name : {"file", "victim", "moveme"}) write_file(s.out + "/" + name, "original\n");
    for (const char* name : {"inside", "inside2", "inside3"}) write_file(s.ws + "/" + name, "inside\n");
}

std::string gap_key(const std::string& gap) { return gap.substr(0, gap.find(':')); }

#if defined(__linux__)
// A file's inode flags (chattr), which the tree snapshot does not show; -1 when unreadable.
long inode_flags(const std::string& path) {
    const int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    int flags = 0;  // the kernel reads and writes an int, whatever <linux/fs.h> says
    const bool ok = fd >= 0 && ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0;
    if (fd >= 0) close(fd);
    return ok ? flags : -1;
}

// Whether the file system of `path` keeps the no-dump flag: set from the host, then cleared.
bool keeps_inode_flags(const std::string& path) {
    const int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    int flags = 0;
    bool ok = fd >= 0 && ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0;
    const int plain = flags;
    flags |= FS_NODUMP_FL;
    ok = ok && ioctl(fd, FS_IOC_SETFLAGS, &flags) == 0 && ioctl(fd, FS_IOC_SETFLAGS, &plain) == 0;
    if (fd >= 0) close(fd);
    return ok;
}
#endif

}  // namespace

int run_effect_helper(const std::vector<std::string>& args) {
    if (args.empty()) return 2;
    return posix::perform_effect(args.front(), std::vector<std::string>(args.begin() + 1, args.end()));
}

VerifyReport verify_backend(const Backend& backend) {
    VerifyReport report;
    report.backend = backend.name();
    const std::string self = posix::self_executable();
    Scratch s = make_scratch();
    if (s.base.empty()) {
        report.overBlocked = true;
        report.effects.push_back({"scratch", "-", false, false, false, "could not make a scratch directory"});
        return report;
    }
    const std::string other_gid = std::to_string(getegid() == 0 ? 4242 : getegid() + 1);
#if defined(__linux__)
    std::string hostname;
    std::getline(std::ifstream("/proc/sys/kernel/hostname"), hostname);
#endif

    struct Effect {
        std::string name;
        std::vector<std::string> args;
        std::string gap;  // which named gap would explain an escape
    };
    const std::vector<Effect> denied = {
        {"create a file outside", {"create", s.out + "/new"}, ""},
        {"overwrite a file outside", {"write", s.out + "/file"}, ""},
        {"append to a file outside", {"append", s.out + "/file"}, ""},
        {"truncate a file outside", {"truncate", s.out + "/file"}, "truncate"},
        {"fallocate a file outside", {"fallocate", s.out + "/file"}, ""},
        {"chmod a file outside", {"chmod", s.out + "/file"}, "chmod"},
        {"chgrp a file outside", {"chgrp", s.out + "/file", other_gid}, "chown"},
        {"set times of a file outside", {"utimes", s.out + "/file"}, "utimes"},
        {"set an xattr outside", {"setxattr", s.out + "/file"}, "xattrs"},
        {"mkdir outside", {"mkdir", s.out + "/newdir"}, ""},
        {"rmdir outside", {"rmdir", s.out + "/dir"}, ""},
        {"unlink outside", {"unlink", s.out + "/victim"}, ""},
        {"rename from outside into the workspace", {"rename", s.out + "/moveme", s.ws + "/moveme"}, ""},
        {"rename from the workspace to outside", {"rename", s.ws + "/inside", s.out + "/inside"}, ""},
        {"hard link into outside", {"link", s.ws + "/inside2", s.out + "/hardlink"}, ""},
        {"symlink outside", {"symlink", s.out + "/symlink"}, ""},
        {"mkfifo outside", {"mkfifo", s.out + "/fifo"}, ""},
        {"bind a unix socket outside", {"bind", s.out + "/socket"}, ""},
        {"mknod outside", {"mknod", s.out + "/null"}, ""},
        {"rename the workspace root itself", {"rename", s.ws, s.ws + ".moved"}, ""},
    };

    // The policy each effect runs under: the mode, and the dimensions a check sets for itself.
    std::function<void(SandboxPolicy&)> dimensions;
    auto run_confined_effect = [&](ConfinedSandboxMode mode, const std::vector<std::string>& args,
                                   const posix::Pty* pty) {
        std::vector<std::string> argv = {self, "__effect"};
        argv.insert(argv.end(), args.begin(), args.end());
        SandboxPolicy policy{mode, s.ws, std::nullopt, std::nullopt};
        if (dimensions) dimensions(policy);
        Expected<ConfinedArgv> confined = backend.confine(argv, policy);
        if (!confined) return posix::EffectRun{};
        return posix::run_effect(confined->argv, pty, 10000);
    };

    const Expected<ConfinedArgv> sample =
        backend.confine({self}, SandboxPolicy{ConfinedSandboxMode::WorkspaceWrite, s.ws, std::nullopt, std::nullopt});
    if (sample) {
        report.enforcement = sample->enforcement == SandboxEnforcement::Full ? "full" : "partial";
        report.gaps = sample->enforcementGaps;
    }
    auto named = [&](const std::string& key) {
        for (const auto& gap : report.gaps)
            if (!key.empty() && gap_key(gap) == key) return true;
        return false;
    };

    // A denied effect: the host's side (the scratch tree, and what `observe` adds) unchanged,
    // and the helper's own refusal (exit 1), not a failure to run it at all.
    auto attempt_denied = [&](ConfinedSandboxMode mode, const Effect& effect, const std::function<std::string()>& observe) {
        auto host_side = [&] { return posix::snapshot_tree(s.base) + (observe ? observe() : std::string()); };
        const std::string before = host_side();
        const posix::EffectRun run = run_confined_effect(mode, effect.args, nullptr);
        EffectResult result{effect.name, std::string(to_string(mode)), true, before == host_side(), false, ""};
        if (!run.started || run.exitCode != 1 || run.output.find("execvp") != std::string::npos) {
            // Not the helper's own refusal: nothing was really attempted.
            result.held = false;
            result.detail = "the effect helper did not run: " + run.output.substr(0, run.output.find('\n'));
        }
        if (!result.held) {
            result.namedGap = named(effect.gap);
            result.detail = result.namedGap ? "got through: a named gap (" + effect.gap + ")" : "got through";
        }
        report.effects.push_back(result);
    };

    for (ConfinedSandboxMode mode : {ConfinedSandboxMode::WorkspaceWrite, ConfinedSandboxMode::ReadOnly}) {
        const std::string mode_name(to_string(mode));
        for (const Effect& effect : denied) {
            reset_scratch(s);
            attempt_denied(mode, effect, nullptr);
        }
        // Descriptors dsh-confine itself holds open when it starts the runner, as a careless
        // parent leaves them: a directory and a file (open for writing) outside. Unless kept
        // with --keep-fd, the command must not get them, so neither may be used. (Windows hands
        // a child only the handles it names: nothing to attempt there.)
#if !defined(_WIN32)
        {
            reset_scratch(s);
            // No O_CLOEXEC: inherited by the runner on purpose.
            const int dir = open(s.out.c_str(), O_RDONLY | O_DIRECTORY);
            const int file = open((s.out + "/file").c_str(), O_WRONLY | O_APPEND);
            if (dir >= 0 && file >= 0) {
                attempt_denied(mode, {"create a file through an inherited directory descriptor",
                                      {"openat-create", std::to_string(dir), "made"}, ""}, nullptr);
                attempt_denied(mode, {"write through an inherited file descriptor", {"write-fd", std::to_string(file)}, ""},
                               nullptr);
            }
            if (dir >= 0) close(dir);
            if (file >= 0) close(file);
        }
#endif
#if defined(__linux__)
        // An inode flag the owner may set without any write access (no-dump, FS_IOC_SETFLAGS),
        // judged by the flags the host reads back. Only where the file system keeps them.
        reset_scratch(s);
        if (keeps_inode_flags(s.out + "/file")) {
            attempt_denied(mode, {"set an inode flag outside (FS_IOC_SETFLAGS)", {"setflags", s.out + "/file"}, "file ioctls"},
                           [&] { return "flags=" + std::to_string(inode_flags(s.out + "/file")) + "\n"; });
        } else {
            report.effects.push_back({"set an inode flag outside (FS_IOC_SETFLAGS)", mode_name, true, true, false,
                                      "not attempted: the file system of " + s.base + " keeps no inode flags"});
        }
#endif
        // Whether the plan of a policy with these dimensions names the gap `key`: a backend names
        // the gaps of protected and unreadable paths only when there are some.
        auto named_for = [&](ConfinedSandboxMode m, const std::string& key) {
            SandboxPolicy with{m, s.ws, std::nullopt, std::nullopt};
            if (dimensions) dimensions(with);
            const Expected<ConfinedArgv> plan = backend.confine({self}, with);
            if (plan)
                for (const auto& g : plan->enforcementGaps)
                    if (gap_key(g) == key) return true;
            return false;
        };
        // The dimensions beside the mode, each under a policy that asks for it, judged from here:
        // a secret's bytes never in the helper's output, a protected file unchanged, and no
        // connection reaching a listener of the host's.
        {
            reset_scratch(s);
            const std::string secret = s.out + "/secret";
            write_file(secret, "dsh-confine-verify-secret\n");
            dimensions = [&](SandboxPolicy& p) { p.unreadablePaths = {secret}; };
            const posix::EffectRun run = run_confined_effect(mode, {"read", secret}, nullptr);
            const bool held = run.started && run.output.find("dsh-confine-verify-secret") == std::string::npos;
            const bool gap = !held && named_for(mode, "unreadable paths");
            report.effects.push_back({"read an unreadable path (deny_read)", mode_name, true, held, gap,
                                      held ? "" : gap ? "got through: a named gap (unreadable paths)" : "got through"});
        }
        if (mode == ConfinedSandboxMode::WorkspaceWrite) {
            reset_scratch(s);
            fs::create_directories(s.ws + "/.git/hooks");
            const std::string hooks = s.ws + "/.git/hooks";
            dimensions = [&](SandboxPolicy& p) { p.protectedPaths = {hooks}; };
            const std::string before = posix::snapshot_tree(s.base);
            run_confined_effect(mode, {"create", hooks + "/pre-commit"}, nullptr);
            const bool held = before == posix::snapshot_tree(s.base);
            const bool gap = !held && named_for(mode, "protected paths");
            report.effects.push_back({"write a protected path (.git/hooks)", mode_name, true, held, gap,
                                      held ? "" : gap ? "got through: a named gap (protected paths)" : "got through"});
        }
        // Git's protection, judged by the host's git: after the call, `git rev-parse` in the
        // workspace must still find its .git, not the workspace taken for a bare repository
        // (safe.bareRepository=all: the setting that takes one, whatever the caller's config).
        const posix::ProgramLookup git = posix::resolve_program("git");
        if (mode == ConfinedSandboxMode::WorkspaceWrite && git.status == posix::Lookup::Found) {
            reset_scratch(s);
            fs::create_directories(s.ws + "/.git/objects");
            fs::create_directories(s.ws + "/.git/refs/heads");
            fs::create_directories(s.ws + "/.git/hooks");
            write_file(s.ws + "/.git/HEAD", "ref: refs/heads/main\n");
            write_file(s.ws + "/.git/config", "[core]\n\trepositoryformatversion = 0\n\tbare = false\n");
            const std::string ws = s.ws;
            dimensions = [ws](SandboxPolicy& p) {
                p.git = plan_git_protection({ws}, GitMode::Protect, {});
                for (const auto* list : {&p.git.readOnly, &p.git.madeDirectories, &p.git.madeFiles})
                    p.protectedPaths.insert(p.protectedPaths.end(), list->begin(), list->end());
            };
            run_confined_effect(mode, {"plant-bare", s.ws}, nullptr);
            const posix::SpawnOutcome found =
                posix::spawn_with_timeout({git.path, "-c", "safe.bareRepository=all", "-C", s.ws, "rev-parse", "--absolute-git-dir"}, 10000);
            const bool held = found.exitCode == 0 && found.output.rfind(s.ws + "/.git\n", 0) == 0;
            const bool gap = !held && named_for(mode, "git");
            report.effects.push_back({"make git take the workspace for a planted bare repository", mode_name, true, held, gap,
                                      held ? "" : gap ? "got through: a named gap (git)" : "got through: git found " + found.output});
        }
#if defined(__linux__)
        {
            reset_scratch(s);
            dimensions = [](SandboxPolicy& p) { p.network = NetworkPolicy::Deny; };
            const int tcp = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
            sockaddr_in address{};
            address.sin_family = AF_INET;
            address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            socklen_t length = sizeof address;
            const bool listening = tcp >= 0 && bind(tcp, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
                                   listen(tcp, 4) == 0 && getsockname(tcp, reinterpret_cast<sockaddr*>(&address), &length) == 0;
            const std::string unix_path = s.base + "/host.sock";
            const int local = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
            sockaddr_un unix_address{};
            unix_address.sun_family = AF_UNIX;
            std::snprintf(unix_address.sun_path, sizeof unix_address.sun_path, "%s", unix_path.c_str());
            const bool unix_listening = local >= 0 && bind(local, reinterpret_cast<sockaddr*>(&unix_address), sizeof unix_address) == 0 &&
                                        listen(local, 4) == 0;
            const auto reached = [](int listener) {
                const int accepted = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
                if (accepted >= 0) close(accepted);
                return accepted >= 0;
            };
            if (listening) {
                const posix::EffectRun run =
                    run_confined_effect(mode, {"connect-tcp", std::to_string(ntohs(address.sin_port))}, nullptr);
                const bool held = run.started && run.exitCode == 1 && !reached(tcp);
                report.effects.push_back({"connect to a TCP listener on the host (network deny)", mode_name, true, held,
                                          false, held ? "" : "got through"});
            }
            if (unix_listening) {
                const posix::EffectRun run = run_confined_effect(mode, {"connect-unix", unix_path}, nullptr);
                const bool held = run.started && run.exitCode == 1 && !reached(local);
                report.effects.push_back({"connect to a host daemon's Unix socket (network deny)", mode_name, true, held,
                                          false, held ? "" : "got through"});
            }
            if (tcp >= 0) close(tcp);
            if (local >= 0) close(local);
            unlink(unix_path.c_str());
            // A datagram socket of the host's (a stand-in for /dev/log or /run/systemd/notify),
            // and a host process's netlink port: a datagram that reached either waits in its
            // queue when the helper has ended.
            const auto waiting = [](int fd) {
                char byte;
                return recv(fd, &byte, 1, MSG_DONTWAIT) >= 0;
            };
            const std::string dgram_path = s.base + "/host.dgram";
            const int dgram = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
            std::snprintf(unix_address.sun_path, sizeof unix_address.sun_path, "%s", dgram_path.c_str());
            if (dgram >= 0 && bind(dgram, reinterpret_cast<sockaddr*>(&unix_address), sizeof unix_address) == 0) {
                const posix::EffectRun run = run_confined_effect(mode, {"sendto-dgram", dgram_path}, nullptr);
                const bool held = run.started && run.exitCode == 1 && !waiting(dgram);
                report.effects.push_back({"send a datagram to a host socket (network deny)", mode_name, true, held, false,
                                          held ? "" : "got through"});
            }
            if (dgram >= 0) close(dgram);
            unlink(dgram_path.c_str());
            const int netlink = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_USERSOCK);
            sockaddr_nl port{};
            port.nl_family = AF_NETLINK;
            socklen_t port_length = sizeof port;
            if (netlink >= 0 && bind(netlink, reinterpret_cast<sockaddr*>(&port), sizeof port) == 0 &&
                getsockname(netlink, reinterpret_cast<sockaddr*>(&port), &port_length) == 0) {
                const posix::EffectRun run = run_confined_effect(mode, {"netlink-send", std::to_string(port.nl_pid)}, nullptr);
                const bool held = run.started && run.exitCode == 1 && !waiting(netlink);
                report.effects.push_back({"send a netlink message to a host process (network deny)", mode_name, true, held,
                                          false, held ? "" : "got through"});
            }
            if (netlink >= 0) close(netlink);
        }
#endif
        dimensions = nullptr;
#if !defined(_WIN32)
        // A signal to every process of the runner's group, which a sentinel of the host's shares
        // (as a shell's other children share a script's): the sentinel must receive nothing, and
        // the runner (bubblewrap, itself in the group) must end as the helper did.
        {
            posix::SignalSentinel sentinel = posix::start_signal_sentinel();
            if (sentinel.pid > 0) {
                std::vector<std::string> argv = {self, "__effect", "signal-group"};
                const Expected<ConfinedArgv> confined =
                    backend.confine(argv, SandboxPolicy{mode, s.ws, std::nullopt, std::nullopt});
                posix::EffectRun run;
                if (confined) run = posix::run_effect_in_group(confined->argv, sentinel.pid, 10000);
                const bool signalled = posix::sentinel_signalled(sentinel);
                const bool held = run.started && !run.timedOut && run.exitCode == 0 && !signalled;
                const bool gap = !held && named("signals");
                std::string detail;
                if (!held)
                    detail = signalled ? "a process of the caller's group received it"
                                       : "the runner did not end normally (" + std::to_string(run.exitCode) + ")";
                if (gap) detail += ": a named gap (signals)";
                report.effects.push_back({"signal the caller's process group (kill(0, SIGUSR1))", mode_name, true, held,
                                          gap, detail});
            }
        }
#endif
        if (mode == ConfinedSandboxMode::ReadOnly) {
            reset_scratch(s);
            const std::string before = posix::snapshot_tree(s.base);
            run_confined_effect(mode, {"create", s.ws + "/new"}, nullptr);
            report.effects.push_back({"create a file in the workspace (read-only)", mode_name, true,
                                      before == posix::snapshot_tree(s.base), false, ""});
        }
#if defined(__linux__)
        // Linux's pseudo-filesystems: the current hostname written back (so nothing changes even
        // if it got through), and a file in the host's /dev/shm. (macOS has neither.)
        {
            const posix::EffectRun run = run_confined_effect(mode, {"rewrite", "/proc/sys/kernel/hostname"}, nullptr);
            std::string now;
            std::getline(std::ifstream("/proc/sys/kernel/hostname"), now);
            report.effects.push_back({"write /proc/sys", mode_name, true, run.exitCode != 0 && now == hostname, false,
                                      run.exitCode == 0 ? "the write was accepted" : ""});
        }
        {
            const std::string shm = "/dev/shm/dsh-confine-verify-" + std::to_string(getpid());
            run_confined_effect(mode, {"create", shm}, nullptr);
            const bool held = !fs::exists(shm);
            std::error_code ec;
            fs::remove(shm, ec);
            // Landlock shares the host's /dev/shm in workspace-write, a named gap.
            const bool gap = !held && named("/dev/shm");
            report.effects.push_back({"create a file in /dev/shm", mode_name, true, held, gap,
                                      held ? "" : gap ? "got through: a named gap (/dev/shm)" : "got through"});
        }
#endif
        {
            posix::Pty pty = posix::open_pty();
            if (pty.master >= 0) {
                run_confined_effect(mode, {"tiocsti"}, &pty);
                const int waiting = posix::pending_input(pty);
                report.effects.push_back({"push a keystroke into the terminal (TIOCSTI)", mode_name, true, waiting == 0,
                                          false, waiting > 0 ? "a keystroke was injected" : ""});
                close(pty.master);
            }
        }
        // The allowed side.
        struct Allowed {
            std::string name;
            std::vector<std::string> args;
            std::function<bool()> took_place;
        };
        std::vector<Allowed> allowed = {
            {"write /dev/null", {"write", "/dev/null"}, nullptr},
            {"read the host", {"read", "/etc/passwd"}, nullptr},
        };
        if (mode == ConfinedSandboxMode::WorkspaceWrite) {
            allowed.push_back({"create a file in the workspace", {"create", s.ws + "/made"},
                               [&] { return fs::exists(s.ws + "/made"); }});
            allowed.push_back({"chmod in the workspace", {"chmod", s.ws + "/inside3"},
                               [&] { return (fs::status(s.ws + "/inside3").permissions() & fs::perms::all) == (fs::perms::owner_read | fs::perms::owner_write); }});
            allowed.push_back({"rename within the workspace", {"rename", s.ws + "/inside", s.ws + "/renamed"},
                               [&] { return fs::exists(s.ws + "/renamed") && !fs::exists(s.ws + "/inside"); }});
            allowed.push_back({"a file in the temp area (TMPDIR)", {"tempfile"}, nullptr});
        }
        for (const Allowed& effect : allowed) {
            reset_scratch(s);
            const posix::EffectRun run = run_confined_effect(mode, effect.args, nullptr);
            bool held = run.exitCode == 0 && (!effect.took_place || effect.took_place());
            std::string detail = held ? "" : "refused: " + run.output.substr(0, run.output.find('\n'));
            report.effects.push_back({effect.name, mode_name, false, held, false, detail});
        }
    }
    std::error_code ec;
    fs::remove_all(s.base, ec);

    for (const EffectResult& effect : report.effects) {
        if (effect.shouldHold && !effect.held) {
            if (report.enforcement == "full") report.fullButEscaped = true;
            if (!effect.namedGap) report.unnamedEscape = true;
        }
        if (!effect.shouldHold && !effect.held) report.overBlocked = true;
    }
    return report;
}

nlohmann::ordered_json verify_json(const VerifyReport& report) {
    nlohmann::ordered_json out;
    out["backend"] = report.backend;
    out["enforcement"] = report.enforcement;
    out["enforcementGaps"] = report.gaps;
    nlohmann::ordered_json effects = nlohmann::ordered_json::array();
    for (const auto& e : report.effects)
        effects.push_back({{"effect", e.name}, {"mode", e.mode}, {"expected", e.shouldHold ? "denied" : "allowed"},
                           {"held", e.held}, {"namedGap", e.namedGap}, {"detail", e.detail}});
    out["effects"] = effects;
    out["fullButEscaped"] = report.fullButEscaped;
    out["unnamedEscape"] = report.unnamedEscape;
    out["overBlocked"] = report.overBlocked;
    out["ok"] = !report.fullButEscaped && !report.unnamedEscape && !report.overBlocked;
    return out;
}

std::string render_verify_text(const nlohmann::ordered_json& reports) {
    std::string text;
    for (const auto& report : reports) {
        text += "\nverify " + report["backend"].get<std::string>() + " (" + report["enforcement"].get<std::string>() + "): " +
                (report["ok"].get<bool>() ? "ok" : "FAILED") + "\n";
        for (const auto& e : report["effects"]) {
            const bool held = e["held"].get<bool>();
            const bool denied = e["expected"] == "denied";
            std::string mark = held ? (denied ? "held" : " ok ") : (e["namedGap"].get<bool>() ? "gap " : "FAIL");
            text += "  [" + mark + "] " + e["mode"].get<std::string>() + ": " + e["expected"].get<std::string>() + ": " +
                    e["effect"].get<std::string>();
            if (!e["detail"].get<std::string>().empty()) text += " (" + e["detail"].get<std::string>() + ")";
            text += "\n";
        }
    }
    return text;
}

}  // namespace dsh::cli
