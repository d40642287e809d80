import Foundation

/// When a schedule fires: a cron expression read as Debian's cron reads it, in a time zone, or a
/// fixed period (`--every`).
///
/// Cron: five fields (minute, hour, day of month, month, day of week), each `*`, a value, a
/// range `a-b`, a step `*/n`, `a-b/n` or `a/n` (from a to the field's end), or a list of those;
/// month and day names (`jan`, `Mon`) in any case; 0 and 7 for Sunday; and the macros
/// `@hourly`, `@daily` (`@midnight`), `@weekly`, `@monthly`, `@yearly` (`@annually`). When both
/// day fields are restricted a day matches if either does, but a field that begins with `*`
/// counts as unrestricted, so then both must (Vixie cron's rule: `*/2` in the day of month and
/// `mon` in the day of week is the odd days that are Mondays).
///
/// Clock changes: a wall time the clock skips fires once, at the first instant after the gap
/// (02:30 on the night the clock goes from 02:00 to 03:00 fires at 03:00); a wall time the
/// clock shows twice fires once, the first time.
///
/// A period fires at every multiple of it since 1970-01-01 00:00 UTC, whatever the zone: every
/// machine of a fleet computes the same ticks.
package struct CronExpression: Sendable, Equatable, CustomStringConvertible {
    /// Why an expression is not one, in words naming the field: `minute: 61 is not in 0-59`.
    package struct Invalid: Error, Sendable, CustomStringConvertible {
        package var description: String
        init(_ description: String) { self.description = description }
    }

    /// The expression as given (a macro stays a macro).
    package let text: String
    /// Set bits: minutes 0-59, hours 0-23, days 1-31, months 1-12, weekdays 0-6 (Sunday 0).
    let minutes: UInt64
    let hours: UInt64
    let days: UInt64
    let months: UInt64
    let weekdays: UInt64
    /// The day fields began with `*` (Vixie's rule: the other field alone decides then).
    let daysStar: Bool
    let weekdaysStar: Bool

    package var description: String { text }

    static let macros: [String: String] = [
        "@hourly": "0 * * * *", "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@weekly": "0 0 * * 0",
        "@monthly": "0 0 1 * *", "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *",
    ]

    static let monthNames = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
    static let dayNames = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]

    package init(_ text: String) throws(Invalid) {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        var fields: [Substring]
        if trimmed.hasPrefix("@") {
            guard let expanded = Self.macros[trimmed.lowercased()] else {
                throw Invalid("\(trimmed) is not a macro cron knows for a schedule (@hourly, @daily, @midnight, @weekly, @monthly, @yearly, @annually)")
            }
            fields = expanded.split(separator: " ")
        } else {
            fields = trimmed.split(whereSeparator: { $0 == " " || $0 == "\t" })
        }
        guard fields.count == 5 else {
            throw Invalid("\(fields.count) field\(fields.count == 1 ? "" : "s"), where cron has 5: minute, hour, day of month, month, day of week")
        }
        self.text = trimmed
        minutes = try Self.field(fields[0], "minute", 0...59, names: [])
        hours = try Self.field(fields[1], "hour", 0...23, names: [])
        days = try Self.field(fields[2], "day of month", 1...31, names: [])
        months = try Self.field(fields[3], "month", 1...12, names: Self.monthNames, firstName: 1)
        var weekdays = try Self.field(fields[4], "day of week", 0...7, names: Self.dayNames, firstName: 0)
        if weekdays & (1 << 7) != 0 { weekdays = (weekdays | 1) & ~(1 << 7) }
        self.weekdays = weekdays
        daysStar = fields[2].hasPrefix("*")
        weekdaysStar = fields[4].hasPrefix("*")
        // A day of month no month selected has (`30 2`, `31 4,6`) never comes.
        if weekdaysStar {
            let longest = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
            let reachable = (1...12).contains { month in
                months & (1 << UInt64(month)) != 0 && (1...longest[month - 1]).contains { days & (1 << UInt64($0)) != 0 }
            }
            if !reachable { throw Invalid("day of month: \(fields[2]) never comes in month \(fields[3])") }
        }
    }

    /// One field's values as bits; `names` (lowercase, the first worth `firstName`) may stand for numbers.
    private static func field(_ text: Substring, _ name: String, _ range: ClosedRange<Int>, names: [String], firstName: Int = 0) throws(Invalid) -> UInt64 {
        var bits: UInt64 = 0
        func number(_ word: Substring) throws(Invalid) -> Int {
            if let value = Int(word) {
                guard range.contains(value) else { throw Invalid("\(name): \(value) is not in \(range.lowerBound)-\(range.upperBound)") }
                return value
            }
            if let index = names.firstIndex(of: word.lowercased()) { return index + firstName }
            if word.isEmpty { throw Invalid("\(name): a value is missing in \(text)") }
            let known = names.isEmpty ? "a number" : "a number or a name (\(names.prefix(3).joined(separator: ", ")), …)"
            throw Invalid("\(name): \(word) is not \(known)")
        }
        for element in text.split(separator: ",", omittingEmptySubsequences: false) {
            var body = element
            var step = 1
            if let slash = element.firstIndex(of: "/") {
                body = element[..<slash]
                let stepText = element[element.index(after: slash)...]
                guard let value = Int(stepText), value > 0 else { throw Invalid("\(name): the step \(stepText.isEmpty ? "is missing" : "\(stepText) is not a whole number above 0") in \(element)") }
                step = value
            }
            var low: Int
            var high: Int
            if body == "*" {
                (low, high) = (range.lowerBound, range.upperBound)
                if name == "day of week" { high = 6 }
            } else if let dash = body.firstIndex(of: "-") {
                low = try number(body[..<dash])
                high = try number(body[body.index(after: dash)...])
                guard low <= high else { throw Invalid("\(name): the range \(body) goes backwards") }
            } else {
                low = try number(body)
                high = element.contains("/") ? range.upperBound : low
            }
            var value = low
            while value <= high {
                bits |= 1 << UInt64(value)
                value += step
            }
        }
        return bits
    }

    // MARK: - When it fires

    /// Whether the local date matches the day fields.
    func matches(year: Int, month: Int, day: Int) -> Bool {
        guard months & (1 << UInt64(month)) != 0 else { return false }
        let dayMatches = days & (1 << UInt64(day)) != 0
        let weekday = Self.weekday(days: Self.daysFromCivil(year, month, day))
        let weekdayMatches = weekdays & (1 << UInt64(weekday)) != 0
        return daysStar || weekdaysStar ? dayMatches && weekdayMatches : dayMatches || weekdayMatches
    }

    /// The first time strictly after `date` that the expression fires in `zone` (nil: none in
    /// the next 30 years, which parsing has ruled out but for Feb 29 with a weekday).
    package func next(after date: Date, in zone: TimeZone) -> Date? {
        let after = Int64(floor(date.timeIntervalSince1970))
        let wall = after + Int64(zone.secondsFromGMT(for: Date(timeIntervalSince1970: TimeInterval(after))))
        // From the local day before (an instant just after a fall-back may still be that day's
        // wall time once shifted), day by day.
        var day = Self.floorDiv(wall, 86_400) - 1
        let last = day + 366 * 30
        while day <= last {
            let (year, month, dayOfMonth) = Self.civil(fromDays: day)
            if matches(year: year, month: month, day: dayOfMonth) {
                for hour in 0..<24 where hours & (1 << UInt64(hour)) != 0 {
                    for minute in 0..<60 where minutes & (1 << UInt64(minute)) != 0 {
                        let instant = Self.instant(wall: day * 86_400 + Int64(hour * 3600 + minute * 60), in: zone)
                        if instant > after { return Date(timeIntervalSince1970: TimeInterval(instant)) }
                    }
                }
            }
            day += 1
        }
        return nil
    }

    /// The instant a wall time (seconds since 1970 as if the zone were UTC) is in `zone`: the
    /// first of two when the clock shows it twice, the first instant after the gap when the
    /// clock skips it.
    static func instant(wall: Int64, in zone: TimeZone) -> Int64 {
        func offset(_ instant: Int64) -> Int64 { Int64(zone.secondsFromGMT(for: Date(timeIntervalSince1970: TimeInterval(instant)))) }
        let offsets = Set([offset(wall - 86_400), offset(wall), offset(wall + 86_400), offset(wall - 2 * 86_400), offset(wall + 2 * 86_400)])
        let valid = offsets.map { wall - $0 }.filter { offset($0) == wall - $0 }
        if let first = valid.min() { return first }
        // A gap: the wall time lies between the offset before the change and the one after;
        // the change itself is the first instant after it.
        let before = offsets.min()!
        let later = offsets.max()!
        var low = wall - later  // shown with the later offset: before the change
        var high = wall - before  // shown with the earlier offset: after the change
        // Find the first instant whose offset makes its wall time later than `wall`.
        while high - low > 1 {
            let middle = low + (high - low) / 2
            if middle + offset(middle) > wall { high = middle } else { low = middle }
        }
        return high
    }

    // MARK: - Civil dates (proleptic Gregorian), after Howard Hinnant's algorithms

    static func floorDiv(_ a: Int64, _ b: Int64) -> Int64 { a >= 0 ? a / b : -((-a + b - 1) / b) }

    static func daysFromCivil(_ year: Int, _ month: Int, _ day: Int) -> Int64 {
        let y = Int64(month <= 2 ? year - 1 : year)
        let era = floorDiv(y, 400)
        let yoe = y - era * 400
        let mp = Int64((month + 9) % 12)
        let doy = (153 * mp + 2) / 5 + Int64(day) - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    static func civil(fromDays days: Int64) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = floorDiv(z, 146_097)
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = Int(doy - (153 * mp + 2) / 5 + 1)
        let month = Int(mp < 10 ? mp + 3 : mp - 9)
        let year = Int(yoe + era * 400) + (month <= 2 ? 1 : 0)
        return (year, month, day)
    }

    /// 0 for Sunday.
    static func weekday(days: Int64) -> Int { Int(((days % 7) + 7 + 4) % 7) }  // 1970-01-01 was a Thursday
}

