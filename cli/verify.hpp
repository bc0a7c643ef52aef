// `doctor --verify`: a built-in set of denied and allowed file effects, attempted under one
// backend on this host and judged from the host's side.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../lib/provider.hpp"

namespace dsh::cli {

struct EffectResult {
    std::string name;
    std::string mode;      // the policy it ran under
    bool shouldHold;       // true: must be denied; false: must be allowed
    bool held;             // denied effects: the host is untouched; allowed: it took place
    bool namedGap = false; // an escape the backend names in enforcementGaps
    std::string detail;
};

struct VerifyReport {
    std::string backend;
    std::string enforcement;
    std::vector<std::string> gaps;
    std::vector<EffectResult> effects;
    bool fullButEscaped = false;  // a `full` backend let something through
    bool unnamedEscape = false;   // an escape that is not one of the named gaps
    bool overBlocked = false;     // an allowed effect was refused
};

VerifyReport verify_backend(const Backend& backend);
nlohmann::ordered_json verify_json(const VerifyReport& report);
std::string render_verify_text(const nlohmann::ordered_json& reports);

// `dsh-confine __effect OP ARGS...`, the helper the verification runs confined.
int run_effect_helper(const std::vector<std::string>& args);

}  // namespace dsh::cli
