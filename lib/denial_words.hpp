// How programs word the errors a sandbox causes, one list per errno: the C library's text
// (what sh, coreutils, make, git, Go, Rust, Python and Java print), the errno's name (printed
// alone by Node and npm; matched as a whole word, see is_word_signature), and the words of a
// tool family that prints neither. A backend's dialect takes the lists of the errnos it really
// produces; the real output under test/fixtures/denials/ keeps these lists honest.
#pragma once

#include <string>
#include <vector>

namespace dsh {

enum class DeniedErrno {
    Eacces,       // a denied open, create or connect (Landlock; bwrap's hidden paths)
    Erofs,        // a write under a read-only mount (bwrap)
    Exdev,        // a link or rename Landlock refuses to reparent, or across a bind mount (bwrap)
    Ebusy,        // a rename or removal of a mount point (bwrap's protected paths)
    Eperm,        // a socket a seccomp filter refuses
    Enetunreach,  // no route out of an empty network namespace
    ProxyRefused,  // a host the allow-list proxy refused (the `hosts` network): its words, not an errno's
};

// The list for one errno, most specific text first. Signatures are data: see denial_words.cpp
// for which program prints each.
const std::vector<std::string>& denial_words(DeniedErrno error);

// Appends the list of `error` to `signatures`, skipping any already there (two errnos share the
// words of a program that reports either the same way).
void add_denial_words(std::vector<std::string>& signatures, DeniedErrno error);

}  // namespace dsh
