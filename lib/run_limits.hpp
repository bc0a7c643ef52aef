// The time and resource limits of one `run`: their grammar (durations, sizes, counts), the
// `--limit NAME=VALUE` form, and how each limit is enforced on a host, as data. What the host
// offers (a cgroup of the call's own, rlimits) is found by platform/; which mechanism each limit
// then gets, and what is left unenforced, is decided here.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "error.hpp"

namespace dsh {

using Milliseconds = std::chrono::milliseconds;

// The limits `--limit` and `[run.limits]` know, in the order they are listed and reported.
enum class LimitName { Memory, Pids, Cpu, Fsize };
std::string_view to_string(LimitName name);
const std::vector<std::string>& limit_names();

struct RunLimits {
    std::optional<std::uint64_t> memory;  // bytes, for the whole tree where a cgroup counts it
    std::optional<std::uint64_t> pids;    // processes (and threads) at once
    std::optional<Milliseconds> cpu;      // CPU time
    std::optional<std::uint64_t> fsize;   // bytes: the largest file the tree may write

    bool empty() const { return !memory && !pids && !cpu && !fsize; }
    // The value of `name` in its unit (bytes, processes, milliseconds of CPU time), when set.
    std::optional<std::uint64_t> value(LimitName name) const;
    void set(LimitName name, std::uint64_t value);
};

// What one `run` is bounded by: the config's [run] and [run.limits], then its own options.
struct RunBounds {
    std::optional<Milliseconds> timeout;
    std::optional<Milliseconds> killAfter;  // unset: kDefaultKillAfter
    RunLimits limits;
};
inline constexpr Milliseconds kDefaultKillAfter{5000};

// "500ms", "30s", "5m", "1h", or a bare number of seconds: a whole number above zero, at most a
// year. The reason otherwise, naming the text and what is accepted.
Expected<Milliseconds> parse_duration(std::string_view text);
// A whole number of bytes, or with K, M, G or T (binary: 1K = 1024; lower case too), above zero.
Expected<std::uint64_t> parse_size(std::string_view text);
// The value of one limit, as `--limit NAME=VALUE` and [run.limits] give it as text.
Expected<std::uint64_t> parse_limit_value(LimitName name, std::string_view text);
std::optional<LimitName> parse_limit_name(std::string_view text);
// The largest `pids` a cgroup takes (the kernel's PID_MAX_LIMIT).
inline constexpr std::uint64_t kMaxPids = 4194304;

// One `--limit NAME=VALUE` into `limits` (USAGE when malformed, unknown or given twice, with the
// text and what is accepted). `given` collects the names seen on this command line.
void apply_limit_option(std::string_view assignment, RunLimits& limits, std::vector<LimitName>& given);

// "1s", "500ms", "5m" ...: a duration as the grammar writes it, in its largest whole unit.
std::string duration_text(Milliseconds duration);
// "2G", "512M", "1000": a size in its largest whole binary unit.
std::string size_text(std::uint64_t bytes);
// The value of `name` as it was given ("2G", "512", "10m").
std::string limit_value_text(LimitName name, std::uint64_t value);

// How a limit is enforced: by a cgroup of the call's own, for the whole tree (v2 or v1), by an
// rlimit set on each process of the tree, or not at all.
enum class LimitMechanism { CgroupV2, CgroupV1, Rlimit, None };
std::string_view to_string(LimitMechanism mechanism);  // cgroup-v2, cgroup-v1, rlimit, none
// What the mechanism bounds: the whole tree, each process, each file written, or nothing.
enum class LimitScope { Tree, Process, File, None };
std::string_view to_string(LimitScope scope);  // tree, process, file, none

struct LimitEnforcement {
    LimitName name = LimitName::Memory;
    std::uint64_t value = 0;
    LimitMechanism mechanism = LimitMechanism::None;
    LimitScope scope = LimitScope::None;
    std::string note;  // what the mechanism means here, or why no cgroup could count it
};

// What the host offers a call: for each of memory, pids and CPU time, the cgroup version that
// counts it for the call's tree, or why none could be made.
struct CgroupOffer {
    struct Answer {
        std::optional<LimitMechanism> mechanism;  // CgroupV2 or CgroupV1
        std::string whyNot;                       // when there is none (empty: none was asked for)
    };
    Answer memory, pids, cpu;
};

// The rlimits a system enforces: Linux all three, macOS CPU time and file size (it does not
// enforce an address-space limit), Windows none.
struct RlimitSupport {
    bool addressSpace = false, cpu = false, fileSize = false;
};

// Each asked limit and its mechanism, in limit_names() order. Best first: memory and pids from
// the cgroup; CPU time from the cgroup's accounting, which `run` watches, else RLIMIT_CPU on each
// process; memory without a cgroup as RLIMIT_AS, the address space of each process; pids has no
// safe rlimit (RLIMIT_NPROC counts all of the user's processes) and goes unenforced; fsize is
// RLIMIT_FSIZE, which bounds each file written, wherever there are rlimits (POSIX systems).
std::vector<LimitEnforcement> decide_limits(const RunLimits& limits, const CgroupOffer& offer, RlimitSupport rlimits);

// One line on how a limit is enforced: "limit memory=1G: cgroup-v1, for the whole tree: ...",
// or for one nothing enforces "limit pids=64: not enforced: ...".
std::string limit_line(const LimitEnforcement& enforcement);

// The enforcement gap of each limit nothing enforces ("limit pids=64: not enforced: ..."): what
// the report's enforcementGaps and --require-full take it as. Weaker enforcement (an rlimit per
// process) is not a gap: each LimitEnforcement says its scope.
std::vector<std::string> limit_gaps(const std::vector<LimitEnforcement>& enforcement);

}  // namespace dsh