/// When a schedule fires: a cron expression in a zone, or a fixed period.
package enum ScheduleTiming: Sendable, Equatable, CustomStringConvertible {
    case cron(CronExpression, zone: TimeZone)
    case every(seconds: Int64)

    /// `--every`'s text: a whole number of seconds, minutes or hours (`30s`, `5m`, `2h`), at least 1 s.
    package static func period(_ text: String) throws(CronExpression.Invalid) -> Int64 {
        let units: [Character: Int64] = ["s": 1, "m": 60, "h": 3600]
        guard let unit = text.last.flatMap({ units[$0] }), let count = Int64(text.dropLast()), count > 0, count <= 366 * 86_400 / unit else {
            throw CronExpression.Invalid("--every: \(text.isEmpty ? "nothing" : text) is not a period: a whole number of seconds, minutes or hours above 0, such as 30s, 5m or 2h")
        }
        return count * unit
    }

    /// The first tick strictly after `date`.
    package func next(after date: Date) -> Date? {
        switch self {
        case .cron(let expression, let zone):
            return expression.next(after: date, in: zone)
        case .every(let seconds):
            let now = Int64(floor(date.timeIntervalSince1970))
            return Date(timeIntervalSince1970: TimeInterval((CronExpression.floorDiv(now, seconds) + 1) * seconds))
        }
    }

    package var description: String {
        switch self {
        case .cron(let expression, _): return expression.text
        case .every(let seconds):
            if seconds % 3600 == 0 { return "every \(seconds / 3600)h" }
            if seconds % 60 == 0 { return "every \(seconds / 60)m" }
            return "every \(seconds)s"
        }
    }
}

