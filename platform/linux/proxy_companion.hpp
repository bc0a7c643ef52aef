// The proxy's process for one call in the `hosts` network state (proxy.hpp is what it runs):
// started by whoever hands the call to its runner, before the command exists, and ended when
// that process ends.
//
// Its life, on the exec path (the launcher, the Landlock runner): a clone that shares the
// caller's memory and runs none of the caller's code until the caller has executed its next
// program (the command, or bubblewrap; a caller that ends otherwise, it follows at once), then
// keeps the caller's old image alone (ProxyStart::CallersImage), so the
// caller never waits and nothing starts twice; it is the caller's child with no exit signal, which
// no wait(2) of the command's without __WALL finds. Under `run`: started through a middle process
// that ends at once, both clones sharing run's memory until the proxy executes this binary afresh
// as `dsh-confine __proxy` (ProxyStart::OwnImage), so it is nobody's child. Either way in a session
// of its own (a terminal's or a harness's signal to the caller's process group does not reach it), with
// only stderr, its listening sockets and a pidfd of the process that started it. It waits for its
// first client before it starts up (its patterns parsed, its event loop and resolver's thread
// made), so a call that never connects pays for none of that. It serves until
// that process ends: under bubblewrap that process is bubblewrap itself (the plan's launcher,
// `dsh-confine net-proxy ... -- bwrap ...`, execs it), whose end is the sandbox's end; under
// Landlock it is the runner, which becomes the command; under `run` (either backend) it is `run`,
// which starts it in its own process, outside the call's cgroup and rlimits, and tells it to end
// by shutting its side of the refusals socket down once the command's tree is gone. A caller killed with SIGKILL takes the proxy's owner with it: the proxy goes
// too, and nothing of it stays behind (it makes no file anywhere).
//
// Where it listens: under Landlock on the host's loopback, on a port the kernel picks, made here
// before the command starts; under bubblewrap inside the sandbox's own network namespace, where
// only the stage can make a socket: the stage makes the listeners (127.0.0.1 and ::1, port
// kSandboxPort) and sends them over a socket pair to the proxy, which accepts on them from
// outside. Each refusal is one line on stderr: `dsh-confine: network: refused HOST:PORT, ...`;
// under `run` also one record on a socket `run` alone holds the other end of, which the command
// never gets, so the report's refusedHosts cannot be forged by the command.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "../../lib/types.hpp"

namespace dsh::proxy {

// The proxy's port inside bubblewrap's network namespace (nothing else listens there).
inline constexpr std::uint16_t kSandboxPort = 3128;

// How start_proxy starts the proxy's process. OwnImage: it executes dsh-confine afresh
// (`__proxy`), for a caller that goes on running (`run`). CallersImage: it is a clone that keeps
// the caller's image once the caller has executed its next program, for a caller that does so
// right after (the exec path, the launcher, the Landlock runner): cheaper, but the caller must
// then execve or end, and makes no other thread or process sharing its memory before that. The
// proxy is then the command's (or bubblewrap's) child, which no SIGCHLD, wait(2) without __WALL
// or exit status ever shows. With a refusals socket, always OwnImage.
enum class ProxyStart { OwnImage, CallersImage };

// A caller that started the proxy with ProxyStart::CallersImage calls arm_for_exec right before
// its execve, with nothing allocated or locked after it (only system calls), and
// disarm_after_exec if the execve returned: the proxy then serves only once the caller has left
// its image by execve, and ends at once if the caller ended any other way. Harmless elsewhere.
void arm_for_exec() noexcept;
void disarm_after_exec() noexcept;

// Starts the proxy for `allow` (canonical patterns), serving `listen_fds` at once, or, with
// `channel` >= 0, the listeners that arrive on that socket (SCM_RIGHTS); it lives until this
// process ends. With `refusals` >= 0 (a seqpacket socket whose peer is `run`), it also sends each
// refused host there as one record, `HOST:PORT\n` (never waiting: one that does not fit is
// counted, and the count sent last, `dropped N\n`), and ends when the peer shuts its side down
// or goes. The descriptors stay open here;
// the caller closes them. false with `why`.
bool start_proxy(const SharedList& allow, const std::vector<int>& listen_fds, int channel, int refusals,
                 std::string& why, ProxyStart how = ProxyStart::OwnImage);

// The proxy's own process, `dsh-confine __proxy OWNER CHANNEL REFUSALS LISTENERS -- PATTERN...`
// as start_proxy executes it (descriptors by number, "-" for none, LISTENERS comma-separated):
// serves until OWNER (a pidfd) ends. 0 when it ended so, 1 when the proxy failed, 125 on bad
// arguments. Not typed by hand.
int serve_proxy(int argc, char** argv);

// A TCP socket listening on the loopback address of `family` (AF_INET or AF_INET6) and `port`
// (0: the kernel picks), close-on-exec; -1 with `why`.
int loopback_listener(int family, std::uint16_t port, std::string& why);

// The port a socket listens on, or 0.
std::uint16_t listening_port(int fd);

// Sends `fds` over `channel` in one message, then closes the channel: false with `why`.
bool send_listeners(int channel, const std::vector<int>& fds, std::string& why);

// The proxy variables every client reads, pointing at the proxy on 127.0.0.1:`port`: HTTP_PROXY,
// HTTPS_PROXY, ALL_PROXY (SOCKS5 with remote resolution), their lower-case forms, NO_PROXY for
// loopback, and Java's system properties appended to JAVA_TOOL_OPTIONS.
void set_proxy_environment(std::uint16_t port);

// A bubblewrap plan in the `hosts` state: the proxy started with a socket pair whose other end
// the stage receives (`--proxy-fd N`, inserted into the stage's arguments in `bwrap_argv` here,
// where the descriptor's number is known). Returns that end (close-on-exec: the caller passes it
// to bubblewrap alone), or -1 with `why`. `refusals` as for start_proxy.
int start_bwrap_proxy(const std::vector<std::string>& allow, std::vector<std::string>& bwrap_argv, int refusals,
                      std::string& why, ProxyStart how = ProxyStart::OwnImage);

// The launcher of such a plan (`dsh-confine net-proxy`): start_bwrap_proxy, then `bwrap_argv`
// executed. Returns only on failure, with 125 and the message printed.
int exec_with_proxy(const std::vector<std::string>& allow, std::vector<std::string> bwrap_argv);

}  // namespace dsh::proxy
