import Foundation

/// Durations to and from the seconds of job fields, options and records: the one place where
/// they are converted.
extension Duration {
    /// A number of seconds (a job's `timeout`, `--grace`), rounded to the millisecond.
    public init(seconds: Double) {
        self = .milliseconds(Int64((seconds * 1000).rounded()))
    }

    /// The duration in seconds.
    public var inSeconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }

    /// Whole milliseconds (rounded toward zero), as records count them.
    public var inMilliseconds: Int {
        Int(components.seconds) * 1000 + Int(components.attoseconds / 1_000_000_000_000_000)
    }

    /// The seconds as a user writes them: `2`, `0.5`, `1.25` (to the millisecond).
    public var secondsText: String {
        let millis = inMilliseconds
        return millis % 1000 == 0 ? "\(millis / 1000)" : String(Double(millis) / 1000)
    }
}
