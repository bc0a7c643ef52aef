// run's cgroup (platform/linux/cgroup.cpp) against directories laid out like the mounted
// hierarchies: the parsing of /proc/self/cgroup and mountinfo, where the group is made, the
// files it writes, the counters it reads, and the leftovers of ended calls it removes. This is
// the only place the v2 memory and pids code runs in CI: the project's machines mount those
// controllers as v1 (the e2e tests make real v1 groups, and a real v2 group for CPU time).
#include "platform/linux/cgroup.hpp"

#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "temp_dir.hpp"

namespace dsh::cgroup {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::string slurp(const std::string& path) {
    std::ifstream in(path);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

void put(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(CgroupParse, ProcSelfCgroupGivesEachHierarchyAndPath) {
    const auto members = parse_proc_cgroup("12:pids:/user.slice\n4:cpu,cpuacct:/\n1:name=systemd:/init.scope\n0::/user.slice/a b\nbad\n");
    ASSERT_EQ(members.size(), 4U);
    EXPECT_FALSE(members[0].v2);
    EXPECT_EQ(members[0].controllers, std::vector<std::string>{"pids"});
    EXPECT_EQ(members[0].path, "/user.slice");
    EXPECT_EQ(members[1].controllers, (std::vector<std::string>{"cpu", "cpuacct"}));
    EXPECT_TRUE(members[3].v2);
    EXPECT_TRUE(members[3].controllers.empty());
    EXPECT_EQ(members[3].path, "/user.slice/a b");
}

TEST(CgroupParse, MountinfoGivesCgroupMountsWithTheirRootAndOptions) {
    const auto mounts = parse_mountinfo(
        "22 1 0:21 / /proc rw,nosuid - proc proc rw\n"
        "31 30 0:28 / /sys/fs/cgroup/memory rw,relatime shared:9 - cgroup cgroup rw,memory\n"
        "40 30 0:37 /sub /sys/fs/cgroup/uni\\040fied rw,relatime - cgroup2 cgroup2 rw,nsdelegate\n");
    ASSERT_EQ(mounts.size(), 2U);
    EXPECT_FALSE(mounts[0].v2);
    EXPECT_EQ(mounts[0].mountPoint, "/sys/fs/cgroup/memory");
    EXPECT_EQ(mounts[0].root, "/");
    EXPECT_EQ(mounts[0].options, (std::vector<std::string>{"rw", "memory"}));
    EXPECT_TRUE(mounts[1].v2);
    EXPECT_EQ(mounts[1].mountPoint, "/sys/fs/cgroup/uni fied");
    EXPECT_EQ(mounts[1].root, "/sub");
}

// The same parser for other file systems, by type: procfs's options (hidepid, which the Landlock
// runner reads), in the order the lines give the mounts.
TEST(CgroupParse, MountinfoGivesTheMountsOfTheTypesAsked) {
    const auto mounts = parse_mountinfo(
        "22 1 0:21 / /proc rw,nosuid - proc proc rw\n"
        "31 30 0:28 / /sys/fs/cgroup/memory rw,relatime shared:9 - cgroup cgroup rw,memory\n"
        "45 22 0:50 / /proc rw,relatime - proc proc rw,hidepid=invisible\n",
        {"proc"});
    ASSERT_EQ(mounts.size(), 2U);
    EXPECT_EQ(mounts[0].mountPoint, "/proc");
    EXPECT_EQ(mounts[0].options, (std::vector<std::string>{"rw"}));
    EXPECT_EQ(mounts[1].options, (std::vector<std::string>{"rw", "hidepid=invisible"}));
}

// What cgroupfs puts in a group it makes, as a stand-in for the kernel: empty limit files and
// zeroed counters.
int make_like_cgroupfs(int parent, const char* name, bool v2) {
    if (mkdirat(parent, name, 0755) != 0) return -1;
    const std::vector<std::pair<const char*, const char*>> v2_files = {
        {"cgroup.procs", ""},  {"cgroup.subtree_control", ""}, {"memory.max", "max\n"}, {"memory.swap.max", "max\n"},
        {"memory.events", "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n"},
        {"pids.max", "max\n"}, {"pids.events", "max 0\n"}, {"cpu.stat", "usage_usec 0\nuser_usec 0\nsystem_usec 0\n"}};
    const std::vector<std::pair<const char*, const char*>> v1_files = {
        {"cgroup.procs", ""}, {"memory.limit_in_bytes", ""}, {"memory.memsw.limit_in_bytes", ""},
        {"memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n"}, {"pids.max", "max\n"},
        {"pids.events", "max 0\n"}, {"cpuacct.usage", "0\n"}};
    const int dir = openat(parent, name, O_RDONLY | O_DIRECTORY);
    for (const auto& [file, text] : v2 ? v2_files : v1_files) {
        const int fd = openat(dir, file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (write(fd, text, std::strlen(text)) < 0) return -1;
        close(fd);
    }
    close(dir);
    return 0;
}

RunLimits every_limit() {
    RunLimits limits;
    limits.memory = 64 << 20;
    limits.pids = 32;
    limits.cpu = 1500ms;
    limits.fsize = 1 << 20;
    return limits;
}

// A v2 host as systemd lays out a user's session: the process in a scope, which passes nothing on,
// below a delegated slice that passes memory and pids on.
class V2Host : public ::testing::Test {
protected:
    unit::TempDir root;
    std::string mount = root.dir("sys/fs/cgroup");
    std::string slice = root.dir("sys/fs/cgroup/user.slice/app.slice");
    std::string scope = root.dir("sys/fs/cgroup/user.slice/app.slice/term.scope");

    void SetUp() override {
        put(mount + "/cgroup.controllers", "cpuset cpu io memory pids\n");
        put(slice + "/cgroup.subtree_control", "memory pids\n");
        put(slice + "/cgroup.procs", "");
        put(scope + "/cgroup.subtree_control", "\n");
        put(scope + "/cgroup.procs", "4242\n");
    }
    Sources sources() const {
        return Sources{"0::/user.slice/app.slice/term.scope\n",
                       "40 30 0:37 / /sys/fs/cgroup rw,relatime - cgroup2 cgroup2 rw,nsdelegate\n", root.root(),
                       [](int parent, const char* name) { return make_like_cgroupfs(parent, name, true); }};
    }
};

TEST_F(V2Host, TheGroupIsMadeInTheNearestPlaceThatPassesTheControllersOnWithItsLimits) {
    const CallGroup group = CallGroup::make(every_limit(), sources());
    EXPECT_EQ(group.offer().memory.mechanism, LimitMechanism::CgroupV2);
    EXPECT_EQ(group.offer().pids.mechanism, LimitMechanism::CgroupV2);
    EXPECT_EQ(group.offer().cpu.mechanism, LimitMechanism::CgroupV2);
    ASSERT_EQ(group.paths().size(), 1U);
    const std::string made = group.paths()[0];
    EXPECT_EQ(fs::path(made).parent_path().string(), slice) << "the scope passes no controller on: " << made;
    EXPECT_EQ(fs::path(made).filename().string().rfind("dsh-confine-", 0), 0U) << made;
    EXPECT_EQ(slurp(made + "/memory.max"), std::to_string(64 << 20));
    EXPECT_EQ(slurp(made + "/memory.swap.max"), "0");
    EXPECT_EQ(slurp(made + "/pids.max"), "32");

    // The runner's process joins by writing "0" (itself) to the one cgroup.procs.
    ASSERT_EQ(group.procs_fds().size(), 1U);
    ASSERT_EQ(write(group.procs_fds()[0], "0", 1), 1);
    EXPECT_EQ(slurp(made + "/cgroup.procs"), "0");

    EXPECT_EQ(group.cpu_time_ns(), 0U);
    put(made + "/cpu.stat", "usage_usec 1250000\nuser_usec 1000000\nsystem_usec 250000\n");
    EXPECT_EQ(group.cpu_time_ns(), std::uint64_t{1250000} * 1000);

    EXPECT_FALSE(group.reached());
    put(made + "/pids.events", "max 7\n");
    EXPECT_EQ(group.reached(), LimitName::Pids);
    put(made + "/memory.events", "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\noom_group_kill 0\n");
    EXPECT_EQ(group.reached(), LimitName::Memory) << "an OOM kill says more than a refused fork";
}

TEST_F(V2Host, CpuTimeAloneNeedsNoControllerAndUsesTheProcesssOwnGroup) {
    RunLimits limits;
    limits.cpu = 10s;
    const CallGroup group = CallGroup::make(limits, sources());
    EXPECT_EQ(group.offer().cpu.mechanism, LimitMechanism::CgroupV2);
    ASSERT_EQ(group.paths().size(), 1U);
    EXPECT_EQ(fs::path(group.paths()[0]).parent_path().string(), scope);
    EXPECT_FALSE(group.offer().memory.mechanism);
}

TEST_F(V2Host, NoPlacePassingTheControllersOnLeavesThemWithoutACgroupAndSaysWhy) {
    put(slice + "/cgroup.subtree_control", "memory\n");
    RunLimits limits;
    limits.pids = 32;
    const CallGroup group = CallGroup::make(limits, sources());
    EXPECT_FALSE(group.offer().pids.mechanism);
    EXPECT_TRUE(group.paths().empty());
    EXPECT_TRUE(contains(group.offer().pids.whyNot, scope + " does not pass the pids controller on")) << group.offer().pids.whyNot;
}

TEST_F(V2Host, GroupsLeftByEndedCallsAreRemovedAndALiveOnesAreKept) {
    char link[64] = {};
    ASSERT_GT(readlink("/proc/self/ns/pid", link, sizeof link - 1), 0);
    const std::string text(link);
    const std::string pidns = text.substr(text.find('[') + 1, text.find(']') - text.find('[') - 1);
    pid_t dead = 4194000;
    while (dead > 1 && !(kill(dead, 0) != 0 && errno == ESRCH)) --dead;
    const std::string stale = slice + "/dsh-confine-" + pidns + "-" + std::to_string(dead) + "-AAAAAA";
    const std::string alive = slice + "/dsh-confine-" + pidns + "-" + std::to_string(getpid()) + "-BBBBBB";
    const std::string other = slice + "/dsh-confine-1-" + std::to_string(dead) + "-CCCCCC";  // another PID namespace
    for (const auto& dir : {stale, alive, other}) fs::create_directory(dir);
    RunLimits limits;
    limits.memory = 1 << 30;
    const CallGroup group = CallGroup::make(limits, sources());
    EXPECT_FALSE(fs::exists(stale));
    EXPECT_TRUE(fs::exists(alive));
    EXPECT_TRUE(fs::exists(other));
}

TEST(V1Host, EachControllerGetsAGroupInItsOwnHierarchyBelowTheProcesssGroup) {
    unit::TempDir root;
    const std::string memory = root.dir("sys/fs/cgroup/memory/job/42");
    const std::string pids = root.dir("sys/fs/cgroup/pids");
    const std::string cpuacct = root.dir("sys/fs/cgroup/cpu,cpuacct");
    root.dir("sys/fs/cgroup/unified");  // the empty v2 hierarchy of a hybrid host; not writable here
    const Sources sources{"5:memory:/job/42\n4:pids:/\n3:cpu,cpuacct:/\n0::/\n",
                          "31 30 0:28 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
                          "38 30 0:35 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n"
                          "32 30 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n",
                          root.root(), [](int parent, const char* name) { return make_like_cgroupfs(parent, name, false); }};
    const CallGroup group = CallGroup::make(every_limit(), sources);
    EXPECT_EQ(group.offer().memory.mechanism, LimitMechanism::CgroupV1);
    EXPECT_EQ(group.offer().pids.mechanism, LimitMechanism::CgroupV1);
    EXPECT_EQ(group.offer().cpu.mechanism, LimitMechanism::CgroupV1);
    ASSERT_EQ(group.paths().size(), 3U);
    EXPECT_EQ(fs::path(group.paths()[0]).parent_path().string(), memory);
    EXPECT_EQ(fs::path(group.paths()[1]).parent_path().string(), pids);
    EXPECT_EQ(fs::path(group.paths()[2]).parent_path().string(), cpuacct);
    EXPECT_EQ(slurp(group.paths()[0] + "/memory.limit_in_bytes"), std::to_string(64 << 20));
    EXPECT_EQ(slurp(group.paths()[0] + "/memory.memsw.limit_in_bytes"), std::to_string(64 << 20));
    EXPECT_EQ(slurp(group.paths()[1] + "/pids.max"), "32");
    EXPECT_EQ(group.procs_fds().size(), 3U);
    put(group.paths()[2] + "/cpuacct.usage", "2000000000\n");
    EXPECT_EQ(group.cpu_time_ns(), 2000000000U);
    put(group.paths()[0] + "/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n");
    EXPECT_EQ(group.reached(), LimitName::Memory);
}

TEST(V1Host, AHierarchyThatIsNotMountedIsNamed) {
    unit::TempDir root;
    root.dir("sys/fs/cgroup/memory");
    const Sources sources{"5:memory:/\n", "31 30 0:28 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n", root.root(),
                          [](int parent, const char* name) { return make_like_cgroupfs(parent, name, false); }};
    RunLimits limits;
    limits.pids = 10;
    const CallGroup group = CallGroup::make(limits, sources);
    EXPECT_FALSE(group.offer().pids.mechanism);
    EXPECT_EQ(group.offer().pids.whyNot, "no cgroup hierarchy has the pids controller");
}

}  // namespace
}  // namespace dsh::cgroup
