/// A number of bytes a second as a user writes it: `500K`, `2M`, `1G` (powers of 1024, as curl
/// reads them), or bytes (`--limit-rate`, a config host's `limitRate`).
package enum ByteRate {
    /// Nil when the text is not one.
    package static func parse(_ text: String) -> Int? {
        let units: [Character: Int] = ["K": 1024, "k": 1024, "M": 1 << 20, "m": 1 << 20, "G": 1 << 30, "g": 1 << 30]
        var digits = Substring(text)
        var factor = 1
        if let last = digits.last, let unit = units[last] {
            factor = unit
            digits = digits.dropLast()
        }
        guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }), let value = Double(digits),
            value.isFinite, value > 0
        else { return nil }
        let bytes = value * Double(factor)
        guard bytes >= 1, bytes <= Double(Int.max / 2) else { return nil }
        return Int(bytes)
    }
}