extension CronExpression {
    /// `2026-03-29T03:00:00+02:00`: the wall time in `zone` with its offset (`+00:00` in UTC).
    package static func iso8601(_ date: Date, in zone: TimeZone) -> String {
        let instant = Int64(floor(date.timeIntervalSince1970))
        let offset = Int64(zone.secondsFromGMT(for: Date(timeIntervalSince1970: TimeInterval(instant))))
        let wall = instant + offset
        let days = floorDiv(wall, 86_400)
        let seconds = wall - days * 86_400
        let (year, month, day) = civil(fromDays: days)
        let sign = offset < 0 ? "-" : "+"
        return String(
            format: "%04d-%02d-%02dT%02d:%02d:%02d%@%02d:%02d", year, month, day, Int(seconds / 3600), Int(seconds / 60 % 60), Int(seconds % 60),
            sign, Int(abs(offset) / 3600), Int(abs(offset) / 60 % 60))
    }

    /// A time as `schedule next --from` takes it: ISO 8601 with an offset or `Z`
    /// (`2026-03-29T01:30:00+01:00`), or a wall time without one (`2026-03-29T01:30`, `2026-03-29 01:30:00`) read in `zone`.
    package static func parseTime(_ text: String, in zone: TimeZone) -> Date? {
        let pattern = /^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})(?::(\d{2}))?(Z|[+-]\d{2}:?\d{2})?$/
        guard let match = text.wholeMatch(of: pattern) else { return nil }
        guard let year = Int(match.1), let month = Int(match.2), let day = Int(match.3), let hour = Int(match.4), let minute = Int(match.5),
            (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60
        else { return nil }
        let second = match.6.flatMap { Int($0) } ?? 0
        guard second < 60 else { return nil }
        let wall = daysFromCivil(year, month, day) * 86_400 + Int64(hour * 3600 + minute * 60 + second)
        guard let zoneText = match.7 else { return Date(timeIntervalSince1970: TimeInterval(instant(wall: wall, in: zone))) }
        if zoneText == "Z" { return Date(timeIntervalSince1970: TimeInterval(wall)) }
        let digits = zoneText.dropFirst().filter(\.isNumber)
        guard let hours = Int64(digits.prefix(2)), let minutes = Int64(digits.suffix(2)) else { return nil }
        let offset = (hours * 3600 + minutes * 60) * (zoneText.hasPrefix("-") ? -1 : 1)
        return Date(timeIntervalSince1970: TimeInterval(wall - offset))
    }
}
