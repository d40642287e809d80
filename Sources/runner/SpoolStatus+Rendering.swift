import Foundation
import RunnerKit

/// `runner status` as text for people and JSON for programs.
extension SpoolStatus {

    /// For `runner status --json`.
    var json: JSONValue {
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
    var text: String {
        let now = Date()
        var lines: [String] = []
        let shown = queued.prefix(5).joined(separator: ", ")
        lines.append("queued:   \(queued.count)" + (queued.isEmpty ? "" : " (\(shown)\(queued.count > 5 ? ", …" : ""))"))
        let watchers = claimed.count
        lines.append("watchers: \(watchers)" + (watchers == 0 ? " (none running)" : ", holding \(claimed.map(\.files.count).reduce(0, +)) file(s)"))
        if orphaned > 0 { lines.append("orphaned: \(orphaned) file(s) in active/ of a watcher that died; the next watcher puts them back in line") }
        lines.append("running:  \(running.count)")
        for job in running.prefix(20) {
            lines.append("  \(Printable.escaped(job.key))  \(Self.age(now.timeIntervalSince(job.startedAt)))  (pid \(job.pid))")
        }
        if running.count > 20 { lines.append("  … and \(running.count - 20) more") }
        lines.append("done:     \(doneCount)" + (latestDone.map { ", latest \($0.name) (\(Self.age(now.timeIntervalSince($0.at))) ago)" } ?? ""))
        lines.append("failed:   \(failedCount)" + (latestFailed.map { f in
            ", latest \(f.name) (\(Self.age(now.timeIntervalSince(f.at))) ago)" + (f.reason.map { ": \(Printable.escaped($0))" } ?? "")
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
