// The on-disk side of sessions and the probe cache. Everything below a state or cache
// directory is reached through directory file descriptors with O_NOFOLLOW, so a symlink
// planted there is refused rather than followed; files are 0600 in 0700 directories.
#pragma once

#include <string>

#include "../../lib/provider.hpp"
#include "../../lib/session.hpp"

namespace dsh::posix {

// <state>/sessions/<ID>/{session.json, events.log, tmp/}
class StateDirStorage : public SessionStorage {
public:
    explicit StateDirStorage(std::string state_dir) : state_dir_(std::move(state_dir)) {}

    std::optional<std::string> read_record(const std::string& id) override;
    bool create_record(const std::string& id, const std::string& content) override;
    std::optional<std::string> read_log(const std::string& id) override;
    void append_log(const std::string& id, const std::string& line) override;
    bool remove(const std::string& id) override;
    std::string temp_dir(const std::string& id) override;

    const std::string& root() const { return state_dir_; }

private:
    int open_sessions(bool create) const;            // -1 when absent and !create
    int open_session(const std::string& id, bool create) const;
    std::string state_dir_;
};

// <cache>/<key>.json, written atomically; every failure is a debug line and a miss.
class FileProbeCache : public ProbeCache {
public:
    explicit FileProbeCache(std::string cache_dir) : cache_dir_(std::move(cache_dir)) {}
    std::optional<std::string> read(const std::string& key) override;
    void write(const std::string& key, const std::string& content) override;
    void discard(const std::string& key, const std::string& why) override;

private:
    std::string cache_dir_;
};

// Removes `name` inside `dir_fd` and everything beneath it, never following a symlink
// (a symlink is removed itself). Directories the owner made unreadable are opened up first.
bool remove_tree_at(int dir_fd, const std::string& name);

// mkdir -p with mode 0700 for every directory it creates.
bool make_private_dirs(const std::string& path);

}  // namespace dsh::posix
