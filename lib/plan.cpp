#include "plan.hpp"

#include <algorithm>
#include <limits>

#include "classify.hpp"
#include "error.hpp"

namespace dsh {

using ojson = nlohmann::ordered_json;

Plan unconfined_plan(const SandboxExecutionPolicy& policy, const std::vector<std::string>& argv) {
    return Plan{policy, std::nullopt, argv};
}

Plan confined_plan(const SandboxExecutionPolicy& policy, ConfinedArgv confined) {
    std::vector<std::string> argv = confined.argv;
    return Plan{policy, std::move(confined), std::move(argv)};
}

// `allow` and `deny` as their word; `hosts` as an object with its patterns.
ojson network_json(NetworkPolicy network, const std::vector<std::string>& allow_hosts) {
    if (network != NetworkPolicy::Hosts) return std::string(to_string(network));
    ojson out;
    out["mode"] = "hosts";
    out["allow"] = allow_hosts;
    return out;
}

ojson policy_json(const SandboxExecutionPolicy& policy) {
    ojson out;
    out["mode"] = std::string(to_string(policy.mode));
    out["workspaceRoot"] = policy.workspaceRoot;
    if (policy.sessionId) out["sessionId"] = *policy.sessionId;
    out["writableRoots"] = policy.writableRoots;
    out["protectedPaths"] = policy.protectedPaths;
    out["unreadablePaths"] = policy.unreadablePaths;
    out["network"] = network_json(policy.network, policy.allowHosts);
    out["git"] = std::string(to_string(policy.git));
    return out;
}

ojson git_json(const GitPlan& git) {
    ojson out;
    out["mode"] = std::string(to_string(git.mode));
    out["repositories"] = git.repositories;
    std::vector<std::string> made = git.madeDirectories;
    made.insert(made.end(), git.madeFiles.begin(), git.madeFiles.end());
    std::sort(made.begin(), made.end());
    out["madeIfMissing"] = made;
    out["keptInPlace"] = git.keptInPlace;
    out["checkedAtEnd"] = git.checkedAtEnd;
    out["notes"] = git.notes;
    return out;
}

ojson rule_json(const RunnerFailureRule& rule) {
    ojson out;
    if (rule.allowedExitCodes) out["allowedExitCodes"] = *rule.allowedExitCodes;
    out["fatalSignatures"] = rule.fatalSignatures;
    out["informationalLines"] = rule.informationalLines;
    return out;
}

ojson plan_json(const Plan& plan) {
    ojson out;
    out["argv"] = plan.argv;
    if (plan.confined) {
        const ConfinedArgv& c = *plan.confined;
        out["backend"] = c.backend;
        out["enforcement"] = std::string(to_string(c.enforcement));
        out["enforcementGaps"] = c.enforcementGaps;
        out["denialSignatures"] = c.denialSignatures;
        ojson rules = ojson::array();
        for (const auto& rule : c.runnerFailureRules) rules.push_back(rule_json(rule));
        out["runnerFailureRules"] = rules;
        out["policy"] = policy_json(plan.policy);
        out["writableRoots"] = c.writableRoots;
        out["passedFds"] = c.passedFds;
        out["protectedPaths"] = c.protectedPaths;
        out["unreadablePaths"] = c.unreadablePaths;
        out["network"] = network_json(c.network, c.allowHosts);
        out["git"] = git_json(c.git);
    } else {
        out["backend"] = nullptr;
        out["enforcement"] = nullptr;
        out["enforcementGaps"] = ojson::array();
        out["denialSignatures"] = ojson::array();
        out["runnerFailureRules"] = ojson::array();
        out["policy"] = policy_json(plan.policy);
        out["writableRoots"] = ojson::array({"/"});
        out["passedFds"] = nullptr;  // unconfined: whatever the caller left open is inherited
        out["protectedPaths"] = ojson::array();
        out["unreadablePaths"] = ojson::array();
        out["network"] = nullptr;  // not governed
        out["git"] = nullptr;      // not governed
    }
    return out;
}

std::string render_plan_json(const Plan& plan) {
    return plan_json(plan).dump(-1, ' ', false, ojson::error_handler_t::replace) + "\n";
}

std::string render_plan_shell(const Plan& plan) { return shell_join(plan.argv) + "\n"; }

namespace {

[[noreturn]] void plan_error(const std::string& source, const std::string& message) {
    throw Error(code::Plan, source + ": " + message);
}

std::vector<std::string> string_list(const nlohmann::json& node, const std::string& source, const std::string& where) {
    if (!node.is_array()) plan_error(source, where + " must be an array of strings");
    std::vector<std::string> out;
    for (const auto& item : node) {
        if (!item.is_string()) plan_error(source, where + " must be an array of strings");
        out.push_back(item.get<std::string>());
    }
    return out;
}

}  // namespace

Dialect parse_dialect(std::string_view document, const std::string& source) {
    nlohmann::json plan = nlohmann::json::parse(document, nullptr, false);
    if (plan.is_discarded()) plan_error(source, "is not JSON");
    if (!plan.is_object()) plan_error(source, "is not a JSON object");
    auto denial = plan.find("denialSignatures");
    if (denial == plan.end()) plan_error(source, "lacks the field denialSignatures");
    auto rules = plan.find("runnerFailureRules");
    if (rules == plan.end()) plan_error(source, "lacks the field runnerFailureRules");

    Dialect dialect;
    dialect.denialSignatures = string_list(*denial, source, "denialSignatures");
    if (!rules->is_array()) plan_error(source, "runnerFailureRules must be an array of rules");
    for (std::size_t k = 0; k < rules->size(); ++k) {
        const auto& node = (*rules)[k];
        const std::string where = "runnerFailureRules[" + std::to_string(k) + "]";
        if (!node.is_object()) plan_error(source, where + " must be an object");
        for (const auto& [key, value] : node.items()) {
            (void)value;
            if (key != "allowedExitCodes" && key != "fatalSignatures" && key != "informationalLines")
                plan_error(source, where + " has an unknown field '" + key + "'");
        }
        RunnerFailureRule rule;
        auto fatal = node.find("fatalSignatures");
        if (fatal == node.end()) plan_error(source, where + " lacks the field fatalSignatures");
        rule.fatalSignatures = string_list(*fatal, source, where + ".fatalSignatures");
        if (auto info = node.find("informationalLines"); info != node.end())
            rule.informationalLines = string_list(*info, source, where + ".informationalLines");
        if (auto codes = node.find("allowedExitCodes"); codes != node.end()) {
            if (!codes->is_array()) plan_error(source, where + ".allowedExitCodes must be an array of integers");
            std::vector<int> allowed;
            for (const auto& item : *codes) {
                if (!item.is_number_integer()) plan_error(source, where + ".allowedExitCodes must be an array of integers");
                // The range is validate_dialect's to judge; clamp only so the int conversion is exact.
                const auto value = item.get<long long>();
                const bool fits = value >= std::numeric_limits<int>::min() && value <= std::numeric_limits<int>::max();
                allowed.push_back(fits ? static_cast<int>(value) : std::numeric_limits<int>::min());
            }
            rule.allowedExitCodes = allowed;
        }
        dialect.runnerFailureRules.push_back(std::move(rule));
    }
    try {
        validate_dialect(dialect);
    } catch (const Error& e) {
        plan_error(source, e.what());
    }
    return dialect;
}

std::string shell_quote(std::string_view word) {
    auto safe = [](unsigned char c) {
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
               c == '@' || c == '%' || c == '+' || c == ':' || c == ',' || c == '.' ||
               c == '/' || c == '-';
    };
    // Reserved words are quoted too: `if` as a program name must not open a compound command.
    static const char* const reserved[] = {"!", "{", "}", "case", "do", "done", "elif", "else", "esac",
                                           "fi", "for", "if", "in", "then", "until", "while"};
    bool bare = !word.empty();
    for (unsigned char c : word) bare = bare && safe(c);
    for (const char* r : reserved) bare = bare && word != r;
    if (bare) return std::string(word);
    std::string out = "'";
    for (char c : word) {
        if (c == '\'') out += "'\\''";
        else out += c;
    }
    out += "'";
    return out;
}

std::string shell_join(const std::vector<std::string>& argv) {
    std::string out;
    for (const auto& word : argv) {
        if (!out.empty()) out += ' ';
        out += shell_quote(word);
    }
    return out;
}

}  // namespace dsh
