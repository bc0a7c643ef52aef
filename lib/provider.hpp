// The provider: walks the configured chain of backends and returns the first usable one's
// confined argv, or every candidate's reason when none is usable (fail closed). A chain of
// more than one candidate is arbitrated by functional probes, whose results are cached keyed
// by everything that can change them; a sole candidate skips the probe, and its own refusal
// at run time is the fail-closed end.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "error.hpp"
#include "types.hpp"

namespace dsh {

struct Usable {};

// Whether a backend can put a call in the `hosts` network on this host, and how (`doctor`).
struct HostsNetworkSupport {
    bool available = false;
    std::string reason = "this backend has no hosts network";  // why not, when unavailable
    std::optional<SandboxEnforcement> enforcement;  // of the network promise alone
    std::string mechanism;                          // how the command is kept to the proxy, one line
    std::vector<std::string> gaps;                  // what the plan names for the network (partial)
};

// Facts about one backend on this host, for `doctor` and for the plan.
struct BackendReport {
    std::string name;
    bool usable = false;
    std::string reason;                 // why not, when unusable
    std::optional<SandboxEnforcement> enforcement;
    std::vector<std::string> enforcementGaps;
    std::vector<std::pair<std::string, std::string>> facts;  // e.g. {"landlockAbi", "7"}
    HostsNetworkSupport hostsNetwork = {};
};

class Backend {
public:
    virtual ~Backend() = default;
    virtual std::string name() const = 0;
    // Cheap, spawns nothing: is the mechanism present at all (runner found, syscall answers)?
    virtual Expected<Usable> check() const = 0;
    // Functional: a trivial command really run confined, under `timeout_ms`.
    virtual Expected<Usable> probe(int timeout_ms) const = 0;
    // Everything that can change the probe's answer (runner path and identity, kernel
    // release, uid, the sysctls that govern namespaces). Equal identities share a cache entry.
    virtual std::string probe_identity() const = 0;
    virtual Expected<ConfinedArgv> confine(const std::vector<std::string>& argv, const SandboxPolicy& policy) const = 0;
    // The classification rules of this backend's runner, also without a plan.
    virtual Dialect dialect() const = 0;
    virtual BackendReport report() const = 0;
};

// Where probe results are kept between calls. Failures to read or write are not errors:
// implementations return nullopt / do nothing, and say so at debug level.
class ProbeCache {
public:
    virtual ~ProbeCache() = default;
    virtual std::optional<std::string> read(const std::string& key) = 0;
    virtual void write(const std::string& key, const std::string& content) = 0;
    // An entry that was read but not trusted (damaged, or another identity's): said at debug level.
    virtual void discard(const std::string& key, const std::string& why) = 0;
};

struct ProbeOutcome {
    bool usable = false;
    std::string reason;
    bool fromCache = false;
};

// A stable 64-bit FNV-1a digest in hex: names cache entries; the full identity is stored
// inside the entry and compared on read, so a collision costs a probe, never a wrong answer.
std::string stable_digest(const std::string& text);

struct CandidateRejection {
    std::string backend;
    std::string reason;
};

struct ProviderResult {
    std::optional<ConfinedArgv> confined;
    std::vector<CandidateRejection> rejected;
};

class SandboxProvider {
public:
    // `backends` in chain order; `cache` may be null (no caching).
    SandboxProvider(std::vector<std::shared_ptr<const Backend>> backends, ProbeCache* cache, int probe_timeout_ms);

    ProviderResult confine(const std::vector<std::string>& argv, const SandboxPolicy& policy) const;
    // The probe of one candidate, through the cache.
    ProbeOutcome probe(const Backend& backend) const;

    const std::vector<std::shared_ptr<const Backend>>& backends() const { return backends_; }

private:
    std::vector<std::shared_ptr<const Backend>> backends_;
    ProbeCache* cache_;
    int probe_timeout_ms_;
};

// The message of SANDBOX_UNAVAILABLE: each candidate and why it was passed over.
std::string describe_rejections(const std::vector<CandidateRejection>& rejected);

}  // namespace dsh
