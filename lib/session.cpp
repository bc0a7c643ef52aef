#include "session.hpp"

#include <nlohmann/json.hpp>

#include "error.hpp"
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
        if (*type != "sandbox/mode") continue;  // other event types are not ours to judge
        auto mode = event.find("mode");
        std::optional<SandboxMode> parsed;
        if (mode != event.end() && mode->is_string()) parsed = parse_sandbox_mode(mode->get<std::string>());
        if (!parsed) throw damaged("has no valid mode");
        std::string at;
        if (auto when = event.find("at"); when != event.end() && when->is_string()) at = when->get<std::string>();
        log.events.push_back({*parsed, at});
    }
    return log;
}

std::string encode_session_record(const std::string& id, const std::string& cwd, const std::optional<std::string>& cwd_id) {
    nlohmann::ordered_json record;
    record["sessionId"] = id;
    record["cwd"] = cwd;
    if (cwd_id) record["cwdId"] = *cwd_id;
    return record.dump() + "\n";
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

std::optional<SandboxMode> SessionState::last_mode() const {
    if (events.empty()) return std::nullopt;
    return events.back().mode;
}

bool Sessions::start(const std::string& id, const std::string& cwd) {
    require_valid_session_id(id);
    const std::string canonical = canonical_directory(cwd, "--cwd");
    std::optional<std::string> cwd_id;
    if (identity_) {
        std::string why;
        cwd_id = identity_->of(canonical, why);
        if (!cwd_id) throw Error(code::WorkspaceRoot, "--cwd '" + cwd + "': " + why);
    }
    if (storage_.create_record(id, encode_session_record(id, canonical, cwd_id))) return true;
    auto existing = storage_.read_record(id);
    if (!existing) throw Error(code::Session, "session '" + id + "': its record vanished while starting");
    const std::string recorded = decode_session_cwd(*existing, id);
    if (recorded != canonical)
        throw Error(code::Session, "session '" + id + "' already started with cwd '" + recorded +
                                       "'; a session's cwd is immutable");
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
    if (auto log = storage_.read_log(id)) {
        ParsedLog parsed = parse_session_log(*log, id);
        state.events = std::move(parsed.events);
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
}

std::string Sessions::temp_dir(const std::string& id) {
    require_valid_session_id(id);
    if (!storage_.read_record(id)) throw Error(code::Session, "no session '" + id + "'");
    return storage_.temp_dir(id);
}

}  // namespace dsh
