#include "session.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "error.hpp"
#include "host_pattern.hpp"
#include "policy.hpp"

namespace dsh {

bool valid_session_id(std::string_view id) {
    if (id.empty() || id.size() > 128 || id == "." || id == "..") return false;
    for (char c : id) {
        const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                        c == '.' || c == '_' || c == '-';
        if (!ok) return false;
    }
    return true;
}

void require_valid_session_id(std::string_view id) {
    if (!valid_session_id(id))
        throw Error(code::Session, "invalid session ID " +
                                       nlohmann::json(std::string(id)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
                                       ": IDs match [A-Za-z0-9._-]{1,128} and are not '.' or '..'");
}

std::string encode_mode_event(SandboxMode mode, const std::string& at) {
    nlohmann::ordered_json event;
    event["type"] = "sandbox/mode";
    event["mode"] = std::string(to_string(mode));
    event["at"] = at;
    return event.dump() + "\n";
}

std::string encode_network_event(NetworkPolicy network, const std::string& at, const std::vector<std::string>& allow_hosts) {
    nlohmann::ordered_json event;
    event["type"] = "sandbox/network";
    event["network"] = std::string(to_string(network));
    if (network == NetworkPolicy::Hosts) event["allow"] = allow_hosts;
    event["at"] = at;
    return event.dump() + "\n";
}

ParsedLog parse_session_log(std::string_view content, const std::string& id) {
    ParsedLog log;
    std::size_t start = 0;
    std::size_t number = 0;
    while (start < content.size()) {
        const std::size_t end = content.find('\n', start);
        ++number;
        if (end == std::string_view::npos) {
            log.warnings.push_back("session '" + id + "': skipping a torn last line (" +
                                   std::to_string(content.size() - start) + " bytes without a newline)");
            break;
        }
        const std::string_view line = content.substr(start, end - start);
        start = end + 1;
        auto damaged = [&](const std::string& why) {
            return Error(code::Session, "session '" + id + "': event log line " + std::to_string(number) + " " + why);
        };
        nlohmann::json event = nlohmann::json::parse(line, nullptr, false);
        if (event.is_discarded() || !event.is_object()) throw damaged("is not a JSON object");
        auto type = event.find("type");
        if (type == event.end() || !type->is_string()) throw damaged("has no event type");
        if (*type == "sandbox/network") {
            auto network = event.find("network");
            std::optional<NetworkPolicy> parsed;
            if (network != event.end() && network->is_string()) parsed = parse_network_policy(network->get<std::string>());
            if (!parsed) throw damaged("has no valid network");
            std::vector<std::string> allow;
            if (*parsed == NetworkPolicy::Hosts) {
                // Written by `session network ID hosts`, which canonicalized them: each checked again.
                auto hosts = event.find("allow");
                if (hosts == event.end() || !hosts->is_array() || hosts->empty()) throw damaged("has no allowed hosts");
                for (const auto& host : *hosts) {
                    if (!host.is_string()) throw damaged("has an allowed host that is not a string");
                    auto pattern = parse_host_pattern(host.get<std::string>());
                    if (!pattern) throw damaged("has a bad allowed host: " + pattern.reason());
                    allow.push_back(to_string(*pattern));
                }
            }
            std::string at;
            if (auto when = event.find("at"); when != event.end() && when->is_string()) at = when->get<std::string>();
            log.networkEvents.push_back({*parsed, at, allow});
            log.timeline.push_back({"sandbox/network", std::string(to_string(*parsed)), at, allow});
            continue;
        }
        if (*type != "sandbox/mode") continue;  // other event types are not ours to judge
        auto mode = event.find("mode");
        std::optional<SandboxMode> parsed;
        if (mode != event.end() && mode->is_string()) parsed = parse_sandbox_mode(mode->get<std::string>());
        if (!parsed) throw damaged("has no valid mode");
        std::string at;
        if (auto when = event.find("at"); when != event.end() && when->is_string()) at = when->get<std::string>();
        log.events.push_back({*parsed, at});
        log.timeline.push_back({"sandbox/mode", std::string(to_string(*parsed)), at});
    }
    return log;
}

std::string encode_session_record(const std::string& id, const std::string& cwd, const std::optional<std::string>& cwd_id,
                                  const std::vector<std::string>& writable_roots,
                                  const std::vector<std::string>& writable_root_ids) {
    nlohmann::ordered_json record;
    record["sessionId"] = id;
    record["cwd"] = cwd;
    if (cwd_id) record["cwdId"] = *cwd_id;
    if (!writable_roots.empty()) record["writableRoots"] = writable_roots;
    if (!writable_root_ids.empty()) record["writableRootIds"] = writable_root_ids;
    return record.dump() + "\n";
}

namespace {

std::vector<std::string> record_strings(std::string_view record, const std::string& id, const char* key) {
    nlohmann::json parsed = nlohmann::json::parse(record, nullptr, false);
    if (!parsed.is_object()) throw Error(code::Session, "session '" + id + "': its record is damaged");
    auto roots = parsed.find(key);
    if (roots == parsed.end()) return {};
    std::vector<std::string> out;
    if (!roots->is_array()) throw Error(code::Session, "session '" + id + "': its record is damaged");
    for (const auto& root : *roots) {
        if (!root.is_string()) throw Error(code::Session, "session '" + id + "': its record is damaged");
        out.push_back(root.get<std::string>());
    }
    return out;
}

}  // namespace

std::vector<std::string> decode_session_writable_roots(std::string_view record, const std::string& id) {
    return record_strings(record, id, "writableRoots");
}

std::vector<std::string> decode_session_writable_root_ids(std::string_view record, const std::string& id) {
    return record_strings(record, id, "writableRootIds");
}

std::optional<std::string> decode_session_cwd_id(std::string_view record, const std::string& id) {
    nlohmann::json parsed = nlohmann::json::parse(record, nullptr, false);
    if (!parsed.is_object()) throw Error(code::Session, "session '" + id + "': its record is damaged");
    auto cwd_id = parsed.find("cwdId");
    if (cwd_id == parsed.end()) return std::nullopt;
    if (!cwd_id->is_string()) throw Error(code::Session, "session '" + id + "': its record is damaged");
    return cwd_id->get<std::string>();
}

std::string decode_session_cwd(std::string_view record, const std::string& id) {
    nlohmann::json parsed = nlohmann::json::parse(record, nullptr, false);
    if (parsed.is_object()) {
        auto cwd = parsed.find("cwd");
        if (cwd != parsed.end() && cwd->is_string()) return cwd->get<std::string>();
    }
    throw Error(code::Session, "session '" + id + "': its record is damaged");
}

std::optional<NetworkPolicy> SessionState::last_network() const {
    if (networkEvents.empty()) return std::nullopt;
    return networkEvents.back().network;
}

std::vector<std::string> SessionState::last_allow_hosts() const {
    if (networkEvents.empty()) return {};
    return networkEvents.back().allowHosts;
}

void Sessions::set_network(const std::string& id, NetworkPolicy network, const std::string& at,
                           const std::vector<std::string>& allow_hosts) {
    require_valid_session_id(id);
    if (!storage_.read_record(id)) throw Error(code::Session, "no session '" + id + "' (start it first)");
    storage_.append_log(id, encode_network_event(network, at, allow_hosts));
}

std::optional<SandboxMode> SessionState::last_mode() const {
    if (events.empty()) return std::nullopt;
    return events.back().mode;
}

bool Sessions::start(const std::string& id, const std::string& cwd, const std::vector<std::string>& writable_roots) {
    require_valid_session_id(id);
    const std::string canonical = canonical_directory(cwd, "--cwd");
    std::vector<std::string> roots;
    roots.reserve(writable_roots.size());
    for (const auto& root : writable_roots) roots.push_back(canonical_directory(root, "--writable-root"));
    std::sort(roots.begin(), roots.end());
    roots.erase(std::unique(roots.begin(), roots.end()), roots.end());
    std::optional<std::string> cwd_id;
    if (identity_) {
        std::string why;
        cwd_id = identity_->of(canonical, why);
        if (!cwd_id) throw Error(code::WorkspaceRoot, "--cwd '" + cwd + "': " + why);
    }
    std::vector<std::string> root_ids;
    if (identity_)
        for (const auto& root : roots) {
            std::string why;
            const auto root_id = identity_->of(root, why);
            if (!root_id) throw Error(code::WorkspaceRoot, "--writable-root '" + root + "': " + why);
            root_ids.push_back(*root_id);
        }
    if (storage_.create_record(id, encode_session_record(id, canonical, cwd_id, roots, root_ids))) return true;
    auto existing = storage_.read_record(id);
    if (!existing) throw Error(code::Session, "session '" + id + "': its record vanished while starting");
    const std::string recorded = decode_session_cwd(*existing, id);
    if (recorded != canonical)
        throw Error(code::Session, "session '" + id + "' already started with cwd '" + recorded +
                                       "'; a session's cwd is immutable");
    if (identity_) {
        SessionState state;
        state.id = id;
        state.cwd = recorded;
        state.cwdId = decode_session_cwd_id(*existing, id);
        state.writableRoots = decode_session_writable_roots(*existing, id);
        state.writableRootIds = decode_session_writable_root_ids(*existing, id);
        if (state.writableRoots == roots) require_same_cwd(state, *identity_);  // the same string is not enough
    }
    if (decode_session_writable_roots(*existing, id) != roots)
        throw Error(code::Session, "session '" + id + "' already started with other writable roots; they are immutable");
    return false;
}

void Sessions::set_mode(const std::string& id, SandboxMode mode, const std::string& at) {
    require_valid_session_id(id);
    if (!storage_.read_record(id)) throw Error(code::Session, "no session '" + id + "' (start it first)");
    storage_.append_log(id, encode_mode_event(mode, at));
}

SessionState Sessions::show(const std::string& id) {
    require_valid_session_id(id);
    auto record = storage_.read_record(id);
    if (!record) throw Error(code::Session, "no session '" + id + "'");
    SessionState state;
    state.id = id;
    state.cwd = decode_session_cwd(*record, id);
    state.cwdId = decode_session_cwd_id(*record, id);
    state.writableRoots = decode_session_writable_roots(*record, id);
    state.writableRootIds = decode_session_writable_root_ids(*record, id);
    if (auto log = storage_.read_log(id)) {
        ParsedLog parsed = parse_session_log(*log, id);
        state.events = std::move(parsed.events);
        state.networkEvents = std::move(parsed.networkEvents);
        state.timeline = std::move(parsed.timeline);
        state.warnings = std::move(parsed.warnings);
    }
    return state;
}

void Sessions::end(const std::string& id) {
    require_valid_session_id(id);
    if (!storage_.remove(id)) throw Error(code::Session, "no session '" + id + "'");
}

void require_same_cwd(const SessionState& state, const DirectoryIdentity& identity) {
    if (!state.cwdId)
        throw Error(code::Session, "session '" + state.id + "' was started without its cwd's identity (by an older "
                                   "dsh-confine), so its cwd cannot be proven unchanged; end it and start it again");
    std::string why;
    const std::optional<std::string> now = identity.of(state.cwd, why);
    if (!now)
        throw Error(code::SessionCwdChanged, "session '" + state.id + "': its cwd " + state.cwd + " is no longer the directory it "
                                             "started in (" + why + "); nothing ran");
    if (*now != *state.cwdId)
        throw Error(code::SessionCwdChanged, "session '" + state.id + "': its cwd " + state.cwd + " is no longer the directory it "
                                             "started in (it was replaced: " + *state.cwdId + " then, " + *now + " now); nothing ran");
    if (state.writableRootIds.size() != state.writableRoots.size())
        throw Error(code::Session, "session '" + state.id + "': its record is damaged (writable roots without identities)");
    for (std::size_t i = 0; i < state.writableRoots.size(); ++i) {
        const std::optional<std::string> root = identity.of(state.writableRoots[i], why);
        if (root != state.writableRootIds[i])
            throw Error(code::SessionCwdChanged, "session '" + state.id + "': its writable root " + state.writableRoots[i] +
                                                 " is no longer the directory it started with" +
                                                 (root ? std::string() : " (" + why + ")") + "; nothing ran");
    }
}

std::string Sessions::temp_dir(const std::string& id) {
    require_valid_session_id(id);
    if (!storage_.read_record(id)) throw Error(code::Session, "no session '" + id + "'");
    return storage_.temp_dir(id);
}

}  // namespace dsh
