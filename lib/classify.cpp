#include "classify.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <deque>
#include <limits>
#include <map>
#include <utility>

#include <nlohmann/json.hpp>

#include "denied_path.hpp"
#include "host_pattern.hpp"
#include "error.hpp"

namespace dsh {
namespace {

unsigned char fold(unsigned char c) { return (c >= 'A' && c <= 'Z') ? static_cast<unsigned char>(c + 32) : c; }

std::string lowered(std::string_view text) {
    std::string out(text);
    for (char& c : out) c = static_cast<char>(fold(static_cast<unsigned char>(c)));
    return out;
}

bool is_word_byte(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

bool equal_folded(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (fold(static_cast<unsigned char>(a[i])) != fold(static_cast<unsigned char>(b[i]))) return false;
    return true;
}

}  // namespace

bool is_word_signature(std::string_view signature) {
    if (signature.empty() || signature.front() < 'A' || signature.front() > 'Z') return false;
    return std::all_of(signature.begin(), signature.end(),
                       [](char c) { return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); });
}

std::size_t find_signature(std::string_view line, std::string_view signature) {
    const std::string folded_line = lowered(line);
    const std::string folded_signature = lowered(signature);
    const bool word = is_word_signature(signature);
    for (std::size_t at = folded_line.find(folded_signature); at != std::string::npos;
         at = folded_line.find(folded_signature, at + 1)) {
        const std::size_t end = at + folded_signature.size();
        if (!word) return at;
        if ((at == 0 || !is_word_byte(static_cast<unsigned char>(line[at - 1]))) &&
            (end == line.size() || !is_word_byte(static_cast<unsigned char>(line[end]))))
            return at;
    }
    return std::string_view::npos;
}

std::string_view to_string(Verdict verdict) {
    switch (verdict) {
        case Verdict::Success: return "success";
        case Verdict::RunnerFailure: return "runner-failure";
        case Verdict::Denial: return "denial";
        case Verdict::Failure: return "failure";
        case Verdict::Timeout: return "timeout";
        case Verdict::Limit: return "limit";
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

StreamClassifier::StreamClassifier(Dialect dialect) : dialect_(std::move(dialect)) {
    validate_dialect(dialect_);
    rule_hits_.resize(dialect_.runnerFailureRules.size());
    open_slots_ = rule_hits_.size() + (dialect_.denialSignatures.empty() ? 0 : 1);
    // The patterns and the automaton are made on the first bytes fed (build): most runs that
    // succeed print nothing on stderr, and for them it would be the largest cost of
    // attribution (docs/performance.md).
}

void StreamClassifier::make_patterns() {
    for (std::size_t r = 0; r < dialect_.runnerFailureRules.size(); ++r) {
        const auto& rule = dialect_.runnerFailureRules[r];
        for (std::size_t i = 0; i < rule.fatalSignatures.size(); ++i)
            patterns_.push_back({lowered(rule.fatalSignatures[i]), static_cast<int>(r), i, false});
        for (const auto& info : rule.informationalLines)
            prefix_limit_ = std::max(prefix_limit_, info.size() + 1);  // +1: a trailing '\r'
    }
    for (std::size_t i = 0; i < dialect_.denialSignatures.size(); ++i) {
        const std::string& signature = dialect_.denialSignatures[i];
        const bool word = is_word_signature(signature);
        patterns_.push_back({lowered(signature), -1, i, word});
        if (word) longest_word_ = std::max(longest_word_, signature.size());
    }
    seen_.assign(patterns_.size(), 0);
}

namespace {

constexpr std::uint32_t kAccepting = 1U << 31;
constexpr std::size_t kNoMatch = static_cast<std::size_t>(-1);
constexpr std::size_t kMaxAnchorLength = 32;
constexpr std::size_t kMaxProbeOffset = 16;
constexpr std::size_t kProbeSample = std::size_t{64} * 1024;
// What one more probe costs, in candidates of the sample: a compare on every byte, about as
// much as running the automaton from one candidate every 2 KiB (measured with micro_bench).
constexpr double kProbeCost = static_cast<double>(kProbeSample) / 2048;
// The most partial covers the probe search looks at: it goes depth first, rarest pairs first,
// so it holds a good cover long before; the bound only keeps odd dialects from costing time.
constexpr std::size_t kSearchNodes = std::size_t{1} << 16;

// A rough frequency of bytes in build logs and English text. It only chooses how to skip
// (which is correct whatever the input), so a coarse ranking is enough.
double typical_weight(unsigned char c) {
    static constexpr std::string_view by_rank = "etaoinsrhldcumfpgwybvkxjqz";
    static constexpr std::string_view log_punctuation = "/.:-_'\"(),=[]<>";
    if (c == ' ') return 30;
    if (c >= 'a' && c <= 'z') return static_cast<double>(27 - by_rank.find(static_cast<char>(c)));
    if (c >= 'A' && c <= 'Z') return 0.2 * static_cast<double>(27 - by_rank.find(static_cast<char>(c + 32)));
    if (c >= '0' && c <= '9') return 6;
    if (log_punctuation.find(static_cast<char>(c)) != std::string_view::npos) return 8;
    if (c > ' ' && c < 0x7f) return 2;
    return 0.1;
}

bool within_a_line(const std::string& text) { return text.find('\n') == std::string::npos; }

// The probe filter compares bytes with bit 0x20 set, which folds ASCII case (and merges a few
// other pairs: harmless, the automaton checks every candidate).
unsigned char probe_byte(unsigned char c) { return static_cast<unsigned char>(c | 0x20); }

// The first q in [from, end) where data[q], data[q+1] is one of the probes, or end; data[end]
// must be readable. Written for the compiler to vectorize the inner loop (SSE2 on any x86-64).
template <std::size_t N>
std::size_t find_probe(const std::array<std::array<unsigned char, 2>, kMaxProbes>& probes, const unsigned char* data,
                       std::size_t from, std::size_t end) {
    std::array<unsigned char, N> first{}, second{};
    for (std::size_t k = 0; k < N; ++k) {
        first[k] = probes[k][0];
        second[k] = probes[k][1];
    }
    constexpr std::size_t kBlock = 64;
    std::size_t q = from;
    for (; q + kBlock <= end; q += kBlock) {
        unsigned char any = 0;
        for (std::size_t j = 0; j < kBlock; ++j) {
            const unsigned char a = data[q + j] | 0x20, b = data[q + j + 1] | 0x20;
            for (std::size_t k = 0; k < N; ++k)
                any |= static_cast<unsigned char>(static_cast<unsigned char>(a == first[k]) &
                                                  static_cast<unsigned char>(b == second[k]));
        }
        if (any) break;
    }
    for (; q < end; ++q) {
        const unsigned char a = data[q] | 0x20, b = data[q + 1] | 0x20;
        for (std::size_t k = 0; k < N; ++k)
            if (a == first[k] && b == second[k]) return q;
    }
    return end;
}

// find_probe for the number of probes in use: each costs a compare per byte, so the loop is
// compiled for each count rather than padded to the most.
std::size_t find_probes(std::size_t count, const std::array<std::array<unsigned char, 2>, kMaxProbes>& probes,
                        const unsigned char* data, std::size_t from, std::size_t end) {
    switch (count) {
        case 1: return find_probe<1>(probes, data, from, end);
        case 2: return find_probe<2>(probes, data, from, end);
        case 3: return find_probe<3>(probes, data, from, end);
        case 4: return find_probe<4>(probes, data, from, end);
        case 5: return find_probe<5>(probes, data, from, end);
        case 6: return find_probe<6>(probes, data, from, end);
        case 7: return find_probe<7>(probes, data, from, end);
        default: return find_probe<8>(probes, data, from, end);
    }
}

}  // namespace

// A dense DFA over byte classes (each folded byte the signatures use, and one class for all
// the others): goto and failure links folded into one table. A signature holding '\n' can
// never occur within a line, so it stays out of the automaton.
void StreamClassifier::build() {
    make_patterns();
    std::vector<std::uint32_t> usable;
    for (std::uint32_t p = 0; p < patterns_.size(); ++p)
        if (within_a_line(patterns_[p].text)) usable.push_back(p);
    matchable_ = !usable.empty();
    class_of_.fill(0);
    classes_ = 1;
    for (std::uint32_t p : usable)
        for (unsigned char c : patterns_[p].text)
            if (class_of_[c] == 0) class_of_[c] = static_cast<std::uint8_t>(classes_++);
    for (int c = 'A'; c <= 'Z'; ++c) class_of_[c] = class_of_[c + 32];  // the texts are lowered
    const std::uint32_t width = classes_;

    // The trie first, in next_ itself: 0 is "no child", as no edge leads back to the root.
    std::size_t bytes = 0;
    for (std::uint32_t p : usable) bytes += patterns_[p].text.size();
    next_.assign(width, 0);
    next_.reserve((bytes + 1) * width);
    out_.assign(1, {});
    for (std::uint32_t p : usable) {
        std::size_t state = 0;
        for (unsigned char c : patterns_[p].text) {
            const std::size_t at = state * width + class_of_[c];
            if (next_[at] == 0) {
                next_[at] = static_cast<std::uint32_t>(out_.size());
                out_.emplace_back();
                next_.resize(out_.size() * width, 0);
            }
            state = next_[at];
        }
        out_[state].push_back(p);
    }
    // Then the failure links, breadth first, each missing edge replaced by its failure's.
    std::vector<std::uint32_t> failure(out_.size(), 0);
    std::deque<std::uint32_t> queue;
    for (std::uint32_t c = 0; c < width; ++c)
        if (next_[c] != 0) queue.push_back(next_[c]);
    while (!queue.empty()) {
        const std::uint32_t state = queue.front();
        queue.pop_front();
        const auto& inherited = out_[failure[state]];
        out_[state].insert(out_[state].end(), inherited.begin(), inherited.end());
        for (std::uint32_t c = 0; c < width; ++c) {
            std::uint32_t& edge = next_[state * width + c];
            const std::uint32_t via_failure = next_[failure[state] * width + c];
            if (edge == 0) {
                edge = via_failure;
            } else {
                failure[edge] = via_failure;
                queue.push_back(edge);
            }
        }
    }
    // Entries hold the next state's row offset, so a step is one load and one mask.
    for (std::uint32_t& edge : next_) edge = edge * width | (out_[edge].empty() ? 0 : kAccepting);
    anchors_.assign(256, {});
    if (matchable_) plan_skip();
}

// Counts the byte pairs of the first kProbeSample bytes of input, then picks the probes by
// them: which pairs are rare depends on the text (".cpp:" makes "p:" common in build logs).
void StreamClassifier::sample(std::string_view chunk) {
    if (pair_counts_.empty()) {
        // Rows of counters only for the first bytes of pairs that can be probes.
        std::uint16_t rows = 0;
        for (const Pattern& pattern : patterns_)
            for (std::size_t at = 0; at + 1 < pattern.text.size() && at <= kMaxProbeOffset; ++at) {
                auto& row = pair_row_[probe_byte(static_cast<unsigned char>(pattern.text[at]))];
                if (row == 0) row = ++rows;
            }
        pair_counts_.assign((rows + 1) * std::size_t{256}, 0);  // row 0: every other first byte
    }
    const std::size_t size = std::min(chunk.size(), kProbeSample - sampled_);
    const auto* data = reinterpret_cast<const unsigned char*>(chunk.data());
    for (std::size_t i = 0; i + 1 < size; ++i) ++pair_counts_[pair_row_[probe_byte(data[i])] * 256 + probe_byte(data[i + 1])];
    sampled_ += size;
    if (sampled_ < kProbeSample) return;
    plan_probes();
    sampling_ = false;
    std::vector<std::uint16_t>().swap(pair_counts_);
}

// Probes: at most kMaxProbes byte pairs such that every signature holds one of them within its
// first kMaxProbeOffset + 2 bytes, the cover expected to cost least: the candidates the sample
// (typical byte frequencies break ties) shows for its pairs, plus kProbeCost for each pair. A
// signature occurs at s only where a probe occurs within [s, s + probe_reach_], so the automaton
// may jump to the probe's position less probe_reach_. False when no such cover is found:
// Horspool stays.
//
// The search is branch and bound: the first signature not yet covered must take one of its own
// (at most 17) pairs, rarest first; a partial cover already costlier than the best found is
// dropped, and at most kSearchNodes are looked at. Signatures of unlike words (bubblewrap's
// messages, errno names, a tool's words) may need a pair they share, however common, or one
// more probe; a greedy pick of the rarest pairs can run out of probes instead.
bool StreamClassifier::plan_probes() {
    std::array<double, 256> weight{};
    double total = 0;
    for (int b = 0; b < 256; ++b) {
        weight[probe_byte(static_cast<unsigned char>(b))] += typical_weight(static_cast<unsigned char>(b));
        total += typical_weight(static_cast<unsigned char>(b));
    }
    using Probe = std::array<unsigned char, 2>;
    auto expected = [&](const Probe& probe) {
        const double prior = weight[probe[0]] * weight[probe[1]] / (total * total);  // per byte
        return pair_counts_[pair_row_[probe[0]] * std::size_t{256} + probe[1]] + 16 * prior;
    };

    // Each candidate pair, with the signatures holding it (a bit set) and its first offset in each.
    struct Candidate {
        Probe probe;
        double cost;
        std::vector<std::uint64_t> holds;
    };
    std::vector<Candidate> candidates;
    std::map<Probe, std::size_t> id_of;
    std::vector<std::vector<std::size_t>> pairs_of;  // per signature: its candidates, rarest first
    std::vector<std::map<std::size_t, std::size_t>> offset_in;  // per signature: candidate -> offset
    for (const Pattern& pattern : patterns_) {
        if (!within_a_line(pattern.text)) continue;
        if (pattern.text.size() < 2) return false;
        pairs_of.emplace_back();
        offset_in.emplace_back();
    }
    const std::size_t texts = pairs_of.size();
    const std::size_t words = (texts + 63) / 64;
    std::size_t text = 0;
    for (const Pattern& pattern : patterns_) {
        if (!within_a_line(pattern.text)) continue;
        for (std::size_t at = 0; at + 1 < pattern.text.size() && at <= kMaxProbeOffset; ++at) {
            const Probe probe{probe_byte(static_cast<unsigned char>(pattern.text[at])),
                              probe_byte(static_cast<unsigned char>(pattern.text[at + 1]))};
            auto [entry, added] = id_of.try_emplace(probe, candidates.size());
            if (added) candidates.push_back({probe, expected(probe), std::vector<std::uint64_t>(words, 0)});
            const std::size_t id = entry->second;
            if (offset_in[text].try_emplace(id, at).second) {
                candidates[id].holds[text / 64] |= std::uint64_t{1} << (text % 64);
                pairs_of[text].push_back(id);
            }
        }
        std::sort(pairs_of[text].begin(), pairs_of[text].end(),
                  [&](std::size_t a, std::size_t b) { return candidates[a].cost < candidates[b].cost; });
        ++text;
    }

    std::vector<std::size_t> chosen, best;
    double best_cost = std::numeric_limits<double>::infinity();
    std::vector<std::uint64_t> covered(words, 0);
    std::size_t budget = kSearchNodes;
    auto search = [&](auto& self, double cost) -> void {
        if (budget == 0) return;
        --budget;
        std::size_t open = texts;
        for (std::size_t w = 0; w < words && open == texts; ++w)
            if (const std::uint64_t left = ~covered[w]; left != 0)
                open = std::min(texts, w * 64 + static_cast<std::size_t>(std::countr_zero(left)));
        if (open == texts) {
            best = chosen;
            best_cost = cost;
            return;
        }
        if (chosen.size() == probes_.size()) return;
        const std::vector<std::uint64_t> before = covered;
        for (std::size_t id : pairs_of[open]) {
            if (cost + candidates[id].cost + kProbeCost >= best_cost) break;  // rarest first: the rest cost more
            for (std::size_t w = 0; w < words; ++w) covered[w] = before[w] | candidates[id].holds[w];
            chosen.push_back(id);
            self(self, cost + candidates[id].cost + kProbeCost);
            chosen.pop_back();
        }
        covered = before;
    };
    if (texts == 0) return false;
    search(search, 0.0);
    if (best.empty()) return false;

    std::size_t reach = 0;
    for (std::size_t t = 0; t < texts; ++t) {
        std::size_t nearest = kMaxProbeOffset;
        for (std::size_t id : best)
            if (auto found = offset_in[t].find(id); found != offset_in[t].end()) nearest = std::min(nearest, found->second);
        reach = std::max(reach, nearest);
    }
    for (std::size_t k = 0; k < best.size(); ++k) probes_[k] = candidates[best[k]].probe;
    probe_count_ = best.size();
    probe_reach_ = reach;
    use_probes_ = true;
    return true;
}

// Every signature begins with an anchor: its first L bytes, for the L (at most the shortest
// signature's length) that promises the longest expected jump per window looked at.
void StreamClassifier::plan_skip() {
    std::size_t shortest = kMaxAnchorLength;
    for (const Pattern& pattern : patterns_)
        if (within_a_line(pattern.text)) shortest = std::min(shortest, pattern.text.size());
    double best_score = -1;
    for (std::size_t length = 1; length <= shortest; ++length) {
        std::vector<std::string> anchors;
        for (const Pattern& pattern : patterns_)
            if (within_a_line(pattern.text)) anchors.push_back(pattern.text.substr(0, length));
        std::sort(anchors.begin(), anchors.end());
        anchors.erase(std::unique(anchors.begin(), anchors.end()), anchors.end());
        std::array<std::size_t, 256> shift;
        shift.fill(length);
        std::array<std::size_t, 256> ending{};
        for (const std::string& anchor : anchors) {
            for (std::size_t j = 0; j + 1 < length; ++j) {
                const auto c = static_cast<unsigned char>(anchor[j]);
                shift[c] = std::min(shift[c], length - 1 - j);
            }
            ++ending[static_cast<unsigned char>(anchor.back())];
        }
        double moved = 0, cost = 0;
        for (int b = 0; b < 256; ++b) {
            const unsigned char c = fold(static_cast<unsigned char>(b));
            const double weight = typical_weight(static_cast<unsigned char>(b));
            moved += weight * static_cast<double>(shift[c]);
            cost += weight * (1.0 + static_cast<double>(ending[c]));
        }
        const double score = moved / cost;
        if (score <= best_score) continue;
        best_score = score;
        anchor_length_ = length;
        for (auto& list : anchors_) list.clear();
        for (const std::string& anchor : anchors) anchors_[static_cast<unsigned char>(anchor.back())].push_back(anchor);
        for (int b = 0; b < 256; ++b) {
            const unsigned char c = fold(static_cast<unsigned char>(b));
            shift_after_[static_cast<std::size_t>(b)] = static_cast<std::uint8_t>(shift[c]);
            shift_[static_cast<std::size_t>(b)] = ending[c] ? 0 : static_cast<std::uint8_t>(shift[c]);
        }
    }
}

// The first position from `from` where an anchor begins, or where too few bytes are left to
// hold one (the automaton then steps through them, to carry its state into the next feed).
// Horspool: a window [s, s+L) whose last byte lies at no anchor position j < L-1 within
// `shift` of the end rules out every anchor starting in (s, s+shift), even one that would
// reach past `size`.
std::size_t StreamClassifier::skip(const unsigned char* data, std::size_t from, std::size_t size) const {
    const std::size_t length = anchor_length_;
    std::size_t at = from;
    while (at + length <= size) {
        const unsigned char last = data[at + length - 1];
        const std::uint8_t shift = shift_[last];
        if (shift != 0) {
            at += shift;
            continue;
        }
        for (const std::string& anchor : anchors_[fold(last)]) {
            std::size_t j = 0;
            while (j + 1 < length && fold(data[at + j]) == static_cast<unsigned char>(anchor[j])) ++j;
            if (j + 1 >= length) return at;
        }
        at += shift_after_[last];
    }
    return std::min(at, size);
}

// Runs the automaton from state_ over data[from, size), jumping ahead wherever it is at the
// root. Returns the position just past the first byte that ends a signature (state_ is then
// that accepting state), or kNoMatch.
std::size_t StreamClassifier::advance(const unsigned char* data, std::size_t from, std::size_t size) {
    const std::uint32_t* next = next_.data();
    std::uint32_t state = state_;
    std::size_t i = from;
    std::size_t filtered_to = from;  // no jump before here: a probe found ahead is being run to
    while (i < size) {
        if (state == 0 && i >= filtered_to) {
            if (use_probes_) {
                // Pairs start at q < size - 1; a signature with its probe past that may still begin
                // within probe_reach_ of the end, and continue in the next feed.
                const std::size_t end = size - 1;
                const std::size_t q = i < end ? find_probes(probe_count_, probes_, data, i, end) : end;
                i = std::max(i, q - std::min(q, probe_reach_));
                filtered_to = q < end ? q + 1 : size;
            } else {
                i = skip(data, i, size);
                if (i == size) break;
            }
        }
        const std::uint32_t entry = next[state + class_of_[data[i++]]];
        state = entry & ~kAccepting;
        if (entry & kAccepting) {
            state_ = state;
            return i;
        }
    }
    state_ = state;
    return kNoMatch;
}

void StreamClassifier::mark(std::uint32_t pattern) {
    seen_[pattern] = line_number_;
    seen_list_.push_back(pattern);
}

// Whether the byte before a match starting at `start_in_line` (a position in the current line)
// is no word byte: the piece's own byte, or one kept in tail_ from the line's earlier pieces.
// `before` is the length of the line in earlier pieces; the match ends within this piece, so
// the byte before it lies at most longest_word_ bytes back.
bool StreamClassifier::word_starts(const unsigned char* data, std::size_t start_in_line, std::size_t before) const {
    if (start_in_line == 0) return true;
    const std::size_t at = start_in_line - 1;
    const unsigned char c = at >= before ? data[at - before] : static_cast<unsigned char>(tail_[tail_.size() - (before - at)]);
    return !is_word_byte(c);
}

// The signatures ending at data[end - 1] in the current piece (of `size` bytes, after `before`
// bytes of the line). A word signature counts only between word boundaries; when it ends with
// the piece, the byte that decides is the next piece's first (or the line's end).
void StreamClassifier::record_hits(const unsigned char* data, std::size_t end, std::size_t size, std::size_t before) {
    for (std::uint32_t p : out_[state_ / classes_]) {
        if (seen_[p] == line_number_) continue;
        const Pattern& pattern = patterns_[p];
        if (pattern.word) {
            if (!word_starts(data, before + end - pattern.text.size(), before)) continue;
            if (end == size) {
                pending_.push_back(p);
                continue;
            }
            if (is_word_byte(data[end])) continue;
        }
        mark(p);
    }
}

// A piece of the current line (no '\n' in it): kept as evidence up to the prefix limit, and
// matched with the automaton's state carried from the line's earlier pieces.
void StreamClassifier::scan(const char* data, std::size_t size) {
    if (size == 0) return;
    line_open_ = true;
    if (prefix_.size() < prefix_limit_)
        prefix_.append(data, std::min(size, prefix_limit_ - prefix_.size()));
    const std::size_t before = line_length_;
    line_length_ += size;
    if (!matchable_ || settled()) return;
    const auto* bytes = reinterpret_cast<const unsigned char*>(data);
    if (!pending_.empty()) {
        if (!is_word_byte(bytes[0]))
            for (std::uint32_t p : pending_)
                if (seen_[p] != line_number_) mark(p);
        pending_.clear();
    }
    for (std::size_t i = 0; (i = advance(bytes, i, size)) != kNoMatch;) record_hits(bytes, i, size, before);
    if (longest_word_ == 0) return;
    if (size >= longest_word_) {
        tail_.assign(data + size - longest_word_, longest_word_);
    } else {
        tail_.append(data, size);
        if (tail_.size() > longest_word_) tail_.erase(0, tail_.size() - longest_word_);
    }
}

// Whole lines, `data` ending with '\n', from the root. The automaton runs across newlines (no
// signature holds one, so each sends it back to the root) and nothing is done per line until
// a signature occurs: then that line alone is matched again from its start, to collect every
// signature in it, and its evidence kept.
void StreamClassifier::scan_lines(const char* data, std::size_t size) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(data);
    std::size_t from = 0;
    while (true) {
        const std::size_t hit = advance(bytes, from, size);
        if (hit == kNoMatch) return;
        std::size_t start = hit - 1;
        while (start > from && data[start - 1] != '\n') --start;
        const auto* newline = static_cast<const char*>(std::memchr(data + hit, '\n', size - hit));
        const auto end = static_cast<std::size_t>(newline - data);
        state_ = 0;
        scan(data + start, end - start);
        end_line();
        if (settled()) return;
        from = end + 1;
    }
}

void StreamClassifier::end_line() {
    for (std::uint32_t p : pending_)  // the line's end is a word boundary
        if (seen_[p] != line_number_) mark(p);
    pending_.clear();
    tail_.clear();
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
    if (chunk.empty()) return;
    if (!built_) {
        build();
        built_ = true;
    }
    if (!matchable_ || settled()) return;  // nothing fed from now on can change the verdict
    if (sampling_) sample(chunk);
    const char* data = chunk.data();
    std::size_t size = chunk.size();
    const auto* newline = static_cast<const char*>(std::memchr(data, '\n', size));
    if (!newline) {
        scan(data, size);
        return;
    }
    if (line_open_) {  // the line that earlier feeds left open ends here
        scan(data, static_cast<std::size_t>(newline - data));
        end_line();
        if (settled()) return;
        size -= static_cast<std::size_t>(newline + 1 - data);
        data = newline + 1;
    }
    std::size_t whole_lines = size;
    while (whole_lines > 0 && data[whole_lines - 1] != '\n') --whole_lines;
    if (whole_lines > 0) {
        scan_lines(data, whole_lines);
        if (settled()) return;
    }
    scan(data + whole_lines, size - whole_lines);
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
        result.host = refused_host(*result.line);
        if (!result.host) result.path = denied_path(*result.line, *result.signature);
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
    if (result.path) out += "path: " + *result.path + "\n";
    if (result.host) out += "host: " + *result.host + "\n";
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
    out["path"] = result.path ? nlohmann::ordered_json(*result.path) : nlohmann::ordered_json(nullptr);
    out["host"] = result.host ? nlohmann::ordered_json(*result.host) : nlohmann::ordered_json(nullptr);
    return out.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace dsh
