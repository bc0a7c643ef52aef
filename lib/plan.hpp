// The plan: what `--print` shows and what the exec path carries out. Rendering is a pure
// function of its inputs (fixed field order, no clock, no randomness), so printing the same
// plan twice gives the same bytes.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "types.hpp"

namespace dsh {

struct Plan {
    SandboxExecutionPolicy policy;
    // Absent for danger-full-access: the argv is the caller's own and no backend is involved.
    std::optional<ConfinedArgv> confined;
    std::vector<std::string> argv;  // what runs: confined->argv, or the original argv
};

Plan unconfined_plan(const SandboxExecutionPolicy& policy, const std::vector<std::string>& argv);
Plan confined_plan(const SandboxExecutionPolicy& policy, ConfinedArgv confined);

nlohmann::ordered_json policy_json(const SandboxExecutionPolicy& policy);
// The network as plans, policies and sessions show it: `allow` or `deny`, or for `hosts`
// {"mode": "hosts", "allow": [...]}.
nlohmann::ordered_json network_json(NetworkPolicy network, const std::vector<std::string>& allow_hosts);
nlohmann::ordered_json rule_json(const RunnerFailureRule& rule);
nlohmann::ordered_json plan_json(const Plan& plan);
std::string render_plan_json(const Plan& plan);
std::string render_plan_shell(const Plan& plan);

// Reads the dialect (denialSignatures, runnerFailureRules) out of a plan document; a
// document that is not JSON, lacks a field, or holds a malformed rule is an error (PLAN).
Dialect parse_dialect(std::string_view document, const std::string& source);

// POSIX shell quoting: a word made only of safe characters stays bare; anything else is
// single-quoted, with each `'` written as '\''. `sh -c` reads the result back into the argv.
std::string shell_quote(std::string_view word);
std::string shell_join(const std::vector<std::string>& argv);

}  // namespace dsh
