#include "host.hpp"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <string_view>
#include <utility>

#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "landlock_abi.hpp"

namespace dsh::linux_host {
namespace {

// Read once, from the link's text ("pid:[4026531836]"), which the kernel writes without reaching
// the namespace's inode as stat would. A process's own PID namespace never changes.
const std::string& pid_namespace() {
    static const std::string id = [] {
        char link[64] = {};
        if (readlink("/proc/self/ns/pid", link, sizeof link - 1) <= 0) return std::string("0");
        const char* open = std::strchr(link, '[');
        const char* close = open ? std::strchr(open, ']') : nullptr;
        if (!close || close == open + 1) return std::string("0");
        return std::string(open + 1, close);
    }();
    return id;
}

}  // namespace

std::string owned_name(const char* prefix) {
    static constexpr char kLetters[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    unsigned char bytes[6] = {};
    if (getrandom(bytes, sizeof bytes, 0) != static_cast<ssize_t>(sizeof bytes)) return "";
    std::string name = prefix + pid_namespace() + "-" + std::to_string(getpid()) + "-";
    for (unsigned char byte : bytes) name += kLetters[byte % (sizeof kLetters - 1)];
    return name;
}

bool owner_ended(const char* name, const char* prefix) {
    const std::size_t length = std::strlen(prefix);
    if (std::strncmp(name, prefix, length) != 0) return false;
    const std::string_view rest(name + length);
    const std::size_t dash = rest.find('-');
    if (dash == std::string_view::npos || rest.substr(0, dash) != pid_namespace()) return false;
    const char* pid = name + length + dash + 1;
    char* end = nullptr;
    const long number = std::strtol(pid, &end, 10);
    if (end == pid || *end != '-' || number <= 0 || number > std::numeric_limits<pid_t>::max()) return false;
    return kill(static_cast<pid_t>(number), 0) != 0 && errno == ESRCH;
}

std::string kernel_release() {
    utsname name{};
    if (uname(&name) != 0) return "unknown";
    return name.release;
}

int landlock_abi(std::string* why) {
    // Asked once per process: a call asks three times (the usable check, the plan, the
    // runner's preparation), and the kernel's answer does not change while it runs.
    static const auto answer = [] {
        std::pair<int, std::string> out{0, ""};
        const long abi = syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
        if (abi >= 0) out.first = static_cast<int>(abi);
        else if (const int error = errno; error == ENOSYS)
            out.second = "the kernel has no Landlock (landlock_create_ruleset: ENOSYS)";
        else if (error == EOPNOTSUPP)
            out.second = "Landlock is disabled on this kernel (EOPNOTSUPP; see the lsm= boot parameter)";
        else
            out.second = std::string("landlock_create_ruleset: ") + std::strerror(error);
        return out;
    }();
    if (why != nullptr && answer.first == 0) *why = answer.second;
    return answer.first;
}

std::string sysctl(const std::string& name) {
    std::ifstream in("/proc/sys/" + name);
    std::string line;
    if (!in || !std::getline(in, line)) return "-";
    return line;
}

std::string file_identity(const std::string& path) {
    struct stat st {};
    if (stat(path.c_str(), &st) != 0) return "missing";
    return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + ":" + std::to_string(st.st_size) + ":" +
           std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec) + ":" +
           std::to_string(st.st_mode);
}

std::string host_identity() {
    auto ns = [](const char* which) {
        char target[128] = {};
        const ssize_t n = readlink((std::string("/proc/self/ns/") + which).c_str(), target, sizeof target - 1);
        return n > 0 ? std::string(target, static_cast<std::size_t>(n)) : std::string("-");
    };
    return "kernel=" + kernel_release() + "\nuid=" + std::to_string(geteuid()) +
           "\nlandlock=" + std::to_string(landlock_abi()) +
           "\nunprivileged_userns_clone=" + sysctl("kernel/unprivileged_userns_clone") +
           "\nmax_user_namespaces=" + sysctl("user/max_user_namespaces") +
           "\napparmor_restrict_unprivileged_userns=" + sysctl("kernel/apparmor_restrict_unprivileged_userns") +
           "\nuserns=" + ns("user") + "\npidns=" + ns("pid") + "\nmntns=" + ns("mnt") + "\n" + confinement_context();
}

std::string confinement_context() {
    // no_new_privs and seccomp filters are what an enclosing sandbox (dsh-confine's own runners
    // among them) leaves on a process; a Landlock domain forbids mounting, so bubblewrap, usable
    // outside, fails inside one. A probe answer taken outside must not be trusted inside.
    std::ifstream status("/proc/self/status");
    std::string line, out;
    while (std::getline(status, line))
        if (line.rfind("NoNewPrivs:", 0) == 0 || line.rfind("Seccomp:", 0) == 0 || line.rfind("Seccomp_filters:", 0) == 0) {
            std::string value = line.substr(line.find(':') + 1);
            value.erase(0, value.find_first_not_of(" \t"));
            out += (out.empty() ? "" : "\n") + line.substr(0, line.find(':')) + "=" + value;
        }
    return out.empty() ? "status=-" : out;
}

}  // namespace dsh::linux_host
