#include "cgroup.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../posix/safe_path.hpp"
#include "host.hpp"

namespace dsh::cgroup {
namespace {

constexpr const char* kPrefix = "dsh-confine-";

std::vector<std::string> split(std::string_view text, char separator) {
    std::vector<std::string> out;
    std::size_t start = 0;
    while (start <= text.size()) {
        const std::size_t end = std::min(text.find(separator, start), text.size());
        out.emplace_back(text.substr(start, end - start));
        start = end + 1;
    }
    return out;
}

bool has(const std::vector<std::string>& items, std::string_view item) {
    return std::find(items.begin(), items.end(), item) != items.end();
}

// mountinfo writes space, tab, newline and backslash in paths as \ooo.
std::string unescape(std::string_view text) {
    const auto octal = [](char c) { return c >= '0' && c <= '7'; };
    std::string out;
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (text[i] == '\\' && i + 3 < text.size() && octal(text[i + 1]) && octal(text[i + 2]) && octal(text[i + 3])) {
            out += static_cast<char>((text[i + 1] - '0') * 64 + (text[i + 2] - '0') * 8 + (text[i + 3] - '0'));
            i += 3;
        } else {
            out += text[i];
        }
    }
    return out;
}

// The words of a space-separated list (cgroup.controllers, cgroup.subtree_control).
std::vector<std::string> words(const std::optional<std::string>& text) {
    std::vector<std::string> out;
    std::istringstream in(text.value_or(""));
    for (std::string word; in >> word;) out.push_back(word);
    return out;
}

std::string read_text(const char* path) {
    std::ifstream in(path);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

std::string errno_text(const std::string& what) { return what + ": " + std::strerror(errno); }

// The whole of a small file in `dir`, or nullopt.
std::optional<std::string> read_at(int dir, const char* name) {
    const int fd = openat(dir, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return std::nullopt;
    std::string text;
    char buffer[4096];
    ssize_t n = 0;
    while ((n = read(fd, buffer, sizeof buffer)) > 0) text.append(buffer, static_cast<std::size_t>(n));
    close(fd);
    if (n < 0) return std::nullopt;
    return text;
}

// As `echo VALUE > FILE` writes it (O_TRUNC changes nothing on cgroupfs).
bool write_at(int dir, const char* name, const std::string& value) {
    const int fd = openat(dir, name, O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return false;
    const bool done = write(fd, value.data(), value.size()) == static_cast<ssize_t>(value.size());
    const int error = errno;
    close(fd);
    errno = error;
    return done;
}

bool exists_at(int dir, const char* name) { return faccessat(dir, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0; }

// The number after `key` in a flat-keyed file ("oom_kill 3"), or nullopt.
std::optional<std::uint64_t> keyed(const std::optional<std::string>& text, std::string_view key) {
    if (!text) return std::nullopt;
    for (const auto& line : split(*text, '\n')) {
        if (line.size() <= key.size() || line.compare(0, key.size(), key) != 0 || line[key.size()] != ' ') continue;
        try {
            return std::stoull(line.substr(key.size() + 1));
        } catch (const std::exception&) {
            return std::nullopt;
        }
    }
    return std::nullopt;
}

// Removes the groups in `parent` that calls which have ended left behind (a `run` killed with
// SIGKILL cannot remove its own): rmdir only, which cgroupfs refuses for a group with a process.
void remove_stale(int parent) {
    const int copy = dup(parent);
    if (copy < 0) return;
    DIR* entries = fdopendir(copy);
    if (entries == nullptr) {
        close(copy);
        return;
    }
    std::vector<std::string> stale;
    while (dirent* entry = readdir(entries))
        if (linux_host::owner_ended(entry->d_name, kPrefix)) stale.emplace_back(entry->d_name);
    closedir(entries);
    for (const auto& name : stale) unlinkat(parent, name.c_str(), AT_REMOVEDIR);
}

// A hierarchy this process is in: where its own group is, and which controllers it has.
struct Hierarchy {
    std::string mountPoint;  // prefixed
    std::string ownGroup;    // prefixed
    bool v2 = false;
    std::vector<std::string> options;
};

std::vector<Hierarchy> hierarchies(const Sources& sources) {
    std::vector<Hierarchy> out;
    const auto memberships = parse_proc_cgroup(sources.procSelfCgroup);
    for (const Mount& mount : parse_mountinfo(sources.mountinfo)) {
        for (const Membership& member : memberships) {
            if (member.v2 != mount.v2) continue;
            if (!mount.v2) {
                bool all = !member.controllers.empty();
                for (const auto& controller : member.controllers) all = all && has(mount.options, controller);
                if (!all) continue;
            }
            // The own group is visible through this mount only below the mount's root.
            std::string rest;
            if (mount.root == "/") rest = member.path == "/" ? "" : member.path;
            else if (member.path == mount.root) rest = "";
            else if (member.path.rfind(mount.root + "/", 0) == 0) rest = member.path.substr(mount.root.size());
            else continue;
            Hierarchy h{sources.prefix + mount.mountPoint, sources.prefix + mount.mountPoint + rest, mount.v2, mount.options};
            if (std::none_of(out.begin(), out.end(), [&](const Hierarchy& o) { return o.ownGroup == h.ownGroup; }))
                out.push_back(std::move(h));
        }
    }
    return out;
}

const Hierarchy* v1_with(const std::vector<Hierarchy>& all, std::string_view controller) {
    for (const auto& h : all)
        if (!h.v2 && has(h.options, controller)) return &h;
    return nullptr;
}

const Hierarchy* v2_of(const std::vector<Hierarchy>& all) {
    for (const auto& h : all)
        if (h.v2) return &h;
    return nullptr;
}

}  // namespace

std::vector<Membership> parse_proc_cgroup(std::string_view text) {
    std::vector<Membership> out;
    for (const auto& line : split(text, '\n')) {
        const std::size_t first = line.find(':');
        const std::size_t second = first == std::string::npos ? first : line.find(':', first + 1);
        if (second == std::string::npos) continue;
        Membership m;
        m.v2 = line.compare(0, first, "0") == 0 && second == first + 1;
        if (!m.v2)
            for (auto& controller : split(std::string_view(line).substr(first + 1, second - first - 1), ','))
                if (!controller.empty()) m.controllers.push_back(std::move(controller));
        m.path = line.substr(second + 1);
        if (m.path.empty() || m.path.front() != '/') continue;
        out.push_back(std::move(m));
    }
    return out;
}

std::vector<Mount> parse_mountinfo(std::string_view text, const std::vector<std::string_view>& types) {
    std::vector<Mount> out;
    for (const auto& line : split(text, '\n')) {
        const auto fields = split(line, ' ');
        const auto dash = std::find(fields.begin(), fields.end(), "-");
        if (fields.size() < 7 || dash == fields.end() || fields.end() - dash < 4) continue;
        const std::string& type = *(dash + 1);
        if (std::find(types.begin(), types.end(), type) == types.end()) continue;
        out.push_back(Mount{unescape(fields[4]), unescape(fields[3]), type == "cgroup2", split(*(dash + 3), ',')});
    }
    return out;
}

Sources host_sources() {
    return Sources{read_text("/proc/self/cgroup"), read_text("/proc/self/mountinfo"), "",
                   [](int parent, const char* name) { return mkdirat(parent, name, 0755); }};
}

CallGroup::CallGroup(CallGroup&& other) noexcept : nodes_(std::move(other.nodes_)), offer_(std::move(other.offer_)) {
    other.nodes_.clear();
}

CallGroup& CallGroup::operator=(CallGroup&& other) noexcept {
    if (this != &other) {
        remove();
        nodes_ = std::move(other.nodes_);
        offer_ = std::move(other.offer_);
        other.nodes_.clear();
    }
    return *this;
}

CallGroup::~CallGroup() { remove(); }

void CallGroup::drop(Node& node) {
    if (node.procs >= 0) close(node.procs);
    if (node.dir >= 0) close(node.dir);
    // The tree is gone and reaped, so the group is empty; a process still on its way out of it
    // (cgroupfs answers EBUSY then) is given a few turns.
    for (int attempt = 0; !node.name.empty() && attempt < 100; ++attempt) {
        if (unlinkat(node.parent, node.name.c_str(), AT_REMOVEDIR) == 0 || errno != EBUSY) break;
        sched_yield();
    }
    if (node.parent >= 0) close(node.parent);
    node = Node{};
}

void CallGroup::remove() {
    for (Node& node : nodes_) drop(node);
    nodes_.clear();
}

// Makes a group in `place` for what `node` asks (its limits written, its cgroup.procs open) and
// adds it; the reason when it cannot.
std::string CallGroup::add_group(const std::string& place, Node node, const std::vector<std::string>& controllers,
                                 const RunLimits& limits, const Sources& sources) {
    const int parent = posix::open_no_symlinks(place, O_RDONLY | O_DIRECTORY);
    if (parent < 0) return errno_text(place);
    node.parent = parent;
    if (node.v2) {
        // The group's controllers come from its parent's subtree_control; moving the runner in
        // needs write access to the parent's cgroup.procs (the common ancestor of where it is
        // and where it goes).
        const auto enabled = words(read_at(parent, "cgroup.subtree_control"));
        for (const auto& controller : controllers)
            if (!has(enabled, controller)) {
                drop(node);
                return place + " does not pass the " + controller + " controller on to its children (cgroup.subtree_control)";
            }
        if (faccessat(parent, "cgroup.procs", W_OK, AT_EACCESS) != 0) {
            std::string why = errno_text("cannot move a process below " + place + " (its cgroup.procs)");
            drop(node);
            return why;
        }
    }
    remove_stale(parent);
    for (int attempt = 0; attempt < 100 && node.name.empty(); ++attempt) {
        std::string name = linux_host::owned_name(kPrefix);
        if (name.empty()) break;
        if (sources.makeDirectory(parent, name.c_str()) == 0) node.name = std::move(name);
        else if (errno != EEXIST) {
            std::string why = errno_text("cannot make a cgroup in " + place);
            drop(node);
            return why;
        }
    }
    if (node.name.empty()) {
        drop(node);
        return "no name for a cgroup in " + place;
    }
    node.path = place + "/" + node.name;
    node.dir = openat(parent, node.name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    std::string why;
    if (node.dir < 0) why = errno_text(node.path);
    // The limits, each in its hierarchy's file; swap, where the kernel accounts it, counts
    // against the same limit (v2: none allowed beside memory.max; v1: memory and swap together).
    const auto put = [&](const char* file, const std::string& value) {
        if (why.empty() && !write_at(node.dir, file, value)) why = errno_text("cannot write " + node.path + "/" + file);
    };
    if (node.memory && node.v2) {
        put("memory.max", std::to_string(*limits.memory));
        if (exists_at(node.dir, "memory.swap.max")) put("memory.swap.max", "0");
    } else if (node.memory) {
        put("memory.limit_in_bytes", std::to_string(*limits.memory));
        if (exists_at(node.dir, "memory.memsw.limit_in_bytes")) put("memory.memsw.limit_in_bytes", std::to_string(*limits.memory));
    }
    if (node.pids) put("pids.max", std::to_string(*limits.pids));
    if (why.empty()) {
        node.procs = openat(node.dir, "cgroup.procs", O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
        if (node.procs < 0) why = errno_text(node.path + "/cgroup.procs");
    }
    if (!why.empty()) {
        drop(node);
        return why;
    }
    nodes_.push_back(std::move(node));
    return "";
}

CallGroup CallGroup::make(const RunLimits& limits, const Sources& sources) {
    CallGroup group;
    const bool want_memory = limits.memory.has_value(), want_pids = limits.pids.has_value(), want_cpu = limits.cpu.has_value();
    if (!want_memory && !want_pids && !want_cpu) return group;
    const auto all = hierarchies(sources);
    CgroupOffer& offer = group.offer_;

    // A controller lives in one hierarchy: v2 where its root lists it (cgroup.controllers), else
    // the v1 hierarchy that has it. CPU time is v2's core accounting (cpu.stat, in every group)
    // where a v2 group can be made, else v1's cpuacct.
    const Hierarchy* v2 = v2_of(all);
    std::vector<std::string> in_v2;
    if (v2 != nullptr) {
        const int root = posix::open_no_symlinks(v2->mountPoint, O_RDONLY | O_DIRECTORY);
        if (root >= 0) {
            in_v2 = words(read_at(root, "cgroup.controllers"));
            close(root);
        }
    }
    const bool memory_in_v2 = want_memory && has(in_v2, "memory");
    const bool pids_in_v2 = want_pids && has(in_v2, "pids");
    if (v2 != nullptr && (memory_in_v2 || pids_in_v2 || want_cpu)) {
        std::vector<std::string> controllers;
        if (memory_in_v2) controllers.push_back("memory");
        if (pids_in_v2) controllers.push_back("pids");
        Node node;
        node.v2 = true;
        node.memory = memory_in_v2;
        node.pids = pids_in_v2;
        node.cpu = want_cpu;
        // The nearest group, this process's own first, that passes the controllers on and may be
        // written: for root any, otherwise a delegated subtree (a systemd user slice).
        std::string why;
        for (std::string place = v2->ownGroup;;) {
            const std::string failed = group.add_group(place, node, controllers, limits, sources);
            if (failed.empty()) {
                why.clear();
                break;
            }
            if (why.empty()) why = failed;  // the nearest place's reason says most
            if (place.size() <= v2->mountPoint.size()) break;
            place = place.substr(0, place.rfind('/'));
        }
        const std::optional<LimitMechanism> made = why.empty() ? std::optional(LimitMechanism::CgroupV2) : std::nullopt;
        if (memory_in_v2) offer.memory = {made, why};
        if (pids_in_v2) offer.pids = {made, why};
        if (want_cpu) offer.cpu = {made, why};
    }
    const auto v1_group = [&](const char* controller, CgroupOffer::Answer& answer, bool memory, bool pids, bool cpu) {
        const Hierarchy* h = v1_with(all, controller);
        std::string why = std::string("no cgroup hierarchy has the ") + controller + " controller";
        if (h != nullptr) {
            Node node;
            node.memory = memory;
            node.pids = pids;
            node.cpu = cpu;
            why = group.add_group(h->ownGroup, node, {}, limits, sources);
        }
        if (why.empty()) answer = {LimitMechanism::CgroupV1, ""};
        else answer.whyNot = answer.whyNot.empty() ? why : answer.whyNot + "; " + why;
    };
    if (want_memory && !memory_in_v2) v1_group("memory", offer.memory, true, false, false);
    if (want_pids && !pids_in_v2) v1_group("pids", offer.pids, false, true, false);
    if (want_cpu && !offer.cpu.mechanism) v1_group("cpuacct", offer.cpu, false, false, true);
    return group;
}

std::vector<int> CallGroup::procs_fds() const {
    std::vector<int> out;
    for (const auto& node : nodes_) out.push_back(node.procs);
    return out;
}

std::vector<std::string> CallGroup::paths() const {
    std::vector<std::string> out;
    for (const auto& node : nodes_) out.push_back(node.path);
    return out;
}

std::optional<std::uint64_t> CallGroup::cpu_time_ns() const {
    for (const auto& node : nodes_) {
        if (!node.cpu) continue;
        if (node.v2) {
            const auto usec = keyed(read_at(node.dir, "cpu.stat"), "usage_usec");
            return usec ? std::optional<std::uint64_t>(*usec * 1000) : std::nullopt;
        }
        const auto text = read_at(node.dir, "cpuacct.usage");
        try {
            return text ? std::optional<std::uint64_t>(std::stoull(*text)) : std::nullopt;
        } catch (const std::exception&) {
            return std::nullopt;
        }
    }
    return std::nullopt;
}

std::optional<LimitName> CallGroup::reached() const {
    for (const auto& node : nodes_)
        if (node.memory && keyed(read_at(node.dir, node.v2 ? "memory.events" : "memory.oom_control"), "oom_kill").value_or(0) > 0)
            return LimitName::Memory;
    for (const auto& node : nodes_)
        if (node.pids && keyed(read_at(node.dir, "pids.events"), "max").value_or(0) > 0) return LimitName::Pids;
    return std::nullopt;
}

}  // namespace dsh::cgroup
