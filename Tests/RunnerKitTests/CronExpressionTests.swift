import Foundation
import Testing

@testable import RunnerKit

/// The evaluator against cases from the cron manual (crontab(5)) and the rules for clock changes.
@Suite struct CronExpressionTests {
    static let utc = TimeZone(identifier: "UTC")!
    static let berlin = TimeZone(identifier: "Europe/Berlin")!
    static let newYork = TimeZone(identifier: "America/New_York")!

    /// The next `count` times after `from` (ISO 8601 with offset, read in `zone`), as ISO 8601 in `zone`.
    static func times(_ text: String, in zone: TimeZone = utc, from: String, count: Int = 1) throws -> [String] {
        let expression = try CronExpression(text)
        var date = try #require(CronExpression.parseTime(from, in: zone))
        var result: [String] = []
        for _ in 0..<count {
            date = try #require(expression.next(after: date, in: zone))
            result.append(CronExpression.iso8601(date, in: zone))
        }
        return result
    }

    struct Case: Sendable, CustomStringConvertible {
        var expression: String
        var zone: TimeZone = CronExpressionTests.utc
        var from: String
        var expected: [String]
        var description: String { "\(expression) after \(from) in \(zone.identifier)" }
    }

    static let cases: [Case] = [
        // Every 15 minutes, strictly after the time given.
        Case(expression: "*/15 * * * *", from: "2026-11-27T10:07:00Z", expected: ["2026-11-27T10:15:00+00:00", "2026-11-27T10:30:00+00:00"]),
        Case(expression: "*/15 * * * *", from: "2026-11-27T10:15:00Z", expected: ["2026-11-27T10:30:00+00:00"]),
        // A range with a step: 1, 6, 11, … 26.
        Case(expression: "1-30/5 3 * * *", from: "2026-11-27T03:20:00Z", expected: ["2026-11-27T03:21:00+00:00", "2026-11-27T03:26:00+00:00", "2026-11-28T03:01:00+00:00"]),
        // A value with a step runs to the field's end.
        Case(expression: "50/5 0 * * *", from: "2026-11-27T00:00:00Z", expected: ["2026-11-27T00:50:00+00:00", "2026-11-27T00:55:00+00:00", "2026-11-28T00:50:00+00:00"]),
        // Lists, ranges and names in any case: weekdays at 09:00 and 17:30.
        Case(expression: "0,30 9,17 * * Mon-FRI", from: "2026-11-27T17:00:00Z", expected: ["2026-11-27T17:30:00+00:00", "2026-11-30T09:00:00+00:00"]),
        // 0 and 7 are both Sunday.
        Case(expression: "0 4 * * 7", from: "2026-11-27T00:00:00Z", expected: ["2026-11-29T04:00:00+00:00"]),
        Case(expression: "0 4 * * 0", from: "2026-11-27T00:00:00Z", expected: ["2026-11-29T04:00:00+00:00"]),
        Case(expression: "0 4 * * 5-7", from: "2026-11-28T05:00:00Z", expected: ["2026-11-29T04:00:00+00:00", "2026-12-04T04:00:00+00:00"]),
        // Month names.
        Case(expression: "0 0 1 jan,JUL *", from: "2026-11-27T00:00:00Z", expected: ["2027-01-01T00:00:00+00:00", "2027-07-01T00:00:00+00:00"]),
        // Both day fields restricted: either matches (the 1st, the 15th, and every Friday).
        Case(expression: "0 0 1,15 * fri", from: "2026-11-27T01:00:00Z", expected: ["2026-12-01T00:00:00+00:00", "2026-12-04T00:00:00+00:00", "2026-12-11T00:00:00+00:00", "2026-12-15T00:00:00+00:00"]),
        // A day field beginning with `*` is unrestricted: both must match (odd days that are Mondays).
        Case(expression: "0 0 */2 * mon", from: "2026-11-27T00:00:00Z", expected: ["2026-12-07T00:00:00+00:00", "2026-12-21T00:00:00+00:00"]),
        Case(expression: "0 0 1 * */3", from: "2026-11-27T00:00:00Z", expected: ["2027-05-01T00:00:00+00:00"]),  // a Saturday
        // The 29th of February waits for a leap year.
        Case(expression: "0 0 29 2 *", from: "2026-11-27T00:00:00Z", expected: ["2028-02-29T00:00:00+00:00"]),
        // Macros.
        Case(expression: "@hourly", from: "2026-11-27T10:07:00Z", expected: ["2026-11-27T11:00:00+00:00"]),
        Case(expression: "@daily", from: "2026-11-27T10:07:00Z", expected: ["2026-11-28T00:00:00+00:00"]),
        Case(expression: "@MIDNIGHT", from: "2026-11-27T10:07:00Z", expected: ["2026-11-28T00:00:00+00:00"]),
        Case(expression: "@weekly", from: "2026-11-27T10:07:00Z", expected: ["2026-11-29T00:00:00+00:00"]),
        Case(expression: "@monthly", from: "2026-11-27T10:07:00Z", expected: ["2026-12-01T00:00:00+00:00"]),
        Case(expression: "@yearly", from: "2026-11-27T10:07:00Z", expected: ["2027-01-01T00:00:00+00:00"]),
        Case(expression: "@annually", from: "2026-11-27T10:07:00Z", expected: ["2027-01-01T00:00:00+00:00"]),
        // A zone: 09:00 in Berlin is 08:00 UTC in winter.
        Case(expression: "0 9 * * *", zone: berlin, from: "2026-11-27T08:30:00Z", expected: ["2026-11-28T09:00:00+01:00"]),
        // Spring forward (Berlin, 2026-03-29: 02:00 CET becomes 03:00 CEST): 02:30 does not
        // exist and fires once at the first instant after the gap, 03:00; the next day as usual.
        Case(expression: "30 2 * * *", zone: berlin, from: "2026-03-28T12:00:00Z", expected: ["2026-03-29T03:00:00+02:00", "2026-03-30T02:30:00+02:00"]),
        // Every skipped time fires at that one instant, once; then the clock goes on.
        Case(expression: "*/15 * * * *", zone: berlin, from: "2026-03-29T01:40:00+01:00", expected: ["2026-03-29T01:45:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-29T03:15:00+02:00"]),
        // Fall back (Berlin, 2026-10-25: 03:00 CEST becomes 02:00 CET): 02:30 comes twice and fires the first time only.
        Case(expression: "30 2 * * *", zone: berlin, from: "2026-10-24T12:00:00Z", expected: ["2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"]),
        Case(expression: "*/30 * * * *", zone: berlin, from: "2026-10-25T02:10:00+02:00", expected: ["2026-10-25T02:30:00+02:00", "2026-10-25T03:00:00+01:00", "2026-10-25T03:30:00+01:00"]),
        // New York, 2026-03-08: 02:00 EST becomes 03:00 EDT; 2026-11-01: 02:00 EDT becomes 01:00 EST.
        Case(expression: "0 2 * * *", zone: newYork, from: "2026-03-07T12:00:00Z", expected: ["2026-03-08T03:00:00-04:00", "2026-03-09T02:00:00-04:00"]),
        Case(expression: "30 1 * * *", zone: newYork, from: "2026-10-31T12:00:00Z", expected: ["2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"]),
    ]

