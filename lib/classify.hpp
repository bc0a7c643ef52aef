// Classification of a failed run: the contract's algorithm as a streaming matcher. stderr is
// fed in chunks of any size; memory stays bounded whatever the input (any bytes, NUL and
// invalid UTF-8 included, lines of any length), because each line is matched as it streams
// through an Aho-Corasick automaton and only a bounded prefix of it is ever kept.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "types.hpp"

namespace dsh {

enum class Verdict { Success, RunnerFailure, Denial, Failure };
std::string_view to_string(Verdict verdict);

// A verdict and its evidence: the matched line (its first kEvidenceBytes bytes, a trailing
// `\r` removed), the signature it contained, and for a runner failure the rule's index.
struct Classification {
    Verdict verdict = Verdict::Failure;
    int exitCode = 0;
    std::optional<std::string> line;
    std::optional<std::string> signature;
    std::optional<std::size_t> rule;
};

inline constexpr std::size_t kEvidenceBytes = 4096;

// Rejects empty signatures, an empty fatalSignatures, and exit codes outside 1..255.
void validate_dialect(const Dialect& dialect);

class StreamClassifier {
public:
    explicit StreamClassifier(const Dialect& dialect);
    void feed(std::string_view chunk);
    // `runner_rules` false: the runner is known to have started the command, so its rules are
    // not applied (a command's own text can never prove a runner failure then).
    Classification finish(int exit_code, bool runner_rules = true);
    // True once every rule and the denial list have evidence: feeding more cannot change
    // the verdict, so a caller may stop matching (and only drain its input).
    bool settled() const;

private:
    struct Pattern {
        std::string text;  // lowercased
        int rule;          // -1 for a denial signature
        std::size_t index; // within the rule's or the denial list
    };
    struct Hit {
        std::string line;
        std::string signature;
    };

    void build();
    void scan(const char* data, std::size_t size);
    void end_line();

    Dialect dialect_;
    std::vector<Pattern> patterns_;
    std::vector<std::int32_t> next_;                 // states x 256
    std::vector<std::vector<std::uint32_t>> out_;   // patterns ending at each state
    std::int32_t state_ = 0;

    // The current line: which patterns it contained (stamped with the line number, so nothing
    // is cleared per line), and a bounded prefix for evidence and informational equality.
    std::uint64_t line_number_ = 1;
    std::vector<std::uint64_t> seen_;
    std::vector<std::uint32_t> seen_list_;
    std::string prefix_;
    std::size_t prefix_limit_ = kEvidenceBytes;
    std::size_t line_length_ = 0;
    bool line_open_ = false;

    std::vector<std::optional<Hit>> rule_hits_;
    std::optional<Hit> denial_hit_;
    std::size_t open_slots_ = 0;
};

// Classifies a whole buffer: a convenience over StreamClassifier.
Classification classify(const Dialect& dialect, std::string_view stderr_text, int exit_code);

std::string render_text(const Classification& result);
std::string render_json(const Classification& result);

}  // namespace dsh
