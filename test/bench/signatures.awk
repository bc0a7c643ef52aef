# Prints a plan's denialSignatures and fatalSignatures (`dsh-confine --print --format json`),
# one a line: the pattern file for `grep -c -i -F -f`. Reads only what the plan's JSON holds
# for these two arrays (strings with \" and \\ escapes); no JSON tool needed.
{ doc = doc $0 }
END {
    while (match(doc, /"(denialSignatures|fatalSignatures)":\[[^]]*\]/)) {
        list = substr(doc, RSTART, RLENGTH)
        doc = substr(doc, RSTART + RLENGTH)
        sub(/^"[A-Za-z]+":\[/, "", list)
        while (match(list, /"([^"\\]|\\.)*"/)) {
            word = substr(list, RSTART + 1, RLENGTH - 2)
            list = substr(list, RSTART + RLENGTH)
            gsub(/\\"/, "\"", word)
            gsub(/\\\\/, "\\", word)
            print word
        }
    }
}
