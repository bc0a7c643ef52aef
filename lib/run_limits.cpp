#include "run_limits.hpp"

#include <algorithm>
#include <limits>

#include "config.hpp"

namespace dsh {
namespace {

constexpr std::uint64_t kSecondMs = 1000, kMinuteMs = 60 * kSecondMs, kHourMs = 60 * kMinuteMs;
constexpr std::uint64_t kMaxDurationMs = 8784 * kHourMs;  // 366 days

// The whole number `digits` (decimal digits only, at least one), or nullopt on anything else or
// on overflow.
std::optional<std::uint64_t> whole(std::string_view digits) {
    if (digits.empty()) return std::nullopt;
    std::uint64_t value = 0;
    for (char c : digits) {
        if (c < '0' || c > '9') return std::nullopt;
        const auto digit = static_cast<std::uint64_t>(c - '0');
        if (value > (std::numeric_limits<std::uint64_t>::max() - digit) / 10) return std::nullopt;
        value = value * 10 + digit;
    }
    return value;
}

// The digits at the front of `text`, and the rest.
std::pair<std::string_view, std::string_view> split_number(std::string_view text) {
    std::size_t end = 0;
    while (end < text.size() && text[end] >= '0' && text[end] <= '9') ++end;
    return {text.substr(0, end), text.substr(end)};
}

const char* const kDurations = "a whole number with a unit, ms, s, m or h (500ms, 30s, 5m, 1h), or a bare number of seconds";
const char* const kSizes = "a whole number of bytes, or with K, M, G or T (binary: 1K = 1024)";

// Appended piece by piece: GCC 12 at -O3 reads "'" + std::string(text) as an overlapping copy
// (a -Wrestrict false positive), which a Release build with DSH_WERROR would stop at.
std::string quoted(std::string_view text) {
    std::string out;
    out.reserve(text.size() + 2);
    out += '\'';
    out += text;
    out += '\'';
    return out;
}

}  // namespace

std::string_view to_string(LimitName name) {
    switch (name) {
        case LimitName::Memory: return "memory";
        case LimitName::Pids: return "pids";
        case LimitName::Cpu: return "cpu";
        case LimitName::Fsize: return "fsize";
    }
    return "memory";
}

const std::vector<std::string>& limit_names() {
    static const std::vector<std::string> names = {"memory", "pids", "cpu", "fsize"};
    return names;
}

std::optional<LimitName> parse_limit_name(std::string_view text) {
    for (LimitName name : {LimitName::Memory, LimitName::Pids, LimitName::Cpu, LimitName::Fsize})
        if (text == to_string(name)) return name;
    return std::nullopt;
}

std::optional<std::uint64_t> RunLimits::value(LimitName name) const {
    switch (name) {
        case LimitName::Memory: return memory;
        case LimitName::Pids: return pids;
        case LimitName::Cpu: return cpu ? std::optional<std::uint64_t>(static_cast<std::uint64_t>(cpu->count())) : std::nullopt;
        case LimitName::Fsize: return fsize;
    }
    return std::nullopt;
}

void RunLimits::set(LimitName name, std::uint64_t value) {
    switch (name) {
        case LimitName::Memory: memory = value; break;
        case LimitName::Pids: pids = value; break;
        case LimitName::Cpu: cpu = Milliseconds(static_cast<Milliseconds::rep>(value)); break;
        case LimitName::Fsize: fsize = value; break;
    }
}

Expected<Milliseconds> parse_duration(std::string_view text) {
    const auto [digits, unit] = split_number(text);
    const auto number = whole(digits);
    std::uint64_t scale = 0;
    if (unit.empty() || unit == "s") scale = kSecondMs;
    else if (unit == "ms") scale = 1;
    else if (unit == "m") scale = kMinuteMs;
    else if (unit == "h") scale = kHourMs;
    if (!number || scale == 0)
        return Expected<Milliseconds>::failure(quoted(text) + " is not a duration; durations: " + kDurations);
    if (*number == 0) return Expected<Milliseconds>::failure(quoted(text) + " is zero; a duration must be above zero");
    if (*number > kMaxDurationMs / scale)
        return Expected<Milliseconds>::failure(quoted(text) + " is more than a year; a duration may be at most 8784h");
    return Milliseconds(static_cast<Milliseconds::rep>(*number * scale));
}

Expected<std::uint64_t> parse_size(std::string_view text) {
    const auto [digits, unit] = split_number(text);
    const auto number = whole(digits);
    unsigned shift = 64;
    if (unit.empty()) shift = 0;
    else if (unit == "K" || unit == "k") shift = 10;
    else if (unit == "M" || unit == "m") shift = 20;
    else if (unit == "G" || unit == "g") shift = 30;
    else if (unit == "T" || unit == "t") shift = 40;
    if (!number || shift == 64) return Expected<std::uint64_t>::failure(quoted(text) + " is not a size; sizes: " + kSizes);
    if (*number == 0) return Expected<std::uint64_t>::failure(quoted(text) + " is zero; a size must be above zero");
    // Kept below 2^63: the kernel's limits are signed underneath.
    if (*number > (std::numeric_limits<std::uint64_t>::max() >> 1 >> shift))
        return Expected<std::uint64_t>::failure(quoted(text) + " is too large; a size must be below 2^63 bytes (8388608T)");
    return *number << shift;
}

Expected<std::uint64_t> parse_limit_value(LimitName name, std::string_view text) {
    switch (name) {
        case LimitName::Memory:
        case LimitName::Fsize: return parse_size(text);
        case LimitName::Cpu: {
            const auto duration = parse_duration(text);
            if (!duration) return Expected<std::uint64_t>::failure(duration.reason());
            return static_cast<std::uint64_t>(duration->count());
        }
        case LimitName::Pids: {
            const auto number = whole(text);
            if (!number)
                return Expected<std::uint64_t>::failure(quoted(text) + " is not a number of processes; pids takes a whole number");
            if (*number == 0) return Expected<std::uint64_t>::failure(quoted(text) + " is zero; pids must be above zero");
            if (*number > kMaxPids)
                return Expected<std::uint64_t>::failure(quoted(text) + " is more than the kernel's " +
                                                        std::to_string(kMaxPids) + " processes");
            return *number;
        }
    }
    return Expected<std::uint64_t>::failure("unknown limit");
}

void apply_limit_option(std::string_view assignment, RunLimits& limits, std::vector<LimitName>& given) {
    const std::string shown = quoted(assignment);
    const std::size_t eq = assignment.find('=');
    const std::string_view name_text = assignment.substr(0, eq);
    const auto name = parse_limit_name(name_text);
    if (!name) {
        std::string message = "--limit " + shown + ": unknown limit " + quoted(name_text);
        if (auto close = did_you_mean(name_text, limit_names())) message += " (did you mean '" + *close + "'?)";
        throw Error(code::Usage, message + "; limits: memory=SIZE, pids=N, cpu=DURATION, fsize=SIZE");
    }
    if (eq == std::string_view::npos || eq + 1 == assignment.size())
        throw Error(code::Usage, "--limit " + shown + " needs a value: --limit " + std::string(name_text) +
                                     (name == LimitName::Pids ? "=N" : name == LimitName::Cpu ? "=DURATION" : "=SIZE"));
    if (std::find(given.begin(), given.end(), *name) != given.end())
        throw Error(code::Usage, "--limit " + std::string(name_text) + " is given twice; give each limit once");
    const auto value = parse_limit_value(*name, assignment.substr(eq + 1));
    if (!value) throw Error(code::Usage, "--limit " + shown + ": " + value.reason());
    given.push_back(*name);
    limits.set(*name, *value);
}

std::string duration_text(Milliseconds duration) {
    const auto ms = static_cast<std::uint64_t>(duration.count());
    if (ms % kHourMs == 0) return std::to_string(ms / kHourMs) + "h";
    if (ms % kMinuteMs == 0) return std::to_string(ms / kMinuteMs) + "m";
    if (ms % kSecondMs == 0) return std::to_string(ms / kSecondMs) + "s";
    return std::to_string(ms) + "ms";
}

std::string size_text(std::uint64_t bytes) {
    static const char units[] = {'T', 'G', 'M', 'K'};
    for (unsigned i = 0; i < 4; ++i) {
        const unsigned shift = 40 - 10 * i;
        if (bytes % (std::uint64_t{1} << shift) == 0) return std::to_string(bytes >> shift) + units[i];
    }
    return std::to_string(bytes);
}

std::string limit_value_text(LimitName name, std::uint64_t value) {
    switch (name) {
        case LimitName::Memory:
        case LimitName::Fsize: return size_text(value);
        case LimitName::Cpu: return duration_text(Milliseconds(static_cast<Milliseconds::rep>(value)));
        case LimitName::Pids: return std::to_string(value);
    }
    return std::to_string(value);
}

std::string_view to_string(LimitMechanism mechanism) {
    switch (mechanism) {
        case LimitMechanism::CgroupV2: return "cgroup-v2";
        case LimitMechanism::CgroupV1: return "cgroup-v1";
        case LimitMechanism::Rlimit: return "rlimit";
        case LimitMechanism::None: return "none";
    }
    return "none";
}

std::string_view to_string(LimitScope scope) {
    switch (scope) {
        case LimitScope::Tree: return "tree";
        case LimitScope::Process: return "process";
        case LimitScope::File: return "file";
        case LimitScope::None: return "none";
    }
    return "none";
}

std::vector<LimitEnforcement> decide_limits(const RunLimits& limits, const CgroupOffer& offer, RlimitSupport rlimits) {
    std::vector<LimitEnforcement> out;
    // `rlimit_note`: the rlimit that stands in where no cgroup counts the limit, when the system
    // enforces one (null: there is none).
    const auto add = [&](LimitName name, const CgroupOffer::Answer& cgroup, const char* rlimit_note, const char* counted) {
        const auto value = limits.value(name);
        if (!value) return;
        LimitEnforcement e{name, *value, LimitMechanism::None, LimitScope::None, ""};
        const std::string no_cgroup = cgroup.whyNot.empty() ? "no cgroup of the call's own" : cgroup.whyNot;
        if (cgroup.mechanism) {
            e.mechanism = *cgroup.mechanism;
            e.scope = LimitScope::Tree;
            e.note = counted;
        } else if (rlimit_note != nullptr) {
            e.mechanism = LimitMechanism::Rlimit;
            e.scope = name == LimitName::Fsize ? LimitScope::File : LimitScope::Process;
            e.note = rlimit_note;
            if (name != LimitName::Fsize) e.note += " (" + no_cgroup + ")";
        } else if (name == LimitName::Pids) {
            e.note = no_cgroup + "; RLIMIT_NPROC would count every process of the user, not the call's";
        } else {
            e.note = no_cgroup + ", and this system enforces no rlimit for it";
        }
        out.push_back(std::move(e));
    };
    add(LimitName::Memory, offer.memory,
        rlimits.addressSpace ? "RLIMIT_AS: the address space of each process, not the memory of the tree" : nullptr,
        "the memory of the whole tree, in the call's cgroup; an OOM kill there ends the process that used most");
    add(LimitName::Pids, offer.pids, nullptr, "the processes and threads of the whole tree at once, in the call's cgroup");
    add(LimitName::Cpu, offer.cpu,
        rlimits.cpu ? "RLIMIT_CPU: the CPU time of each process (SIGXCPU at the limit, SIGKILL a second later)" : nullptr,
        "the CPU time of the whole tree, from the call's cgroup's accounting, which run watches and ends the tree at");
    add(LimitName::Fsize, CgroupOffer::Answer{std::nullopt, "no cgroup limits the size of a file"},
        rlimits.fileSize ? "RLIMIT_FSIZE: no process of the tree writes a file past this size (EFBIG, SIGXFSZ)" : nullptr, "");
    return out;
}

std::string limit_line(const LimitEnforcement& e) {
    std::string line = "limit " + std::string(to_string(e.name)) + "=" + limit_value_text(e.name, e.value) + ": ";
    if (e.mechanism == LimitMechanism::None) return line + "not enforced: " + e.note;
    const char* scope = e.scope == LimitScope::Tree ? "for the whole tree" : e.scope == LimitScope::File ? "for each file" : "for each process";
    return line + std::string(to_string(e.mechanism)) + ", " + scope + ": " + e.note;
}

std::vector<std::string> limit_gaps(const std::vector<LimitEnforcement>& enforcement) {
    std::vector<std::string> gaps;
    for (const auto& e : enforcement)
        if (e.mechanism == LimitMechanism::None) gaps.push_back(limit_line(e));
    return gaps;
}

}  // namespace dsh
