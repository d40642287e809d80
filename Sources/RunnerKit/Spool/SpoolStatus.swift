import Foundation
import Glibc

/// What a spool holds now, read from its folders and lock files alone, so it works with or
/// without a watcher running.
public struct SpoolStatus: Sendable {
    public struct FinishedFile: Sendable {
        public var name: String
        public var at: Date
        /// For a failed file, the first line of its reason.
        public var reason: String?
    }

    public struct RunningJob: Sendable {
        public var key: String
        public var pid: Int
        public var startedAt: Date
    }

    /// Files waiting in inbox/, oldest first.
    public var queued: [String]
    /// Files claimed by live watchers, by watcher.
    public var claimed: [(watcher: String, files: [String])]
    /// Files left in active/ by watchers that died (the next watcher puts them back in line).
    public var orphaned: Int
    public var running: [RunningJob]
    public var doneCount: Int
    public var failedCount: Int
    public var latestDone: FinishedFile?
    public var latestFailed: FinishedFile?
    public var cancelRequests: [String]

    public static func read(_ spool: Spool) -> SpoolStatus {
        let queued = FileSystem.names(in: spool.inbox).filter(Spool.isCandidate).compactMap { name -> (String, Double)? in
            guard let entry = FileSystem.entry("\(spool.inbox)/\(name)") else { return nil }
            return (name, FileSystem.seconds(entry.changed))
        }.sorted { ($0.1, $0.0) < ($1.1, $1.0) }.map(\.0)

        var claimed: [(String, [String])] = []
        var orphaned = 0
        for name in FileSystem.names(in: spool.active).sorted() where !name.hasPrefix(".") {
            guard FileSystem.entry("\(spool.active)/\(name)")?.type == .directory else {
                orphaned += 1
                continue
            }
            let files = FileSystem.names(in: "\(spool.active)/\(name)").filter { !$0.hasPrefix(".") }.sorted()
            if WatcherLease.isAlive(spool: spool, folder: name) {
                claimed.append((name, files))
            } else {
                orphaned += files.count
            }
        }

        let running = SpoolKeyLock(spool: spool).held()
            .map { RunningJob(key: $0.key, pid: $0.pid, startedAt: $0.startedAt) }
            .sorted { $0.startedAt < $1.startedAt }
        let (doneCount, latestDone) = finished(in: spool.done, reasons: false)
        let (failedCount, latestFailed) = finished(in: spool.failed, reasons: true)
        let cancels = FileSystem.names(in: spool.cancel).filter { !$0.hasPrefix(".") }.compactMap { name in
            // No link, no blocking, 4 KiB at most: a FIFO or a huge file there cannot hang `status`.
            FileSystem.readSmall("\(spool.cancel)/\(name)", cap: 4096).flatMap { String(validating: $0, as: UTF8.self) }?
                .trimmingCharacters(in: .newlines)
        }.sorted()
        return SpoolStatus(
            queued: queued, claimed: claimed, orphaned: orphaned, running: running, doneCount: doneCount,
            failedCount: failedCount, latestDone: latestDone, latestFailed: latestFailed, cancelRequests: cancels)
    }

    private static func finished(in folder: String, reasons: Bool) -> (Int, FinishedFile?) {
        var count = 0
        var latest: (name: String, at: Double)?
        for name in FileSystem.names(in: folder) where Spool.isJobFile(name) {
            guard let entry = FileSystem.entry("\(folder)/\(name)") else { continue }
            count += 1
            let at = FileSystem.seconds(entry.changed)
            if latest == nil || at > latest!.at || (at == latest!.at && name > latest!.name) { latest = (name, at) }
        }
        guard let latest else { return (count, nil) }
        var reason: String?
        if reasons, let bytes = FileSystem.readSmall("\(folder)/\(latest.name)\(Spool.errorSuffix)", cap: 64 * 1024) {
            let text = String(decoding: bytes, as: UTF8.self)
            reason = text.split(separator: "\n").first.map(String.init)
        }
        return (count, FinishedFile(name: latest.name, at: Date(timeIntervalSince1970: latest.at), reason: reason))
    }

    // MARK: - Output

    /// For `runner status --json`.
    public var json: JSONValue {
        let now = Date()
        func file(_ f: FinishedFile?) -> JSONValue {
            guard let f else { return .null }
            var members: [(key: String, value: JSONValue)] = [("name", .string(f.name)), ("at", .string(Timestamp.iso8601(f.at)))]
            if let reason = f.reason { members.append(("reason", .string(reason))) }
            return .object(members)
        }
        return .object([
            ("queued", .object([("count", JSONValue(queued.count)), ("files", .array(queued.prefix(100).map { .string($0) }))])),
            ("running", .array(running.map { job in
                .object([
                    ("key", .string(job.key)), ("pid", JSONValue(job.pid)),
                    ("startedAt", .string(Timestamp.iso8601(job.startedAt))),
                    ("ageMs", JSONValue(max(0, Int(now.timeIntervalSince(job.startedAt) * 1000)))),
                ])
            })),
            ("active", .array(claimed.map { entry in
                .object([("watcher", .string(entry.watcher)), ("files", .array(entry.files.map { .string($0) }))])
            })),
            ("orphaned", JSONValue(orphaned)),
            ("done", .object([("count", JSONValue(doneCount)), ("latest", file(latestDone))])),
            ("failed", .object([("count", JSONValue(failedCount)), ("latest", file(latestFailed))])),
            ("cancelRequests", .array(cancelRequests.map { .string($0) })),
        ])
    }

    /// For `runner status`.
    public var text: String {
        let now = Date()
        var lines: [String] = []
        let shown = queued.prefix(5).joined(separator: ", ")
        lines.append("queued:   \(queued.count)" + (queued.isEmpty ? "" : " (\(shown)\(queued.count > 5 ? ", …" : ""))"))
        let watchers = claimed.count
        lines.append("watchers: \(watchers)" + (watchers == 0 ? " (none running)" : ", holding \(claimed.map(\.files.count).reduce(0, +)) file(s)"))
        if orphaned > 0 { lines.append("orphaned: \(orphaned) file(s) in active/ of a watcher that died; the next watcher puts them back in line") }
        lines.append("running:  \(running.count)")
        for job in running.prefix(20) {
            lines.append("  \(job.key)  \(Self.age(now.timeIntervalSince(job.startedAt)))  (pid \(job.pid))")
        }
        if running.count > 20 { lines.append("  … and \(running.count - 20) more") }
        lines.append("done:     \(doneCount)" + (latestDone.map { ", latest \($0.name) (\(Self.age(now.timeIntervalSince($0.at))) ago)" } ?? ""))
        lines.append("failed:   \(failedCount)" + (latestFailed.map { f in
            ", latest \(f.name) (\(Self.age(now.timeIntervalSince(f.at))) ago)" + (f.reason.map { ": \($0)" } ?? "")
        } ?? ""))
        if !cancelRequests.isEmpty { lines.append("cancel requests: \(cancelRequests.joined(separator: ", "))") }
        return lines.joined(separator: "\n")
    }

    static func age(_ seconds: Double) -> String {
        let s = max(0, seconds)
        if s < 10 { return String(format: "%.1f s", s) }
        if s < 120 { return "\(Int(s)) s" }
        if s < 7200 { return "\(Int(s / 60)) min" }
        return "\(Int(s / 3600)) h"
    }
}
