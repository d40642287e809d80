import Foundation

/// UTC timestamps with milliseconds, as records show them: `2026-11-22T10:00:00.041Z`.
package enum Timestamp {
    package static func iso8601(_ date: Date) -> String {
        let millis = Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
        var seconds = time_t(millis >= 0 ? millis / 1000 : (millis - 999) / 1000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        // Fixed width, so written as bytes straight into the string's storage: this runs twice
        // for every record.
        return String(unsafeUninitializedCapacity: 24) { bytes in
            func put(_ value: Int32, at offset: Int, width: Int) {
                var value = value
                for i in stride(from: offset + width - 1, through: offset, by: -1) {
                    bytes[i] = UInt8(ascii: "0") + UInt8(value % 10)
                    value /= 10
                }
            }
            put(parts.tm_year + 1900, at: 0, width: 4)
            bytes[4] = UInt8(ascii: "-")
            put(parts.tm_mon + 1, at: 5, width: 2)
            bytes[7] = UInt8(ascii: "-")
            put(parts.tm_mday, at: 8, width: 2)
            bytes[10] = UInt8(ascii: "T")
            put(parts.tm_hour, at: 11, width: 2)
            bytes[13] = UInt8(ascii: ":")
            put(parts.tm_min, at: 14, width: 2)
            bytes[16] = UInt8(ascii: ":")
            put(parts.tm_sec, at: 17, width: 2)
            bytes[19] = UInt8(ascii: ".")
            put(Int32((millis % 1000 + 1000) % 1000), at: 20, width: 3)
            bytes[23] = UInt8(ascii: "Z")
            return 24
        }
    }

    /// Milliseconds since 1970 of a timestamp as `iso8601` writes it; nil for any other text.
    package static func milliseconds(_ text: String) -> Int64? {
        let bytes = Array(text.utf8)
        guard bytes.count == 24, bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-"), bytes[10] == UInt8(ascii: "T"),
            bytes[13] == UInt8(ascii: ":"), bytes[16] == UInt8(ascii: ":"), bytes[19] == UInt8(ascii: "."), bytes[23] == UInt8(ascii: "Z")
        else { return nil }
        func number(_ from: Int, _ width: Int) -> Int32? {
            var value: Int32 = 0
            for byte in bytes[from..<(from + width)] {
                guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
                value = value * 10 + Int32(byte - UInt8(ascii: "0"))
            }
            return value
        }
        guard let year = number(0, 4), let month = number(5, 2), let day = number(8, 2), let hour = number(11, 2),
            let minute = number(14, 2), let second = number(17, 2), let millis = number(20, 3)
        else { return nil }
        var parts = tm()
        (parts.tm_year, parts.tm_mon, parts.tm_mday) = (year - 1900, month - 1, day)
        (parts.tm_hour, parts.tm_min, parts.tm_sec) = (hour, minute, second)
        return Int64(timegm(&parts)) * 1000 + Int64(millis)
    }

    /// A compact, sortable id for a run: `20261122T100000Z-4f2a`.
    package static func runID(_ date: Date = Date()) -> String {
        let iso = iso8601(date)
        let compact = iso.prefix(19).filter { $0 != "-" && $0 != ":" }
        let suffix = String(UInt16.random(in: 0...UInt16.max), radix: 16)
        return "\(compact)Z-\(String(repeating: "0", count: 4 - suffix.count))\(suffix)"
    }
}
