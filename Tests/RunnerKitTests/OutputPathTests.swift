import RunnerKit
import Testing

/// `output` paths: each input with the outcome the rules give, written out by hand. The rules
/// (docs/job-files.md, "Fields of every job"): relative to the output directory, never
/// absolute, never climbing out with `..`, never into `results/` or `runs/` or a hidden name,
/// naming a file; empty parts and `.` parts are dropped. Paths are read byte by byte, as the file
/// system reads them, so a '/', '.' or '~' followed by a combining mark is still that byte.
@Suite struct OutputPathTests {
    enum Outcome: Equatable, CustomStringConvertible {
        case accepted(String)
        case refused(String)

        var description: String {
            switch self {
            case .accepted(let path): return "accepted as '\(path)'"
            case .refused(let message): return "refused: \(message)"
            }
        }
    }

    static let empty = Outcome.refused("must not be empty")
    static func absolute(_ path: String) -> Outcome { .refused("must be a path relative to the output directory, not '\(path)'") }
    static let nul = Outcome.refused("must not contain a NUL character")
    static let climbs = Outcome.refused("must not climb out of the output directory with '..'")
    static let noFile = Outcome.refused("must name a file")
    static let reserved = Outcome.refused("must not point into results/, runs/ or a hidden name")

    static let long255 = String(repeating: "n", count: 255)
    static let long256 = String(repeating: "n", count: 256)
    /// 128 two-byte characters: 256 bytes in one name.
    static let accented256 = String(repeating: "é", count: 128)

    static let table: [(path: String, outcome: Outcome)] = [
        // Plain relative paths, empty and `.` parts dropped.
        ("a.json", .accepted("a.json")),
        ("entries/1/2.json", .accepted("entries/1/2.json")),
        ("a//b", .accepted("a/b")),
        ("./a", .accepted("a")),
        ("a/./b/.", .accepted("a/b")),
        ("a/.", .accepted("a")),
        ("日本/語.json", .accepted("日本/語.json")),
        ("é/x", .accepted("é/x")),
        // Names that only look like the reserved folders are fine; the check is case-sensitive.
        ("a/results", .accepted("a/results")),
        ("resultsx/y", .accepted("resultsx/y")),
        ("run/x", .accepted("run/x")),
        ("RESULTS/x", .accepted("RESULTS/x")),
        // Nothing left that names a file.
        ("", empty),
        (".", noFile),
        ("./", noFile),
        ("a/", noFile),
        ("a/b/", noFile),
        // Absolute, or the shell's home.
        ("/", absolute("/")),
        ("//", absolute("//")),
        ("/etc/passwd", absolute("/etc/passwd")),
        ("~/x", absolute("~/x")),
        ("~", absolute("~")),
        ("a\u{0}b", nul),
        // Climbing, and names that merely start with dots (hidden).
        ("..", climbs),
        ("a/../b", climbs),
        ("a/..b", reserved),
        ("..a/b", reserved),
        ("a/...", reserved),
        (".hidden", reserved),
        ("a/.b/c", reserved),
        // The runner's own folders.
        ("results", reserved),
        ("results/x", reserved),
        ("./results/x", reserved),
        ("runs/x", reserved),
        // A file name of at most 255 bytes (only the last part is measured here; the file
        // system refuses a longer folder name when the payload is written).
        (long255, .accepted(long255)),
        (long256, noFile),
        ("d/\(long256)/f", .accepted("d/\(long256)/f")),
        ("x/\(accented256)", noFile),
        // Combining marks: a mark joins the character before it.
        ("a/\u{301}b", .accepted("a/\u{301}b")),
        ("a/\u{301}", .accepted("a/\u{301}")),
        // Read as the file system reads them, byte by byte: a combining mark does not hide
        // the '/', '~' or '.' before it.
        ("/\u{301}x", absolute("/\u{301}x")),
        ("~\u{301}", absolute("~\u{301}")),
        (".\u{301}x", reserved),
        ("a/.\u{301}/b", reserved),
        ("..\u{301}/x", reserved),
        ("results\u{301}/x", .accepted("results\u{301}/x")),
        ("x/\u{301}", .accepted("x/\u{301}")),
    ]

    @Test func eachPathHasTheOutcomeTheRulesGive() {
        for (path, expected) in Self.table {
            let got: Outcome
            do {
                got = .accepted(try OutputStore.validateOutput(path))
            } catch {
                #expect(error.field == "output")
                got = .refused(error.message)
            }
            #expect(got == expected, "\(path.unicodeScalars.map { String($0.value, radix: 16) })")
        }
    }

    /// A prepended mark (U+0600 joins the character after it) hides a '/' from the reading by
    /// characters, while the file system still reads `x\u{600}`, `..`, `y`: a `..` part that the
    /// rules must refuse, else a link named `x\u{600}` inside the output directory leads out.
    @Test func aSlashHiddenInACharacterStillCountsForDotDot() {
        #expect(throws: JobSpecError.self) { try OutputStore.validateOutput("x\u{600}/../y") }
    }
}
