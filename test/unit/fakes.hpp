// In-memory stand-ins for lib/'s host interfaces (Backend, ProbeCache, SessionStorage), shared
// by the unit tests of the provider, sessions, the policy service and the confine step.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lib/provider.hpp"
#include "lib/session.hpp"

namespace unit {

// A backend whose answers are set by the test and which counts how often it is asked.
class FakeBackend : public dsh::Backend {
public:
    explicit FakeBackend(std::string name) : name_(std::move(name)) {}

    std::string checkFailure;    // non-empty: check() fails with this reason
    std::string probeFailure;    // non-empty: probe() fails with this reason
    std::string confineFailure;  // non-empty: confine() fails with this reason
    std::string identity = "identity-1";
    dsh::SandboxEnforcement enforcement = dsh::SandboxEnforcement::Full;  // what confine() reports
    std::vector<std::string> enforcementGaps;

    mutable int checks = 0;
    mutable int probes = 0;
    mutable int confines = 0;
    mutable int lastTimeoutMs = 0;
    mutable std::optional<dsh::SandboxPolicy> lastPolicy;  // what confine() was last asked for

    std::string name() const override { return name_; }
    dsh::Expected<dsh::Usable> check() const override {
        ++checks;
        if (!checkFailure.empty()) return dsh::Expected<dsh::Usable>::failure(checkFailure);
        return dsh::Usable{};
    }
    dsh::Expected<dsh::Usable> probe(int timeout_ms) const override {
        ++probes;
        lastTimeoutMs = timeout_ms;
        if (!probeFailure.empty()) return dsh::Expected<dsh::Usable>::failure(probeFailure);
        return dsh::Usable{};
    }
    std::string probe_identity() const override { return identity; }
    dsh::Expected<dsh::ConfinedArgv> confine(const std::vector<std::string>& argv,
                                             const dsh::SandboxPolicy& policy) const override {
        ++confines;
        lastPolicy = policy;
        if (!confineFailure.empty()) return dsh::Expected<dsh::ConfinedArgv>::failure(confineFailure);
        dsh::ConfinedArgv out;
        out.backend = name_;
        out.argv = {name_, policy.workspaceRoot, "--"};
        out.argv.insert(out.argv.end(), argv.begin(), argv.end());
        out.enforcement = enforcement;
        out.enforcementGaps = enforcementGaps;
        return out;
    }
    dsh::Dialect dialect() const override { return {}; }
    dsh::BackendReport report() const override { return {name_, true, "", dsh::SandboxEnforcement::Full, {}, {}, {}}; }

private:
    std::string name_;
};

class FakeProbeCache : public dsh::ProbeCache {
public:
    std::map<std::string, std::string> entries;
    int reads = 0;
    int writes = 0;

    std::optional<std::string> read(const std::string& key) override {
        ++reads;
        auto it = entries.find(key);
        if (it == entries.end()) return std::nullopt;
        return it->second;
    }
    void write(const std::string& key, const std::string& content) override {
        ++writes;
        entries[key] = content;
    }
    std::vector<std::string> discarded;
    void discard(const std::string& key, const std::string& why) override { discarded.push_back(key + ": " + why); }
};

// The storage contract without a disk: records, logs and temp areas in maps.
class FakeSessionStorage : public dsh::SessionStorage {
public:
    std::map<std::string, std::string> records;
    std::map<std::string, std::string> logs;
    int appends = 0;
    int tempDirs = 0;  // how often a temp area was asked for (made, on a disk)

    std::optional<std::string> read_record(const std::string& id) override {
        auto it = records.find(id);
        if (it == records.end()) return std::nullopt;
        return it->second;
    }
    bool create_record(const std::string& id, const std::string& content) override {
        return records.emplace(id, content).second;
    }
    std::optional<std::string> read_log(const std::string& id) override {
        auto it = logs.find(id);
        if (it == logs.end()) return std::nullopt;
        return it->second;
    }
    void append_log(const std::string& id, const std::string& line) override {
        ++appends;
        logs[id] += line;
    }
    bool remove(const std::string& id) override {
        logs.erase(id);
        return records.erase(id) > 0;
    }
    std::string temp_dir(const std::string& id) override {
        ++tempDirs;
        return "/fake/tmp/" + id;
    }
};

}  // namespace unit
