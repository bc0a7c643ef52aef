// The path a denial's evidence line names. Programs put the path next to the error text, in a
// few shapes; this recognizes them (docs/classify.md lists them, with the programs that print
// each). It runs only on the one evidence line, after the stream has ended, so the streaming
// classifier pays nothing for it on any other line.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace dsh {

// `signature` is the denial signature the line contains (as the classifier reports it); the
// shapes are looked for around its first occurrence. nullopt when the line names no path there.
std::optional<std::string> denied_path(std::string_view line, std::string_view signature);

}  // namespace dsh