    @Test(arguments: cases) func theNextTimes(_ example: Case) throws {
        #expect(try Self.times(example.expression, in: example.zone, from: example.from, count: example.expected.count) == example.expected)
    }

    @Test(arguments: [
        ("61 * * * *", "minute: 61 is not in 0-59"),
        ("* 24 * * *", "hour: 24 is not in 0-23"),
        ("* * 0 * *", "day of month: 0 is not in 1-31"),
        ("* * * 13 *", "month: 13 is not in 1-12"),
        ("* * * * 8", "day of week: 8 is not in 0-7"),
        ("* * * foo *", "month: foo is not a number or a name (jan, feb, mar, …)"),
        ("* * * * funday", "day of week: funday is not a number or a name (sun, mon, tue, …)"),
        ("*/0 * * * *", "minute: the step 0 is not a whole number above 0 in */0"),
        ("5-1 * * * *", "minute: the range 5-1 goes backwards"),
        ("1,,2 * * * *", "minute: a value is missing in 1,,2"),
        ("* * * *", "4 fields, where cron has 5: minute, hour, day of month, month, day of week"),
        ("* * * * * *", "6 fields, where cron has 5: minute, hour, day of month, month, day of week"),
        ("0 0 30 2 *", "day of month: 30 never comes in month 2"),
        ("@reboot", "@reboot is not a macro cron knows for a schedule (@hourly, @daily, @midnight, @weekly, @monthly, @yearly, @annually)"),
    ])
    func aBadExpressionSaysWhichFieldAndWhy(_ text: String, _ message: String) {
        #expect(throws: CronExpression.Invalid.self) { try CronExpression(text) }
        do {
            _ = try CronExpression(text)
        } catch {
            #expect(error.description == message)
        }
    }

    @Test func periodsAreMultiplesSinceTheEpoch() throws {
        #expect(try ScheduleTiming.period("30s") == 30)
        #expect(try ScheduleTiming.period("5m") == 300)
        #expect(try ScheduleTiming.period("2h") == 7200)
        for bad in ["0s", "1", "1.5m", "-5m", "5d", "", "m"] {
            #expect(throws: CronExpression.Invalid.self, "\(bad)") { try ScheduleTiming.period(bad) }
        }
        let every = ScheduleTiming.every(seconds: 2)
        #expect(every.next(after: Date(timeIntervalSince1970: 10.5)) == Date(timeIntervalSince1970: 12))
        #expect(every.next(after: Date(timeIntervalSince1970: 12)) == Date(timeIntervalSince1970: 14))
    }

    @Test func timesAreReadWithOrWithoutAnOffset() throws {
        #expect(CronExpression.parseTime("2026-03-29T01:30:00+01:00", in: Self.utc) == Date(timeIntervalSince1970: 1_774_744_200))
        #expect(CronExpression.parseTime("2026-03-29T00:30:00Z", in: Self.berlin) == Date(timeIntervalSince1970: 1_774_744_200))
        #expect(CronExpression.parseTime("2026-03-29 01:30", in: Self.berlin) == Date(timeIntervalSince1970: 1_774_744_200))
        #expect(CronExpression.parseTime("yesterday", in: Self.utc) == nil)
    }

    @Test func civilDatesRoundTrip() {
        for days in stride(from: Int64(-800_000), through: 800_000, by: 997) {
            let (year, month, day) = CronExpression.civil(fromDays: days)
            #expect(CronExpression.daysFromCivil(year, month, day) == days)
        }
        #expect(CronExpression.weekday(days: CronExpression.daysFromCivil(2026, 11, 27)) == 5)  // a Friday
        #expect(CronExpression.weekday(days: CronExpression.daysFromCivil(1969, 12, 28)) == 0)  // a Sunday
    }
}
