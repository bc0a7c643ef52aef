# Writes about MB megabytes of what a C++ build prints on stderr: make and ninja progress,
# compiler command lines, warnings with their source excerpt and caret, include chains, and
# linker notes. None of it contains a backend's signature. Seeded, so every run writes the
# same bytes.
#   awk -v MB=16 -f build_log.awk > log
function pick(list,   n, parts) { n = split(list, parts, "|"); return parts[1 + int(rand() * n)] }
function path(   depth, p, i) {
    depth = 1 + int(rand() * 4)
    p = pick("/work/src|/home/builder/project|/usr/include/c++/12|../third_party|/build/out")
    for (i = 0; i < depth; i++) p = p "/" pick("core|net|util|io|render|sched|parser|codec|storage|bits|detail|impl|tests|ops")
    return p "/" pick("engine|buffer|reader|writer|queue|stream|tensor|graph|alloc|config|session|vector|map|string") pick(".cpp|.cc|.h|.hpp|.c|.tcc")
}
function flags(   n, f, i) {
    n = 3 + int(rand() * 10)
    f = ""
    for (i = 0; i < n; i++)
        f = f " " pick("-O2|-g|-Wall|-Wextra|-Wpedantic|-fPIC|-std=c++20|-DNDEBUG|-pthread|-fno-omit-frame-pointer|-I/work/include|-isystem /usr/include/boost|-MD|-MT obj.o|-MF obj.o.d")
    return f
}
function word() { return pick("value|result|buffer|count|index|node|status|handle|offset|length|config|stream|entry|callback|options") }
BEGIN {
    srand(42)
    limit = MB * 1048576
    written = 0
    step = 0
    while (written < limit) {
        r = rand()
        if (r < 0.30) {
            step++
            line = sprintf("[%d/%d] Building CXX object src/CMakeFiles/core.dir/%s.o", step, 90000, substr(path(), 2))
        } else if (r < 0.45) {
            line = pick("/usr/bin/c++|/usr/bin/g++-12|/usr/bin/cc|clang++-15") flags() " -c " path() " -o obj/" word() ".o"
        } else if (r < 0.65) {
            line = sprintf("%s:%d:%d: %s: %s '%s' %s", path(), 1 + int(rand() * 3000), 1 + int(rand() * 80),
                           pick("warning|warning|note|error"),
                           pick("unused variable|comparison of integer expressions of different signedness in|declaration of|implicit conversion changes signedness of|narrowing conversion of"),
                           word(), pick("[-Wunused-variable]|[-Wsign-compare]|[-Wshadow]|[-Wconversion]|[-Wnarrowing]|shadows a member of 'this'"))
        } else if (r < 0.75) {
            line = sprintf("  %4d |     %s %s = %s(%s, %s);", 1 + int(rand() * 3000), pick("int|auto|std::size_t|const auto&|double"), word(), word(), word(), word())
        } else if (r < 0.80) {
            line = "      |     " pick("^~~~~~|~~~~^~~~~|    ^|^~~~~~~~~~~~~~~~~~~~~~~~")
        } else if (r < 0.88) {
            line = sprintf("%s from %s:%d%s", pick("In file included|                ") , path(), 1 + int(rand() * 400), pick(",|:"))
        } else if (r < 0.93) {
            line = sprintf("make[%d]: %s directory '%s'", 1 + int(rand() * 3), pick("Entering|Leaving"), substr(path(), 1, 30))
        } else if (r < 0.97) {
            line = sprintf("%s: In %s '%s %s::%s(%s)':", path(), pick("function|member function|instantiation of"), pick("void|int|bool|auto"), word(), word(), pick("int|const std::string&|std::span<const char>|"))
        } else {
            line = sprintf("/usr/bin/ld: %s.o: in function `%s': %s", word(), word(), pick("warning: relocation against symbol in read-only section|note: the linker is slow today|undefined reference to `" word() "'"))
        }
        print line
        written += length(line) + 1
    }
}
