// Sessions: an immutable canonical cwd and an append-only log of `sandbox/mode` events.
// This file holds the rules (ID syntax, event encoding, how a log is read back); the bytes on
// disk go through SessionStorage, which platform/ implements with the care concurrency and a
// hostile state directory need, and which tests replace with a fake.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "types.hpp"

namespace dsh {

// `[A-Za-z0-9._-]{1,128}`, never `.` or `..`.
bool valid_session_id(std::string_view id);
void require_valid_session_id(std::string_view id);

struct SessionEvent {
    SandboxMode mode;
    std::string at;  // when it was logged, UTC, ISO 8601
};

struct NetworkEvent {
    NetworkPolicy network;
    std::string at;
    std::vector<std::string> allowHosts = {};  // with `hosts`: the patterns, canonical
};

// One complete log line, newline included.
std::string encode_mode_event(SandboxMode mode, const std::string& at);
std::string encode_network_event(NetworkPolicy network, const std::string& at,
                                 const std::vector<std::string>& allow_hosts = {});

// One event of either kind, in log order: what `session show` lists.
struct LoggedEvent {
    std::string type;   // "sandbox/mode" or "sandbox/network"
    std::string value;  // the mode or the network
    std::string at;
    std::vector<std::string> allowHosts = {};  // a network event's, with `hosts`
};

struct ParsedLog {
    std::vector<SessionEvent> events;
    std::vector<NetworkEvent> networkEvents;
    std::vector<LoggedEvent> timeline;
    std::vector<std::string> warnings;  // e.g. a torn last line skipped
};

// A torn last line (no newline: a crash mid-append) is skipped with a warning; a damaged
// line before it is an error, since skipping it could silently widen the session's mode.
ParsedLog parse_session_log(std::string_view content, const std::string& id);

// The record: the canonical cwd and, since the cwd's identity is recorded, its "DEV:INO".
std::string encode_session_record(const std::string& id, const std::string& cwd,
                                  const std::optional<std::string>& cwd_id = std::nullopt,
                                  const std::vector<std::string>& writable_roots = {},
                                  const std::vector<std::string>& writable_root_ids = {});
std::vector<std::string> decode_session_writable_roots(std::string_view record, const std::string& id);
std::vector<std::string> decode_session_writable_root_ids(std::string_view record, const std::string& id);
std::string decode_session_cwd(std::string_view record, const std::string& id);
std::optional<std::string> decode_session_cwd_id(std::string_view record, const std::string& id);

// Names a directory by its identity ("DEV:INO"), reached at a canonical path without following
// any symlink: what makes a session's cwd immutable as a directory, not only as a string.
// platform/ implements it; tests fake it.
class DirectoryIdentity {
public:
    virtual ~DirectoryIdentity() = default;
    // nullopt with `why` when the path is missing, not a directory, or passes a symlink.
    virtual std::optional<std::string> of(const std::string& canonical_path, std::string& why) const = 0;
};

// The raw storage of sessions. Implementations make create_record atomic and exclusive, make
// append_log atomic with respect to concurrent appenders, and never follow a planted symlink.
class SessionStorage {
public:
    virtual ~SessionStorage() = default;
    virtual std::optional<std::string> read_record(const std::string& id) = 0;
    // false when a record already exists (nothing is changed then)
    virtual bool create_record(const std::string& id, const std::string& content) = 0;
    virtual std::optional<std::string> read_log(const std::string& id) = 0;
    virtual void append_log(const std::string& id, const std::string& line) = 0;
    // false when there was no such session
    virtual bool remove(const std::string& id) = 0;
    // The session's private temp area (0700), created on first use.
    virtual std::string temp_dir(const std::string& id) = 0;
};

struct SessionState {
    std::string id;
    std::string cwd;
    std::optional<std::string> cwdId;  // absent in records of older versions
    std::vector<std::string> writableRoots;  // recorded at start, immutable like the cwd
    std::vector<std::string> writableRootIds;  // their identities, in the same order
    std::vector<SessionEvent> events;
    std::vector<NetworkEvent> networkEvents;
    std::vector<LoggedEvent> timeline;
    std::vector<std::string> warnings;

    std::optional<SandboxMode> last_mode() const;
    std::optional<NetworkPolicy> last_network() const;
    std::vector<std::string> last_allow_hosts() const;  // the last network event's, with `hosts`
};

class Sessions {
public:
    // With `identity`, start() records the cwd's identity too.
    explicit Sessions(SessionStorage& storage, const DirectoryIdentity* identity = nullptr)
        : storage_(storage), identity_(identity) {}

    // Records the canonical cwd (and its identity). Starting again with the same cwd is a
    // no-op; with another, an error. Returns false for the no-op.
    // `writable_roots` are recorded with the cwd (canonical) and are as immutable as it is.
    bool start(const std::string& id, const std::string& cwd, const std::vector<std::string>& writable_roots = {});
    void set_mode(const std::string& id, SandboxMode mode, const std::string& at);
    void set_network(const std::string& id, NetworkPolicy network, const std::string& at,
                     const std::vector<std::string>& allow_hosts = {});
    SessionState show(const std::string& id);
    void end(const std::string& id);
    std::string temp_dir(const std::string& id);

private:
    SessionStorage& storage_;
    const DirectoryIdentity* identity_;
};

// The session's cwd, and each writable root it recorded, is still the directory recorded at
// `session start`: at the same canonical path, reached without a symlink, with the same
// identity. SESSION_CWD_CHANGED otherwise.
void require_same_cwd(const SessionState& state, const DirectoryIdentity& identity);

}  // namespace dsh
