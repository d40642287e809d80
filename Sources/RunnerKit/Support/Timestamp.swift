import Foundation

/// UTC timestamps with milliseconds, as records show them: `2026-11-22T10:00:00.041Z`.
public enum Timestamp {
    public static func iso8601(_ date: Date) -> String {
        let millis = Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
        var seconds = time_t(millis / 1000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func pad(_ value: Int32, _ width: Int) -> String {
            let s = String(value)
            return String(repeating: "0", count: max(0, width - s.count)) + s
        }
        return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))T"
            + "\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2)).\(pad(Int32(millis % 1000), 3))Z"
    }

    /// A compact, sortable id for a run: `20261122T100000Z-4f2a`.
    public static func runID(_ date: Date = Date()) -> String {
        let iso = iso8601(date)
        let compact = iso.prefix(19).filter { $0 != "-" && $0 != ":" }
        let suffix = String(UInt16.random(in: 0...UInt16.max), radix: 16)
        return "\(compact)Z-\(String(repeating: "0", count: 4 - suffix.count))\(suffix)"
    }
}
