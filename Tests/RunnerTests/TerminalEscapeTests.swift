import FixtureServer
import Foundation
import RunnerKit
import RunnerTestSupport
import Testing

/// Keys, servers' words and hooks' output reach the terminal, stderr and hook log lines with
/// their control characters escaped: they can neither drive the terminal nor forge a line.
@Suite(.startsProcesses, .timeLimit(.minutes(1)))
struct TerminalEscapeTests {
    @Test func controlCharactersFromJobsServersAndHooksAreShownEscaped() async throws {
        let w = try Workspace()
        // A key that clears the screen and starts a line of its own; a 404 to show it in the
        // table; a hook that writes an escape sequence to stderr.
        w.write("job.json", #"{"kind": "entry", "key": "evil\u001b[2J\nforged: all good", "id": "missing", "url": "\#(w.base)/entries/{id}.json"}"#)
        let result = try await w.run(["run", "job.json", "--on-finish", #"printf '\033[31mred\r\n' >&2"#])
        #expect(result.status != 0)
        for (name, text) in [("stdout", result.stdout), ("stderr", result.stderr)] {
            #expect(!text.utf8.contains(0x1B), "\(name) holds a raw ESC: \(text.debugDescription)")
            #expect(!text.split(separator: "\n").contains { $0.hasPrefix("forged") }, "\(name) has a forged line: \(text)")
            #expect(!text.utf8.contains(0x0D), "\(name) holds a raw CR: \(text.debugDescription)")
        }
        #expect(result.stdout.contains(#"evil\x1B[2J\x0Aforged"#), "the table shows the key escaped: \(result.stdout)")
        #expect(result.stderr.contains(#"on-finish: \x1B[31mred"#), "the hook's line escaped: \(result.stderr)")
        // The record keeps the key as it was (JSON escapes it).
        #expect(try w.record("evil\u{1B}[2J\nforged: all good")["key"]?.stringValue == "evil\u{1B}[2J\nforged: all good")
    }

    @Test(arguments: [
        ("plain text, ünïcode", false, "plain text, ünïcode"),
        ("a\u{1B}[31mb", false, #"a\x1B[31mb"#),
        ("line\nbreak\ttab", false, #"line\x0Abreak\x09tab"#),
        ("line\nbreak\ttab\r", true, "line\nbreak\ttab\\x0D"),
        ("del\u{7F} c1\u{9B} sep\u{2028}", false, #"del\x7F c1\x9B sep\u{2028}"#),
    ])
    func printableEscapesControlCharacters(text: String, keepingLineBreaks: Bool, expected: String) {
        #expect(Printable.escaped(text, keepingLineBreaks: keepingLineBreaks) == expected)
    }
}
