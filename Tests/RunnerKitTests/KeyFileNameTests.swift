import RunnerKit
import Testing

/// The file name a key's record, cancel request and lock take: letters, digits and `._-` kept,
/// anything else `_` (one per character), a leading `.` made `_`, at most 100 characters; when
/// any of that changed the key (or it was empty or long), `-` and the first ten hex digits of the
/// key's SHA-256, so two keys never share a file. Each expectation written out by the rule.
@Suite struct KeyFileNameTests {
    static func hash(_ key: String) -> String { String(SHA256.hex(Array(key.utf8)).prefix(10)) }

    @Test(arguments: [
        ("e1", "e1"),
        ("a.b_c-D9", "a.b_c-D9"),
        ("entry:e1", "entry_e1-" + hash("entry:e1")),
        ("image:https://h/x.png", "image_https___h_x.png-" + hash("image:https://h/x.png")),
        (".hidden", "_hidden-" + hash(".hidden")),
        ("..", "_.-" + hash("..")),
        ("", "-" + hash("")),
        ("é", "_-" + hash("é")),
        ("a€b😀c", "a_b_c-" + hash("a€b😀c")),
        (String(repeating: "a", count: 100), String(repeating: "a", count: 100)),
        (String(repeating: "a", count: 101), String(repeating: "a", count: 100) + "-" + hash(String(repeating: "a", count: 101))),
        (String(repeating: "é", count: 120), String(repeating: "_", count: 100) + "-" + hash(String(repeating: "é", count: 120))),
    ])
    func aKeyBecomesTheNameTheRulesGive(key: String, expected: String) {
        #expect(OutputStore.fileName(forKey: key) == expected)
    }

    @Test func keysThatLookAlikeAfterTheRulesStillGetNamesOfTheirOwn() {
        let names = ["a:b", "a/b", "a_b", "a b", "a\u{0}b"].map(OutputStore.fileName(forKey:))
        #expect(Set(names).count == names.count)
        #expect(names[2] == "a_b")
    }
}
