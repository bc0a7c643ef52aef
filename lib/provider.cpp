#include "provider.hpp"

#include <cstdint>
#include <cstdio>

#include <nlohmann/json.hpp>

namespace dsh {

std::string stable_digest(const std::string& text) {
    std::uint64_t hash = 14695981039346656037ULL;  // the FNV-1a 64 offset basis, 0xcbf29ce484222325
    for (unsigned char c : text) {
        hash ^= c;
        hash *= 1099511628211ULL;
    }
    char out[17];
    std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(hash));
    return out;
}

SandboxProvider::SandboxProvider(std::vector<std::shared_ptr<const Backend>> backends, ProbeCache* cache,
                                 int probe_timeout_ms)
    : backends_(std::move(backends)), cache_(cache), probe_timeout_ms_(probe_timeout_ms) {}

ProbeOutcome SandboxProvider::probe(const Backend& backend) const {
    const std::string identity = backend.name() + "\n" + backend.probe_identity();
    const std::string key = backend.name() + "-" + stable_digest(identity);
    if (cache_) {
        if (auto entry = cache_->read(key)) {
            nlohmann::json parsed = nlohmann::json::parse(*entry, nullptr, false);
            if (!parsed.is_object() || !parsed.contains("usable") || !parsed["usable"].is_boolean() ||
                !parsed.contains("identity") || !parsed["identity"].is_string())
                cache_->discard(key, "not a probe result");
            else if (parsed["identity"].get<std::string>() != identity)
                cache_->discard(key, "recorded for another identity");
            else
                return {parsed["usable"].get<bool>(), parsed.value("reason", ""), true};
        }
    }
    ProbeOutcome outcome;
    Expected<Usable> result = backend.probe(probe_timeout_ms_);
    outcome.usable = result.has_value();
    if (!result) outcome.reason = result.reason();
    if (cache_) {
        nlohmann::ordered_json entry;
        entry["identity"] = identity;
        entry["usable"] = outcome.usable;
        entry["reason"] = outcome.reason;
        cache_->write(key, entry.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
    }
    return outcome;
}

ProviderResult SandboxProvider::confine(const std::vector<std::string>& argv, const SandboxPolicy& policy) const {
    ProviderResult result;
    const bool sole = backends_.size() == 1;
    for (const auto& backend : backends_) {
        Expected<Usable> present = backend->check();
        if (!present) {
            result.rejected.push_back({backend->name(), present.reason()});
            continue;
        }
        if (!sole) {
            ProbeOutcome probed = probe(*backend);
            if (!probed.usable) {
                result.rejected.push_back({backend->name(), "probe failed: " + probed.reason});
                continue;
            }
        }
        Expected<ConfinedArgv> confined = backend->confine(argv, policy);
        if (!confined) {
            result.rejected.push_back({backend->name(), confined.reason()});
            continue;
        }
        result.confined = std::move(confined).value();
        return result;
    }
    return result;
}

std::string describe_rejections(const std::vector<CandidateRejection>& rejected) {
    if (rejected.empty()) return "no backend is configured";
    std::string out = "no usable backend: ";
    for (std::size_t i = 0; i < rejected.size(); ++i) {
        if (i) out += "; ";
        out += rejected[i].backend + ": " + rejected[i].reason;
    }
    return out;
}

}  // namespace dsh
