// Classification of a failed run: the contract's algorithm as a streaming matcher. stderr is
// fed in chunks of any size; memory stays bounded whatever the input (any bytes, NUL and
// invalid UTF-8 included, lines of any length), because each line is matched as it streams
// through an Aho-Corasick automaton and only a bounded prefix of it is ever kept. Speed comes
// from skipping: while no match is in progress, a Horspool skip over the signatures' common
// first bytes jumps ahead, and whole lines without a candidate are never looked at one by one.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "types.hpp"

namespace dsh {

// Timeout and Limit come from `run` alone, which ended the command's tree itself (its deadline,
// its CPU-time watch) or read a limit's own counter (an OOM kill, a refused fork); classify,
// which has only stderr and a status, never gives them.
enum class Verdict { Success, RunnerFailure, Denial, Failure, Timeout, Limit };
std::string_view to_string(Verdict verdict);

// A verdict and its evidence: the matched line (its first kEvidenceBytes bytes, a trailing
// `\r` removed), the signature it contained, for a runner failure the rule's index, and for a
// denial the host the line names when it is the allow-list proxy's refusal (refused_host,
// lib/host_pattern.hpp), or else the path it names, if it names one (denied_path).
struct Classification {
    Verdict verdict = Verdict::Failure;
    int exitCode = 0;
    std::optional<std::string> line;
    std::optional<std::string> signature;
    std::optional<std::size_t> rule;
    std::optional<std::string> path;
    std::optional<std::string> host;  // "example.org:443"
};

inline constexpr std::size_t kEvidenceBytes = 4096;
inline constexpr std::size_t kMaxProbes = 8;  // byte pairs the skip looks for (see plan_probes)

// A denial signature made only of capital letters and digits, beginning with a letter, names an
// errno (EACCES, EROFS): it matches only as a whole word, so never inside EACCESSIBLE or XEROFS.
// Word bytes are ASCII letters, digits and '_'. Case is still folded, as for every signature.
bool is_word_signature(std::string_view signature);

// Where `signature` first occurs in `line` as the classifier matches a denial signature (ASCII
// case folded; a word signature only as a whole word), or npos.
std::size_t find_signature(std::string_view line, std::string_view signature);

// Rejects empty signatures, an empty fatalSignatures, and exit codes outside 1..255.
void validate_dialect(const Dialect& dialect);

class StreamClassifier {
public:
    explicit StreamClassifier(Dialect dialect);
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
        bool word;         // a whole word only (is_word_signature)
    };
    struct Hit {
        std::string line;
        std::string signature;
    };

    void make_patterns();
    void build();
    void sample(std::string_view chunk);
    bool plan_probes();
    void plan_skip();
    std::size_t skip(const unsigned char* data, std::size_t from, std::size_t size) const;
    std::size_t advance(const unsigned char* data, std::size_t from, std::size_t size);
    void record_hits(const unsigned char* data, std::size_t end, std::size_t size, std::size_t before);
    bool word_starts(const unsigned char* data, std::size_t start_in_line, std::size_t before) const;
    void mark(std::uint32_t pattern);
    void scan(const char* data, std::size_t size);
    void scan_lines(const char* data, std::size_t size);
    void end_line();

    Dialect dialect_;
    std::vector<Pattern> patterns_;

    // The automaton: a dense DFA over byte classes (the folded bytes the signatures use, and
    // one class for every other byte), goto and failure links folded into one table. An
    // entry is the next state's row offset, with kAccepting set when signatures end there.
    std::array<std::uint8_t, 256> class_of_{};
    std::uint32_t classes_ = 1;
    std::vector<std::uint32_t> next_;
    std::vector<std::vector<std::uint32_t>> out_;  // patterns ending at each state
    std::uint32_t state_ = 0;                      // a row offset; 0 is the root
    bool built_ = false;                           // the automaton exists (built on the first bytes fed)
    bool matchable_ = false;                       // some signature can occur within a line

    // The jump ahead while no match is in progress. Once the first kProbeSample bytes are
    // counted: a vectorizable search for a few byte pairs (probes), one of which every
    // signature holds near its start. Before that, or without such pairs (a one-byte
    // signature, or more than kMaxProbes needed): Horspool over the signatures' first
    // anchor_length_ bytes; a window whose last byte cannot end an anchor moves on by
    // shift_[byte], one whose last byte can (shift_ 0) is compared with those anchors.
    bool use_probes_ = false;
    bool sampling_ = true;
    std::size_t sampled_ = 0;
    std::array<std::uint16_t, 256> pair_row_{};  // while sampling: pairs seen, by probe bytes
    std::vector<std::uint16_t> pair_counts_;
    std::array<std::array<unsigned char, 2>, kMaxProbes> probes_{};
    std::size_t probe_count_ = 0;  // probes_ in use
    std::size_t probe_reach_ = 0;
    std::size_t anchor_length_ = 1;
    std::array<std::uint8_t, 256> shift_{};
    std::array<std::uint8_t, 256> shift_after_{};
    // By their folded last byte: 256 lists once the automaton is built. Not an array in the
    // object, which a `run` whose command writes nothing to stderr would construct (6 KiB of
    // memory touched for nothing, a first touch of two pages on some hosts).
    std::vector<std::vector<std::string>> anchors_;

    // The current line: which patterns it contained (stamped with the line number, so nothing
    // is cleared per line), and a bounded prefix for evidence and informational equality.
    std::uint64_t line_number_ = 1;
    std::vector<std::uint64_t> seen_;
    std::vector<std::uint32_t> seen_list_;
    std::string prefix_;
    std::size_t prefix_limit_ = kEvidenceBytes;
    std::size_t line_length_ = 0;
    bool line_open_ = false;
    // For word signatures, which need the bytes around a match: the line's last longest_word_
    // bytes before the current piece, and the word matches that end where the piece ends (the
    // byte after them is the next piece's first, or the end of the line).
    std::size_t longest_word_ = 0;
    std::string tail_;
    std::vector<std::uint32_t> pending_;

    std::vector<std::optional<Hit>> rule_hits_;
    std::optional<Hit> denial_hit_;
    std::size_t open_slots_ = 0;
};

// Classifies a whole buffer: a convenience over StreamClassifier.
Classification classify(const Dialect& dialect, std::string_view stderr_text, int exit_code);

std::string render_text(const Classification& result);
std::string render_json(const Classification& result);

}  // namespace dsh
