#include "classify.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <deque>

#include <nlohmann/json.hpp>

#include "error.hpp"

namespace dsh {
namespace {

unsigned char fold(unsigned char c) { return (c >= 'A' && c <= 'Z') ? static_cast<unsigned char>(c + 32) : c; }

std::string lowered(std::string_view text) {
    std::string out(text);
    for (char& c : out) c = static_cast<char>(fold(static_cast<unsigned char>(c)));
    return out;
}

bool equal_folded(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (fold(static_cast<unsigned char>(a[i])) != fold(static_cast<unsigned char>(b[i]))) return false;
    return true;
}

}  // namespace

std::string_view to_string(Verdict verdict) {
    switch (verdict) {
        case Verdict::Success: return "success";
        case Verdict::RunnerFailure: return "runner-failure";
        case Verdict::Denial: return "denial";
        case Verdict::Failure: return "failure";
    }
    return "failure";
}

void validate_dialect(const Dialect& dialect) {
    for (const auto& signature : dialect.denialSignatures)
        if (signature.empty()) throw Error(code::Plan, "denialSignatures contains an empty signature");
    for (std::size_t k = 0; k < dialect.runnerFailureRules.size(); ++k) {
        const RunnerFailureRule& rule = dialect.runnerFailureRules[k];
        const std::string where = "runnerFailureRules[" + std::to_string(k) + "]";
        if (rule.fatalSignatures.empty()) throw Error(code::Plan, where + ".fatalSignatures is empty");
        for (const auto& signature : rule.fatalSignatures)
            if (signature.empty()) throw Error(code::Plan, where + ".fatalSignatures contains an empty signature");
        if (rule.allowedExitCodes) {
            if (rule.allowedExitCodes->empty()) throw Error(code::Plan, where + ".allowedExitCodes is empty");
            for (int exit_code : *rule.allowedExitCodes)
                if (exit_code < 1 || exit_code > 255)
                    throw Error(code::Plan, where + ".allowedExitCodes holds " + std::to_string(exit_code) +
                                                ", not a nonzero exit status (1-255)");
        }
    }
}

StreamClassifier::StreamClassifier(const Dialect& dialect) : dialect_(dialect) {
    validate_dialect(dialect_);
    for (std::size_t r = 0; r < dialect_.runnerFailureRules.size(); ++r) {
        const auto& rule = dialect_.runnerFailureRules[r];
        for (std::size_t i = 0; i < rule.fatalSignatures.size(); ++i)
            patterns_.push_back({lowered(rule.fatalSignatures[i]), static_cast<int>(r), i});
        for (const auto& info : rule.informationalLines)
            prefix_limit_ = std::max(prefix_limit_, info.size() + 1);  // +1: a trailing '\r'
    }
    for (std::size_t i = 0; i < dialect_.denialSignatures.size(); ++i)
        patterns_.push_back({lowered(dialect_.denialSignatures[i]), -1, i});
    rule_hits_.resize(dialect_.runnerFailureRules.size());
    open_slots_ = rule_hits_.size() + (dialect_.denialSignatures.empty() ? 0 : 1);
    seen_.assign(patterns_.size(), 0);
    build();
}

// A dense DFA: goto and failure links folded into one table, ASCII letters folded to lower case.
void StreamClassifier::build() {
    std::vector<std::array<std::int32_t, 256>> trie(1);
    trie[0].fill(-1);
    out_.assign(1, {});
    for (std::uint32_t p = 0; p < patterns_.size(); ++p) {
        std::int32_t state = 0;
        for (unsigned char c : patterns_[p].text) {
            if (trie[state][c] < 0) {
                trie[state][c] = static_cast<std::int32_t>(trie.size());
                trie.emplace_back();
                trie.back().fill(-1);
                out_.emplace_back();
            }
            state = trie[state][c];
        }
        out_[state].push_back(p);
    }
    const std::size_t states = trie.size();
    next_.assign(states * 256, 0);
    std::vector<std::int32_t> failure(states, 0);
    std::deque<std::int32_t> queue;
    for (int c = 0; c < 256; ++c) {
        const std::int32_t child = trie[0][c];
        next_[c] = child < 0 ? 0 : child;
        if (child > 0) queue.push_back(child);
    }
    while (!queue.empty()) {
        const std::int32_t state = queue.front();
        queue.pop_front();
        const auto& inherited = out_[failure[state]];
        out_[state].insert(out_[state].end(), inherited.begin(), inherited.end());
        for (int c = 0; c < 256; ++c) {
            const std::int32_t child = trie[state][c];
            const std::int32_t via_failure = next_[failure[state] * 256 + c];
            if (child < 0) {
                next_[state * 256 + c] = via_failure;
            } else {
                failure[child] = via_failure;
                next_[state * 256 + c] = child;
                queue.push_back(child);
            }
        }
    }
    // Fold upper-case input onto the lower-case transitions.
    for (std::size_t s = 0; s < states; ++s)
        for (int c = 'A'; c <= 'Z'; ++c) next_[s * 256 + c] = next_[s * 256 + c + 32];
}

void StreamClassifier::scan(const char* data, std::size_t size) {
    if (size == 0) return;
    line_open_ = true;
    if (prefix_.size() < prefix_limit_)
        prefix_.append(data, std::min(size, prefix_limit_ - prefix_.size()));
    line_length_ += size;
    if (patterns_.empty() || settled()) return;
    std::int32_t state = state_;
    const std::int32_t* table = next_.data();
    for (std::size_t i = 0; i < size; ++i) {
        state = table[state * 256 + static_cast<unsigned char>(data[i])];
        if (!out_[state].empty()) {
            for (std::uint32_t p : out_[state]) {
                if (seen_[p] == line_number_) continue;
                seen_[p] = line_number_;
                seen_list_.push_back(p);
            }
        }
    }
    state_ = state;
}

void StreamClassifier::end_line() {
    if (!seen_list_.empty()) {
        std::string_view text = prefix_;
        const bool whole = line_length_ <= prefix_.size();
        if (whole && !text.empty() && text.back() == '\r') text.remove_suffix(1);
        const std::string evidence(text.substr(0, kEvidenceBytes));
        // Report, for each list, the signature that comes first in the list.
        std::sort(seen_list_.begin(), seen_list_.end());
        for (std::uint32_t p : seen_list_) {
            const Pattern& pattern = patterns_[p];
            if (pattern.rule < 0) {
                if (!denial_hit_) {
                    denial_hit_ = Hit{evidence, dialect_.denialSignatures[pattern.index]};
                    --open_slots_;
                }
                continue;
            }
            auto& hit = rule_hits_[static_cast<std::size_t>(pattern.rule)];
            if (hit) continue;
            const RunnerFailureRule& rule = dialect_.runnerFailureRules[static_cast<std::size_t>(pattern.rule)];
            const bool informational =
                whole && std::any_of(rule.informationalLines.begin(), rule.informationalLines.end(),
                                     [&](const std::string& info) { return equal_folded(text, info); });
            if (informational) continue;
            hit = Hit{evidence, rule.fatalSignatures[pattern.index]};
            --open_slots_;
        }
        seen_list_.clear();
    }
    ++line_number_;
    prefix_.clear();
    line_length_ = 0;
    line_open_ = false;
    state_ = 0;
}

void StreamClassifier::feed(std::string_view chunk) {
    const char* data = chunk.data();
    std::size_t size = chunk.size();
    while (size > 0) {
        const void* newline = std::memchr(data, '\n', size);
        if (!newline) {
            scan(data, size);
            return;
        }
        const std::size_t length = static_cast<std::size_t>(static_cast<const char*>(newline) - data);
        scan(data, length);
        end_line();
        data += length + 1;
        size -= length + 1;
    }
}

bool StreamClassifier::settled() const { return open_slots_ == 0; }

Classification StreamClassifier::finish(int exit_code, bool runner_rules) {
    if (line_open_) end_line();
    Classification result;
    result.exitCode = exit_code;
    if (exit_code == 0) {
        result.verdict = Verdict::Success;
        return result;
    }
    for (std::size_t r = 0; runner_rules && r < rule_hits_.size(); ++r) {
        const auto& rule = dialect_.runnerFailureRules[r];
        if (rule.allowedExitCodes &&
            std::find(rule.allowedExitCodes->begin(), rule.allowedExitCodes->end(), exit_code) ==
                rule.allowedExitCodes->end())
            continue;
        if (!rule_hits_[r]) continue;
        result.verdict = Verdict::RunnerFailure;
        result.line = rule_hits_[r]->line;
        result.signature = rule_hits_[r]->signature;
        result.rule = r;
        return result;
    }
    if (denial_hit_) {
        result.verdict = Verdict::Denial;
        result.line = denial_hit_->line;
        result.signature = denial_hit_->signature;
        return result;
    }
    result.verdict = Verdict::Failure;
    return result;
}

Classification classify(const Dialect& dialect, std::string_view stderr_text, int exit_code) {
    StreamClassifier classifier(dialect);
    classifier.feed(stderr_text);
    return classifier.finish(exit_code);
}

std::string render_text(const Classification& result) {
    std::string out(to_string(result.verdict));
    out += "\n";
    if (result.signature) out += "signature: " + *result.signature + "\n";
    if (result.rule) out += "rule: " + std::to_string(*result.rule) + "\n";
    if (result.line) out += "line: " + *result.line + "\n";
    return out;
}

std::string render_json(const Classification& result) {
    nlohmann::ordered_json out;
    out["verdict"] = std::string(to_string(result.verdict));
    out["exitCode"] = result.exitCode;
    out["line"] = result.line ? nlohmann::ordered_json(*result.line) : nlohmann::ordered_json(nullptr);
    out["signature"] = result.signature ? nlohmann::ordered_json(*result.signature) : nlohmann::ordered_json(nullptr);
    out["rule"] = result.rule ? nlohmann::ordered_json(*result.rule) : nlohmann::ordered_json(nullptr);
    return out.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace dsh
