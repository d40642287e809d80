import RunnerKit
import Testing

/// `output` paths: the checks and the normalized result, the same for every path as the
/// straightforward reading by characters.
@Suite struct OutputPathTests {
    /// The rules as written first, over Swift characters.
    static func reference(_ path: String) -> Result<String, JobSpecError> {
        if path.isEmpty { return .failure(JobSpecError(field: "output", "must not be empty")) }
        if path.hasPrefix("/") || path.hasPrefix("~") {
            return .failure(JobSpecError(field: "output", "must be a path relative to the output directory, not '\(path)'"))
        }
        if path.utf8.contains(0) { return .failure(JobSpecError(field: "output", "must not contain a NUL character")) }
        let parts = path.split(separator: "/", omittingEmptySubsequences: true).filter { $0 != "." }
        if parts.contains("..") {
            return .failure(JobSpecError(field: "output", "must not climb out of the output directory with '..'"))
        }
        guard let first = parts.first, let last = parts.last else {
            return .failure(JobSpecError(field: "output", "must name a file"))
        }
        if first == "results" || first == "runs" || parts.contains(where: { $0.hasPrefix(".") }) {
            return .failure(JobSpecError(field: "output", "must not point into results/, runs/ or a hidden name"))
        }
        if path.hasSuffix("/") || last.utf8.count > 255 {
            return .failure(JobSpecError(field: "output", "must name a file"))
        }
        return .success(parts.joined(separator: "/"))
    }

    static let paths = [
        "a.json", "entries/1/2.json", "a//b", "./a", "a/./b/.", "a/.", ".", "./", "/", "//", "a/", "a/b/",
        "/etc/passwd", "~/x", "~", "a\u{0}b", "..", "a/../b", "a/..b", "..a/b", "a/...", ".hidden", "a/.b/c",
        "results", "results/x", "./results/x", "runs/x", "a/results", "resultsx/y", "run/x", "RESULTS/x",
        String(repeating: "n", count: 255), String(repeating: "n", count: 256), "d/" + String(repeating: "n", count: 256) + "/f",
        "é/x", "a/\u{301}b", "a/\u{301}", "/\u{301}x", "~\u{301}", ".\u{301}x", "a/.\u{301}/b", "..\u{301}/x", "results\u{301}/x",
        "x/\u{301}", "x/" + String(repeating: "é", count: 128), "日本/語.json", "",
    ]

    @Test func checksLikeTheReadingByCharacters() {
        for path in Self.paths {
            let got = Result { () throws(JobSpecError) -> String in try JobDescriptor.validateOutput(path) }
            #expect(got == Self.reference(path), "\(path.unicodeScalars.map { String($0.value, radix: 16) })")
        }
    }
}
