/// Text from jobs and servers made safe to show on a terminal or in a log line: control
/// characters (C0, DEL and C1, escape sequences and line breaks among them) are shown as `\xNN`
/// or `\u{NNNN}`, so a key or an error message can neither drive the terminal nor forge a line.
package enum Printable {
    /// `text` with its control characters escaped; `keepingLineBreaks` keeps `\n` and `\t` (for
    /// text of several lines the runner itself wrote).
    package static func escaped(_ text: String, keepingLineBreaks: Bool = false) -> String {
        guard text.unicodeScalars.contains(where: { needsEscape($0, keepingLineBreaks) }) else { return text }
        var result = ""
        result.reserveCapacity(text.utf8.count + 8)
        for scalar in text.unicodeScalars {
            guard needsEscape(scalar, keepingLineBreaks) else {
                result.unicodeScalars.append(scalar)
                continue
            }
            let hex = String(scalar.value, radix: 16, uppercase: true)
            result += scalar.value < 0x100 ? "\\x" + (hex.count == 1 ? "0" + hex : hex) : "\\u{" + hex + "}"
        }
        return result
    }

    private static func needsEscape(_ scalar: Unicode.Scalar, _ keepingLineBreaks: Bool) -> Bool {
        let value = scalar.value
        if keepingLineBreaks && (value == 0x0A || value == 0x09) { return false }
        // C0, DEL, C1; and the line and paragraph separators, which some terminals break on.
        return value < 0x20 || (0x7F...0x9F).contains(value) || value == 0x2028 || value == 0x2029
    }
}
