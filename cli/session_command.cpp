// `dsh-confine session start|mode|show|end`: Sessions over the state directory.
#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "../lib/config.hpp"
#include "../lib/error.hpp"
#include "../lib/host_pattern.hpp"
#include "../lib/plan.hpp"
#include "../lib/policy.hpp"
#include "../lib/session.hpp"
#include "../platform/posix/safe_path.hpp"
#include "../platform/posix/state_store.hpp"
#include "common.hpp"

namespace dsh::cli {
namespace {

std::string now_utc() {
    const auto now = std::chrono::system_clock::now();
    const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
    std::tm parts{};
    gmtime_r(&seconds, &parts);
    char text[32];
    std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &parts);
    return text;
}

}  // namespace

int run_session(const std::string& action, const std::string& id, const std::string& argument,
                const std::vector<std::string>& more) {
    // `more`: start's --writable-root values, or the host patterns after `network ID hosts`.
    const std::vector<std::string>& writable_roots = more;
    posix::StateDirStorage storage(state_dir());
    const posix::NoSymlinkIdentity identity;  // the cwd's identity is recorded at start
    Sessions sessions(storage, &identity);
    if (action == "start") {
        // A relative --cwd is taken from where dsh-confine runs, as `cd` would (--cwd . is the cwd);
        // the writable roots, like --writable-root elsewhere, must be absolute.
        const std::string cwd = is_absolute_path(argument) ? argument : (std::filesystem::path(current_dir()) / argument).string();
        const bool created = sessions.start(id, cwd, writable_roots);
        spdlog::info("session '{}' {}", id, created ? "started" : "already started with this cwd");
        return 0;
    }
    if (action == "mode") {
        auto mode = parse_sandbox_mode(argument);
        if (!mode) {
            std::string message = "unknown mode '" + argument + "'";
            if (auto close = did_you_mean(argument, {"read-only", "workspace-write", "danger-full-access"}))
                message += " (did you mean '" + *close + "'?)";
            throw Error(code::Usage, message + "; modes: read-only, workspace-write, danger-full-access");
        }
        sessions.set_mode(id, *mode, now_utc());
        return 0;
    }
    if (action == "network") {
        auto network = parse_network_policy(argument);
        if (!network) {
            std::string message = "unknown network '" + argument + "'";
            if (auto close = did_you_mean(argument, {"allow", "deny", "hosts"})) message += " (did you mean '" + *close + "'?)";
            throw Error(code::Usage, message + "; networks: allow, deny, hosts PATTERN...");
        }
        // `hosts` takes the patterns that follow it (canonical in the log); the others take none.
        std::vector<std::string> allow;
        for (const auto& text : more) {
            auto pattern = parse_host_pattern(text);
            if (!pattern) throw Error(code::Usage, "session network: " + pattern.reason());
            allow.push_back(to_string(*pattern));
        }
        if (*network == NetworkPolicy::Hosts && allow.empty())
            throw Error(code::Usage, "session network " + id + " hosts needs at least one host pattern to allow");
        if (*network != NetworkPolicy::Hosts && !allow.empty())
            throw Error(code::Usage, "session network " + id + " " + argument + " takes no host patterns (hosts does)");
        std::sort(allow.begin(), allow.end());
        allow.erase(std::unique(allow.begin(), allow.end()), allow.end());
        sessions.set_network(id, *network, now_utc(), allow);
        return 0;
    }
    if (action == "show") {
        SessionState state = sessions.show(id);
        for (const auto& warning : state.warnings) spdlog::warn("{}", warning);
        nlohmann::ordered_json out;
        out["sessionId"] = state.id;
        out["cwd"] = state.cwd;
        auto last = state.last_mode();
        out["mode"] = last ? nlohmann::ordered_json(std::string(to_string(*last))) : nlohmann::ordered_json(nullptr);
        out["writableRoots"] = state.writableRoots;
        const auto network = state.last_network();
        out["network"] = network ? network_json(*network, state.last_allow_hosts()) : nlohmann::ordered_json(nullptr);
        nlohmann::ordered_json events = nlohmann::ordered_json::array();
        for (const auto& event : state.timeline) {
            nlohmann::ordered_json item;
            item["type"] = event.type;
            item[event.type == "sandbox/mode" ? "mode" : "network"] = event.value;
            if (event.value == "hosts") item["allow"] = event.allowHosts;
            item["at"] = event.at;
            events.push_back(item);
        }
        out["events"] = events;
        write_out(out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
        return 0;
    }
    sessions.end(id);
    return 0;
}

}  // namespace dsh::cli
