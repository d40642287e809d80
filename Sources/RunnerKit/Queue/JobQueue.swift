import Foundation

/// The job queue in PostgreSQL that runners on many machines share: jobs submitted as rows,
/// claimed with `FOR UPDATE SKIP LOCKED` under a lease, their records written back.
///
/// Tables (schema `runner`, made on first use): `jobs` (one row a job: its key, kind, the job
/// itself, the batch it was submitted in, its parent, its state `queued`, `running`, `waiting`
/// (a parent, for its children) or `done`,
/// who runs it and until when its lease holds, how many times it was claimed, its record),
/// `keys` (the keys running now, one row each: one task per key across every runner), `hosts`
/// (each paced host's next request
/// slot and pause, taken atomically by every runner), `watchers` (each watcher of the fleet: its
/// name, host, version, kinds, lease and last heartbeat), `results` (each key's last record, as
/// its `results/` file says it: validators and payload path for whichever runner runs the key
/// next), `identity` (the queue's id, and the output folder its first watcher stamped),
/// `parents` (how many children each waiting parent has left), `meta` (the schema's version).
/// Channels: `runner_jobs` (jobs were queued), `runner_cancel` (a key to cancel), `runner_pause`
/// (a host asked to be left alone: milliseconds, the runner told, the host, a space between
/// each), `runner_events` (a job ended: JSON, while a watcher serving a live page is alive).
///
/// The statements are in extensions by concern: the tables (`+Schema`), producers' grants and
/// submits (`+Producers`), batches (`+Batches`), claims and leases (`+Claims`), what ends a
/// claim (`+Results`), parents and their children (`+Parents`), the watchers
/// (`+Roster`), keys (`+Keys`), the fleet's pacing (`+Pacing`), cancelling and pruning
/// (`+Cancel`), status (`+Status`), the fleet's output (`+Output`) and schedules
/// (`+Schedules`).
package final class JobQueue: Sendable {
    /// The schema this binary knows; a database with a newer one is refused.
    package static let schemaVersion = 1
    /// A job claimed this many times and abandoned (its runner died) ends failed.
    package static let maxClaims = 3

    /// What `runner --version` says of libpq.
    package static var libraryLine: String { PostgresLibrary.versionLine }

    package let connection: PostgresConnection
    /// How long a claim holds without being renewed.
    package let lease: Duration

    package init(url: String, lease: Duration = .seconds(30)) throws(QueueError) {
        connection = try PostgresConnection(url: url)
        self.lease = lease
        try prepare()
    }

    /// Connects on a thread of its own (libpq blocks), for callers on the concurrency pool.
    package static func connect(url: String, lease: Duration = .seconds(30)) async throws(QueueError) -> JobQueue {
        let thread = BlockingThread(name: "runner queue connect")
        defer { thread.stop() }
        return try await thread.run { () throws(QueueError) -> JobQueue in try JobQueue(url: url, lease: lease) }
    }

    /// The lease as an interval literal.
    var leaseText: String { "\(max(1, lease.inMilliseconds)) milliseconds" }

    // MARK: - Literals

    /// A text array literal: every element quoted, `"` and `\` escaped; nil is NULL.
    static func array(_ values: [String?]) -> String {
        var bytes: [UInt8] = [UInt8(ascii: "{")]
        bytes.reserveCapacity(values.reduce(2) { $0 + ($1?.utf8.count ?? 4) + 3 })
        for (index, value) in values.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            guard let value else {
                bytes.append(contentsOf: "NULL".utf8)
                continue
            }
            bytes.append(UInt8(ascii: "\""))
            for byte in value.utf8 {
                if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { bytes.append(UInt8(ascii: "\\")) }
                bytes.append(byte)
            }
            bytes.append(UInt8(ascii: "\""))
        }
        bytes.append(UInt8(ascii: "}"))
        return String(decoding: bytes, as: UTF8.self)
    }

    /// A bigint array literal.
    static func array(_ ids: [Int64]) -> String { "{" + ids.map(String.init).joined(separator: ",") + "}" }

    /// The first column of the first row (nil: no row, or NULL).
    static func value(_ rows: [[String?]]) -> String? { rows.first?.first ?? nil }

    /// Ids from `id id …` (nil: none).
    static func ids(_ text: String?) -> [Int64] {
        (text ?? "").split(separator: " ").compactMap { Int64($0) }
    }

    /// An int array literal.
    static func numbers(_ values: [Int]) -> String { "{" + values.map(String.init).joined(separator: ",") + "}" }

    /// A bool array literal.
    static func flags(_ values: [Bool]) -> String { "{" + values.map { $0 ? "t" : "f" }.joined(separator: ",") + "}" }
}
