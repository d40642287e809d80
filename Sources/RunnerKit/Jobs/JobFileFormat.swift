import Foundation

/// How a job file is told to be JSON Lines, the same for `runner run`, standard input, `submit`
/// and the spool: by its name (`.jsonl`, `.ndjson`), or by what it holds: the first line that
/// is not blank is a whole JSON object, and more text follows it.
package enum JobFileFormat {
    /// Whether the name says JSON Lines.
    package static func isJSONLines(name: String) -> Bool {
        let lower = name.lowercased()
        return lower.hasSuffix(".jsonl") || lower.hasSuffix(".ndjson")
    }

    /// Whether `bytes` read as JSON Lines by their content.
    package static func looksLikeJSONLines(_ bytes: [UInt8]) -> Bool {
        var lines = bytes.split(separator: 0x0A, omittingEmptySubsequences: false)[...]
        while let first = lines.first, first.allSatisfy(isSpace) { lines.removeFirst() }
        guard let first = lines.popFirst(), isObjectLine(first) else { return false }
        return lines.contains { !$0.allSatisfy(isSpace) }
    }

    /// Whether one line (a UTF-8 byte order mark allowed) is a whole JSON object.
    package static func isObjectLine(_ line: some Collection<UInt8>) -> Bool {
        var bytes = Array(line)
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { bytes.removeFirst(3) }
        if case .object = try? JSONParser.parse(bytes) { return true }
        return false
    }

    static func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0D || byte == 0x0A }
}
