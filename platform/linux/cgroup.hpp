// A cgroup of `run`'s own call, so that its memory and pids limits count the whole tree and its
// CPU time can be watched for the whole tree. The group is made beside or below this process's
// own (from /proc/self/cgroup and /proc/self/mountinfo): in the cgroup v2 hierarchy where it has
// the controllers (a delegated subtree: root, or a systemd user slice), otherwise in the v1
// memory, pids and cpuacct hierarchies of a hybrid host. The runner's process joins it before it
// becomes the runner (it writes "0" to each group's cgroup.procs), so everything the command
// starts is in it from its first instant; the group is removed once the tree is gone.
//
// What it does not cover: a host where this user may make no group (an unprivileged user without
// a delegated v2 subtree: v1 is never delegated), and a controller that no hierarchy has or that
// the nearest writable v2 group does not pass on (cgroup.subtree_control). Those limits fall back
// to rlimits or go unenforced (lib/run_limits.hpp decides, and names the gaps).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "../../lib/run_limits.hpp"

namespace dsh::cgroup {

// One line of /proc/self/cgroup: the hierarchy's controllers (none for v2: "0::PATH") and this
// process's group in it.
struct Membership {
    bool v2 = false;
    std::vector<std::string> controllers;
    std::string path;
};
std::vector<Membership> parse_proc_cgroup(std::string_view text);

// A mount in /proc/self/mountinfo of one of `types` (cgroup file systems unless told): where it
// is mounted, which directory of its file system is its root there, cgroup v2 or not, and its
// file system's options (a cgroup v1's controllers among them; procfs's hidepid), in the order
// the lines give them (a later mount at the same point is on top).
struct Mount {
    std::string mountPoint;
    std::string root;
    bool v2 = false;
    std::vector<std::string> options;
};
std::vector<Mount> parse_mountinfo(std::string_view text, const std::vector<std::string_view>& types = {"cgroup", "cgroup2"});

// Where the groups are looked for, and how one is made. On a host: /proc/self's texts, no prefix,
// and mkdirat, which on cgroupfs makes the group with its interface files. A test gives texts of
// its own, a prefix (a directory laid out like the mounted hierarchies) and a mkdirat that also
// lays out the files the kernel would make.
struct Sources {
    std::string procSelfCgroup;
    std::string mountinfo;
    std::string prefix;  // put before every mount point
    std::function<int(int parent, const char* name)> makeDirectory;  // mkdirat's result and errno
};
Sources host_sources();

// The groups of one call, one per hierarchy used (v2: one; v1: one per controller's hierarchy).
// Made by make(); each is removed (rmdir, relative to its parent, opened without symlinks) when
// the object goes, which must be after the tree is gone.
class CallGroup {
public:
    // Makes what `limits` can use: memory and pids where a hierarchy has the controller, CPU-time
    // accounting (v2's cpu.stat, v1's cpuacct) where CPU time is limited. Never fails: what could
    // not be made has no mechanism in offer(), and the reason.
    static CallGroup make(const RunLimits& limits, const Sources& sources);

    CallGroup() = default;
    CallGroup(CallGroup&& other) noexcept;
    CallGroup& operator=(CallGroup&& other) noexcept;
    CallGroup(const CallGroup&) = delete;
    CallGroup& operator=(const CallGroup&) = delete;
    ~CallGroup();

    const CgroupOffer& offer() const { return offer_; }
    // Each group's cgroup.procs, open for writing (close-on-exec): the runner's process writes "0"
    // to each, which moves it in.
    std::vector<int> procs_fds() const;
    // The groups' directories, for messages and tests.
    std::vector<std::string> paths() const;
    // The CPU time the tree used so far, in nanoseconds, where a group counts it.
    std::optional<std::uint64_t> cpu_time_ns() const;
    // The limit whose own counter shows it was reached: memory (an OOM kill in the group: v2
    // memory.events oom_kill, v1 memory.oom_control oom_kill), then pids (a fork refused:
    // pids.events max). Read once the tree is gone.
    std::optional<LimitName> reached() const;

private:
    struct Node {
        std::string path;  // for messages
        std::string name;  // in its parent
        int parent = -1;
        int dir = -1;
        int procs = -1;
        bool v2 = false;
        bool memory = false, pids = false, cpu = false;
    };
    std::string add_group(const std::string& place, Node node, const std::vector<std::string>& controllers,
                          const RunLimits& limits, const Sources& sources);
    static void drop(Node& node);
    void remove();
    std::vector<Node> nodes_;
    CgroupOffer offer_;
};

}  // namespace dsh::cgroup
